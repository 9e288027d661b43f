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
    /// they would describe another history's bytes; the store's first open replays).
    /// - Parameters:
    ///   - backup: A complete backup (`eventkernel backup`).
    ///   - destination: A new or empty directory.
    ///   - point: Where to cut: ``RestorePoint/end`` by default.
    /// - Returns: The restored store's next position.
    /// - Throws: ``RepositoryError/storage(_:)`` wrapping a ``LogError``:
    ///   ``LogError/Code/backupMismatch`` when `backup` holds no complete backup,
    ///   ``LogError/Code/corruption`` naming a file that does not match the manifest,
    ///   ``LogError/Code/invalidArgument`` for a destination that is not empty or a position
    ///   past the backup's end, ``LogError/Code/io`` when a write fails.
    public static func restore(from backup: URL, to destination: URL, at point: RestorePoint = .end) async throws -> LogPosition {
        do {
            let manifest = try BackupManifest.check(in: backup)
            let dest = destination.path
            if FileManager.default.fileExists(atPath: dest) {
                let entries = (try? FileManager.default.contentsOfDirectory(atPath: dest)) ?? ["?"]
                guard entries.isEmpty else {
                    throw LogError(.invalidArgument, "\(dest) is not empty: restore into a new directory", file: dest)
                }
            }
            let source = try SegmentedLog.openReadOnly(at: backup)
            let end: LogPosition
            switch point {
            case .end: end = manifest.nextPosition
            case .position(let position):
                guard position <= manifest.nextPosition else {
                    try? await source.close()
                    throw LogError(.invalidArgument, "position \(position) is past the backup's end, \(manifest.nextPosition)", position: position)
                }
                end = position
            case .recordedAtOrBefore(let limit):
                end = try lastPosition(in: source, recordedAtOrBefore: limit).map { $0 + 1 } ?? 0
            }
            guard end < manifest.nextPosition else {
                try? await source.close()
                try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: true)
                try manifest.restoreFiles(from: backup, to: destination)
                return manifest.nextPosition
            }
            let target = try SegmentedLog.open(at: destination)
            var next: LogPosition = 0
            while next < end {
                var chunk: [LogEntry] = []
                try source.forEachRecord(from: next, through: min(end, next + 4_096) - 1) { record in
                    chunk.append(LogEntry(timestamp: record.timestamp, payload: Array(record.payload)))
                    return true
                }
                guard !chunk.isEmpty else { throw LogError(.corruption, "the backup ends at position \(next), before \(end)", position: next) }
                let positions = try await target.append(chunk)
                guard positions.lowerBound == next else {
                    throw LogError(.io, "the restored log gave position \(positions.lowerBound) to the record at \(next)", position: next)
                }
                next = positions.upperBound
            }
            try await target.close()
            try? await source.close()
            return end
        } catch let error as LogError {
            throw RepositoryError.storage(StorageFailure(error))
        }
    }
}
