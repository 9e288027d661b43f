#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import Foundation
import KernelPrimitives

extension BackupManifest {
    /// Checks a backup directory against its manifest: every listed file is there and its first
    /// `size` bytes have the listed CRC32C (a restore that verifies itself). A file may be longer:
    /// an incremental backup cut short appends past the listed bytes and never writes below.
    /// - Parameter directory: The backup directory.
    /// - Returns: The manifest.
    /// - Throws: ``LogError``: ``LogError/Code/backupMismatch`` when the directory holds no
    ///   manifest (not a backup, or one cut short); ``LogError/Code/corruption`` naming the
    ///   first file that is missing or differs; the manifest's own errors.
    public static func check(in directory: URL) throws(LogError) -> BackupManifest {
        guard let manifest = try read(in: directory) else {
            throw LogError(.backupMismatch, "\(directory.path) holds no complete backup (no \(fileName): not a backup, or one cut short)", file: directory.path)
        }
        for file in manifest.files {
            let path = directory.path + "/" + file.name
            guard StoreDirectory.exists(path) else {
                throw LogError(.corruption, "a file of the backup is missing", file: path)
            }
            // The listed bytes are the file's first `size`: an incremental backup cut short may
            // have appended past them (it never writes below), and restore copies only these.
            let bytes = try Self.contents(of: path, count: file.size)
            guard Int64(bytes.count) == file.size else {
                throw LogError(.corruption, "the file has \(bytes.count) bytes, the backup's manifest says \(file.size)", file: path, offset: Int64(min(bytes.count, Int(file.size))))
            }
            let crc = bytes.withUnsafeBytes { CRC32C.checksum($0) }
            guard crc == file.crc32c else {
                throw LogError(.corruption, "the file's CRC32C is \(String(format: "%08x", crc)), the backup's manifest says \(String(format: "%08x", file.crc32c))", file: path, offset: 0)
            }
        }
        return manifest
    }

    /// The first `count` bytes of a file (fewer when it is shorter).
    static func contents(of path: String, count: Int64) throws(LogError) -> [UInt8] {
        let file = try OpenFile.open(path, flags: O_RDONLY)
        return try file.read(fromAbsoluteOffset: 0, count: Int(min(count, try file.size())))
    }

    /// Copies a checked backup's files into `destination` (a new or empty directory): every
    /// file written to a temporary name, synced, renamed, the directories synced; the manifest
    /// is not copied (the result is a store, not a backup).
    /// - Parameters:
    ///   - backup: The backup directory (``check(in:)`` first).
    ///   - destination: The directory to restore into.
    ///   - io: The system-call layer.
    /// - Throws: ``LogError`` when a read, write or sync fails, or a file changed since the check.
    public func restoreFiles(from backup: URL, to destination: URL, io: any LogFileIO = PosixFileIO()) throws(LogError) {
        let dest = destination.path
        // The backup's own write routine (subdirectory, temporary name, sync, rename), with
        // nothing known and no linking: every file written.
        var writer = BackupWriter(directory: dest, io: io, known: [:], linking: false)
        var report = BackupReport(manifest: self, incremental: false)
        for file in files {
            let bytes = try Self.contents(of: backup.path + "/" + file.name, count: file.size)
            guard bytes.count == Int(file.size), bytes.withUnsafeBytes({ CRC32C.checksum($0) }) == file.crc32c else {
                throw LogError(.corruption, "the file changed while it was restored", file: backup.path + "/" + file.name)
            }
            _ = try writer.put(file.name, bytes: bytes, linkFrom: nil, report: &report)
        }
        try writer.synchronizeDirectoriesWithNewEntries()
    }
}

extension SegmentedLog {
    /// The log's batches that end at or before `end`, in order, as the positions each holds.
    ///
    /// A batch holds one or more whole atomic appends (an `execute` command, an `appendAll`;
    /// group commit merges concurrent ones), never part of one: a copy that must
    /// keep the log's atomicity (a restore cut at a point) cuts only between batches and
    /// appends each of these as one batch again.
    /// - Parameter end: The position to stop at; a batch that holds it or runs past it is left out.
    /// - Returns: The batches' position ranges, contiguous from the log's first position; the
    ///   last one's upper bound is the greatest batch boundary at or before `end`.
    public func batches(endingAtOrBefore end: LogPosition) -> [Range<LogPosition>] {
        core.state.withLock { state in
            var ranges: [Range<LogPosition>] = []
            for segment in state.segments {
                for batch in segment.batches {
                    guard batch.endPosition <= end else { return ranges }
                    ranges.append(batch.firstPosition..<batch.endPosition)
                }
            }
            return ranges
        }
    }

    /// ``batches(endingAtOrBefore:)`` with consecutive batches gathered into ranges of at most
    /// `maximum` records (a batch holding more stays alone): how a copy writes this log
    /// elsewhere in chunks that never cut an atomic append.
    /// - Parameters:
    ///   - end: The position to stop at; a batch that holds it or runs past it is left out.
    ///   - maximum: The most records a range gathers from several batches.
    /// - Returns: Contiguous ranges from the log's first position.
    public func batches(endingAtOrBefore end: LogPosition, atMost maximum: Int) -> [Range<LogPosition>] {
        let batches = batches(endingAtOrBefore: end)
        guard let first = batches.first else { return [] }
        var gathering = BatchGathering(from: first.lowerBound, atMost: maximum)
        for batch in batches { gathering.add(endingAt: batch.upperBound) }
        return gathering.finished()
    }
}
