public import EventLog
public import Foundation

/// Where ``EventStore/restore(from:to:at:)`` cuts the restored log.
public enum RestorePoint: Hashable, Sendable {
    /// The backup's end: every file as backed up, snapshots included.
    case end
    /// The events below this position (the log cut there; snapshots are rebuilt at first open).
    case position(LogPosition)
    /// The events up to the last one recorded at or before this time (the rule of
    /// ``EventStore/lastPosition(recordedAtOrBefore:)-(LogTimestamp)``).
    case recordedAtOrBefore(LogTimestamp)
}

extension EventStore {
    /// Restores a backup into a new store directory, at its end or cut at an earlier point.
    ///
    /// The backup is checked first against its manifest (every file's size and CRC32C). At
    /// its end, its files are copied; at an earlier point, the events below it are appended to
    /// a new log with their positions and recording times (the snapshots are not carried:
    /// they would describe another history's bytes; the store's first open replays). All of
    /// it is written into a sibling `<destination>.restoring-XXXX`, synced, and renamed to
    /// `destination` at the end (its parent synced): killed midway, a restore leaves no
    /// `destination`. The file copies run on a thread of their own.
    /// - Parameters:
    ///   - backup: A complete backup (`eventkernel backup`).
    ///   - destination: A new or empty directory.
    ///   - point: Where to cut: ``RestorePoint/end`` by default.
    /// - Returns: The restored store's next position.
    /// - Throws: ``RepositoryError/storage(_:)`` wrapping a `LogError`:
    ///   `LogError/Code/backupMismatch` when `backup` holds no complete backup,
    ///   `LogError/Code/corruption` naming a file that does not match the manifest,
    ///   `LogError/Code/invalidArgument` for a destination that is not empty or a position
    ///   past the backup's end, `LogError/Code/io` when a write fails.
    public static func restore(from backup: URL, to destination: URL, at point: RestorePoint = .end) async throws -> LogPosition {
        let dest = destination.standardizedFileURL.path
        let staging: String
        let manifest: BackupManifest
        do {
            if FileManager.default.fileExists(atPath: dest) {
                let entries = (try? FileManager.default.contentsOfDirectory(atPath: dest)) ?? ["?"]
                guard entries.isEmpty else {
                    throw LogError(.invalidArgument, "\(dest) is not empty: restore into a new directory", file: dest)
                }
            }
            // Everything goes into a sibling first, renamed to `destination` only when whole and
            // synced: a restore killed midway leaves no directory that opens as a shorter store.
            staging = dest + ".restoring-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            manifest = try await runOnThreadOfItsOwn(named: "EventKernel restore") { () throws -> BackupManifest in
                let manifest = try BackupManifest.check(in: backup)
                try StoreDirectory.createDurably(staging, io: PosixFileIO())
                try manifest.restoreFiles(from: backup, to: URL(filePath: staging, directoryHint: .isDirectory))
                return manifest
            }
        } catch let error as LogError {
            throw RepositoryError.storage(StorageFailure(error))
        }
        do {
            var end = manifest.nextPosition
            if point != .end {
                // A cut: the events below it appended to a new log, from the restored copy (the
                // backup directory itself may hold an incremental backup's files past the
                // manifest's).
                let whole = URL(filePath: staging, directoryHint: .isDirectory)
                let cut = URL(filePath: staging + "-cut", directoryHint: .isDirectory)
                let source = try SegmentedLog.openReadOnly(at: whole)
                do {
                    switch point {
                    case .end: break
                    case .position(let position):
                        guard position <= manifest.nextPosition else {
                            throw LogError(.invalidArgument, "position \(position) is past the backup's end, \(manifest.nextPosition)", position: position)
                        }
                        end = position
                    case .recordedAtOrBefore(let limit):
                        end = try lastPosition(in: source, recordedAtOrBefore: limit).map { $0 + 1 } ?? 0
                    }
                    try await appendPrefix(of: source, below: end, to: cut)
                } catch {
                    try? await source.close()
                    try? FileManager.default.removeItem(at: cut)
                    throw error
                }
                try? await source.close()
                try FileManager.default.removeItem(at: whole)
                try FileManager.default.moveItem(at: cut, to: whole)
            }
            try await runOnThreadOfItsOwn(named: "EventKernel restore") {
                try StoreDirectory.moveDurably(staging, to: dest, io: PosixFileIO())
            }
            return end
        } catch {
            try? FileManager.default.removeItem(atPath: staging)
            if let error = error as? LogError { throw RepositoryError.storage(StorageFailure(error)) }
            throw error
        }
    }

    /// Appends the records of `source` below `end` to a new log in `target`, with their
    /// positions and recording times.
    private static func appendPrefix(of source: SegmentedLog, below end: LogPosition, to target: URL) async throws {
        let log = try SegmentedLog.open(at: target)
        var next: LogPosition = 0
        do {
            while next < end {
                var chunk: [LogEntry] = []
                try source.forEachRecord(from: next, through: min(end, next + 4_096) - 1) { record in
                    chunk.append(LogEntry(timestamp: record.timestamp, payload: Array(record.payload)))
                    return true
                }
                guard !chunk.isEmpty else { throw LogError(.corruption, "the backup ends at position \(next), before \(end)", position: next) }
                let positions = try await log.append(chunk)
                guard positions.lowerBound == next else {
                    throw LogError(.io, "the restored log gave position \(positions.lowerBound) to the record at \(next)", position: next)
                }
                next = positions.upperBound
            }
        } catch {
            try? await log.close()
            throw error
        }
        try await log.close()
    }
}
