#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import EventLog
public import Foundation

/// Where ``EventStore/restore(from:to:at:)`` cuts the restored log.
///
/// A restore never holds part of a stored batch, which holds one or more whole atomic appends
/// (an `execute` command, an `appendAll`; the log's group commit merges concurrent ones): a
/// point that falls inside a batch is rounded down to that batch's start
/// (``RestoreResult/roundedDown``).
public enum RestorePoint: Hashable, Sendable {
    /// The backup's end: every file as backed up, snapshots included.
    case end
    /// The events below this position (the log cut there; snapshots are rebuilt at first open),
    /// or below the start of the batch holding it.
    case position(LogPosition)
    /// What the store knew at this time: the log's longest prefix recorded at or before it
    /// (the rule of ``EventStore/lastPosition(recordedAtOrBefore:)-(LogTimestamp)``: the cut is
    /// before the first event recorded later, whatever the times after it say), or below the
    /// start of the batch holding that prefix's end when the batch goes on past it.
    case recordedAtOrBefore(LogTimestamp)
}

/// Where ``EventStore/restore(from:to:at:)`` cut the restored log.
public struct RestoreResult: Hashable, Sendable {
    /// One past the last restored position: the restored store holds the positions below.
    public var nextPosition: LogPosition
    /// Where the restore point asked to cut: ``nextPosition``, or more when that fell inside
    /// an atomic batch and the cut was rounded down to the batch's start.
    public var requestedPosition: LogPosition
    /// Whether the cut was rounded down to a batch's start (the requested one was inside it).
    public var roundedDown: Bool { nextPosition < requestedPosition }

    /// Creates a result.
    /// - Parameters:
    ///   - nextPosition: One past the last restored position.
    ///   - requestedPosition: Where the restore point asked to cut.
    public init(nextPosition: LogPosition, requestedPosition: LogPosition) {
        self.nextPosition = nextPosition
        self.requestedPosition = requestedPosition
    }
}

extension EventStore {
    /// Restores a backup into a new store directory, at its end or cut at an earlier point.
    ///
    /// The backup is checked first against its manifest (every file's size and CRC32C). At
    /// its end, its files are copied; at an earlier point, the batches below it are appended to
    /// a new log one by one, as the same batches with the same positions and recording times
    /// (a point inside a batch is rounded down to its start; the snapshots are not carried:
    /// they would describe another history's bytes; the store's first open replays). All of
    /// it is written into a sibling `<destination>.restoring-XXXX`, synced, and renamed to
    /// `destination` at the end (its parent synced): killed midway, a restore leaves no
    /// `destination`. The file copies run on a thread of their own.
    /// - Parameters:
    ///   - backup: A complete backup (`eventkernel backup`).
    ///   - destination: A new or empty directory.
    ///   - point: Where to cut: ``RestorePoint/end`` by default.
    /// - Returns: The restored store's next position, and the one the point asked for.
    /// - Throws: ``RepositoryError/storage(_:)`` wrapping a `LogError`:
    ///   `LogError/Code/backupMismatch` when `backup` holds no complete backup,
    ///   `LogError/Code/corruption` naming a file that does not match the manifest,
    ///   `LogError/Code/invalidArgument` for a destination that is not a new path or an empty
    ///   directory (one holding anything, a file, a symbolic link), judged before any work, or a
    ///   position past the backup's end, `LogError/Code/io` when a write fails.
    public static func restore(from backup: URL, to destination: URL, at point: RestorePoint = .end) async throws -> RestoreResult {
        let dest = destination.standardizedFileURL.path
        let staging: String
        let manifest: BackupManifest
        do {
            try requireEmpty(dest)
            staging = stagingPath(for: dest)
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
            var result = RestoreResult(nextPosition: manifest.nextPosition, requestedPosition: manifest.nextPosition)
            if point != .end {
                // A cut: the events below it appended to a new log, from the restored copy (the
                // backup directory itself may hold an incremental backup's files past the
                // manifest's).
                let whole = URL(filePath: staging, directoryHint: .isDirectory)
                let cut = URL(filePath: staging + "-cut", directoryHint: .isDirectory)
                let source = try SegmentedLog.openReadOnly(at: whole)
                do {
                    var requested = manifest.nextPosition
                    switch point {
                    case .end: break
                    case .position(let position):
                        guard position <= manifest.nextPosition else {
                            throw LogError(.invalidArgument, "position \(position) is past the backup's end, \(manifest.nextPosition)", position: position)
                        }
                        requested = position
                    case .recordedAtOrBefore(let limit):
                        requested = try lastPosition(in: source, recordedAtOrBefore: limit).map { $0 + 1 } ?? 0
                    }
                    // Whole batches only: an atomic append never spans batches, and a restore must
                    // never hold half of one.
                    let batches = source.batches(endingAtOrBefore: requested)
                    result = RestoreResult(nextPosition: batches.last?.upperBound ?? 0, requestedPosition: requested)
                    try await appendBatches(batches, of: source, to: cut, whenCompacted: "; a compacted backup restores whole, at its end")
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
            return result
        } catch {
            try? FileManager.default.removeItem(atPath: staging)
            if let error = error as? LogError { throw RepositoryError.storage(StorageFailure(error)) }
            throw error
        }
    }

    /// Restores the records of `source` (any log: the PostgreSQL one, or a directory's for
    /// `eventkernel copy`) in `batches` into a new store directory: `batches` are ranges of
    /// positions from 0, contiguous, none splitting an atomic append, and each is appended as
    /// one batch again, with its positions and recording times.
    /// Written into a sibling `<destination>.restoring-XXXX`, synced and renamed into place
    /// when whole, as a restore from a backup is.
    /// - Parameters:
    ///   - source: The log to read.
    ///   - batches: Ranges no atomic append straddles, from 0, for the records to restore
    ///     (the caller cut them at or below `requestedPosition`).
    ///   - requestedPosition: Where the restore point asked to cut, for the result.
    ///   - destination: A new or empty directory.
    /// - Returns: The restored store's next position (the last batch's end) and the requested one.
    /// - Throws: ``RepositoryError/storage(_:)`` wrapping a `LogError`: `invalidArgument` for a
    ///   destination that is not a new path or an empty directory (as ``restore(from:to:at:)``)
    ///   or batches that are not contiguous from 0,
    ///   `corruption` when the source holds fewer records than a batch says, `io`.
    package static func restore(records source: any RecordLog, in batches: [Range<LogPosition>], requestedPosition: LogPosition,
                                to destination: URL) async throws -> RestoreResult {
        let dest = destination.standardizedFileURL.path
        let staging = stagingPath(for: dest)
        do {
            var next: LogPosition = 0
            for batch in batches {
                guard batch.lowerBound == next, !batch.isEmpty else {
                    throw LogError(.invalidArgument, "the batches to restore must be contiguous from 0: \(batch) follows \(next)", position: batch.lowerBound)
                }
                next = batch.upperBound
            }
            guard next <= requestedPosition else {
                throw LogError(.invalidArgument, "the batches to restore end at \(next), past the requested position \(requestedPosition)", position: next)
            }
            try requireEmpty(dest)
            try StoreDirectory.createDurably(staging, io: PosixFileIO())
            try await appendBatches(batches, of: source, to: URL(filePath: staging, directoryHint: .isDirectory), whenCompacted: "")
            try await runOnThreadOfItsOwn(named: "EventKernel restore") {
                try StoreDirectory.moveDurably(staging, to: dest, io: PosixFileIO())
            }
            return RestoreResult(nextPosition: next, requestedPosition: requestedPosition)
        } catch {
            try? FileManager.default.removeItem(atPath: staging)
            if let error = error as? LogError { throw RepositoryError.storage(StorageFailure(error)) }
            throw error
        }
    }

    /// Refuses, before any work, a destination a restore cannot end in: a restore goes into a
    /// new path or an empty directory only, because it renames its sibling into place, which
    /// only those can take (the rule of every restore and of `eventkernel copy`). A symbolic
    /// link is refused, even to an empty directory: the rename would have to replace the link
    /// (and fails), never fill its target, so the whole restore would be done for nothing.
    /// - Throws: `LogError/Code/invalidArgument` naming it (a symbolic link, with its target; a
    ///   file; a directory that is not empty); `LogError/Code/io` when it cannot be examined.
    private static func requireEmpty(_ dest: String) throws(LogError) {
        var st = stat()
        guard lstat(dest, &st) == 0 else {
            let number = errno
            if number == ENOENT { return }
            throw LogError(.io, "cannot examine the destination \(dest): \(String(cString: strerror(number)))", file: dest, systemErrorNumber: number)
        }
        switch st.st_mode & S_IFMT {
        case S_IFDIR:
            break
        case S_IFLNK:
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: dest)) ?? "?"
            throw LogError(.invalidArgument, "\(dest) is a symbolic link (to \(target)), not a directory: the restored store is renamed into place, which replaces a link rather than filling its target; give the target's path, or a new path", file: dest)
        default:
            throw LogError(.invalidArgument, "\(dest) is a file, not a directory: the destination must be a new or empty directory", file: dest)
        }
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: dest)) ?? ["?"]
        guard entries.isEmpty else {
            throw LogError(.invalidArgument, "\(dest) is not empty: the destination must be a new or empty directory", file: dest)
        }
    }

    /// Where a restore into `dest` is written first: a sibling, renamed to `dest` only when
    /// whole and synced, so that a restore killed midway leaves no directory that opens as a
    /// shorter store.
    private static func stagingPath(for dest: String) -> String {
        dest + ".restoring-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
    }

    /// Appends `batches` of `source` to a new log in `target`, each as one batch again, with
    /// their positions and recording times; `advice` ends the refusal of a compacted source
    /// (what the caller's user can do instead).
    private static func appendBatches(_ batches: [Range<LogPosition>], of source: any RecordLog, to target: URL,
                                      whenCompacted advice: String) async throws {
        var configuration = SegmentedLog.Configuration()
        // One sync at the close, not one per batch: the directory becomes the store only after
        // that (renamed into place when whole).
        configuration.durability = .buffered(syncInterval: .seconds(3_600))
        let log = try SegmentedLog.open(at: target, configuration: configuration)
        var index = 0
        do {
            while index < batches.count {
                // Read a run of whole batches (about 4,096 records) in one pass, then append each.
                var last = index
                while last + 1 < batches.count && batches[last + 1].upperBound - batches[index].lowerBound <= 4_096 { last += 1 }
                var records: [LogEntry] = []
                try source.forEachRecord(from: batches[index].lowerBound, through: batches[last].upperBound - 1) { record in
                    records.append(LogEntry(timestamp: record.timestamp, payload: Array(record.payload)))
                    return true
                }
                let expected = Int(batches[last].upperBound - batches[index].lowerBound)
                // Compaction leaves gaps that an append cannot recreate (positions are assigned
                // gap-free): say so, rather than call the source damaged.
                if records.count < expected, let gap = try source.firstCompactedPosition(in: batches[index].lowerBound..<batches[last].upperBound) {
                    throw LogError(.invalidArgument,
                        "the source was compacted (position \(gap) lies in a batch compaction rewrote): its gaps cannot be appended again yet (Docs/Forgetting.md)\(advice)",
                        position: gap)
                }
                guard records.count == expected else {
                    throw LogError(.corruption, "the source holds \(records.count) records at positions \(batches[index].lowerBound)..<\(batches[last].upperBound), its batches say \(expected)",
                                   position: batches[index].lowerBound)
                }
                var offset = 0
                for batch in batches[index...last] {
                    let count = Int(batch.count)
                    let positions = try await log.append(Array(records[offset..<(offset + count)]))
                    guard positions == batch else {
                        throw LogError(.io, "the restored log gave positions \(positions) to the batch at \(batch)", position: batch.lowerBound)
                    }
                    offset += count
                }
                index = last + 1
            }
        } catch {
            try? await log.close()
            throw error
        }
        try await log.close()
    }
}
