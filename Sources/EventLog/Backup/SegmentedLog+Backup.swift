#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import Foundation
import KernelPrimitives

/// Online, incremental backups of a segmented log (Docs/Backups.md).
///
/// The rule, in one place: the log's segments and their committed lengths are taken under the
/// log's lock for a moment (no lock is held while bytes are copied: writers go on), so the
/// backup is the log's exact prefix up to one position. Sealed segments never change and the
/// active one is copied only up to its committed length, so the copy needs no lock. Every batch
/// is checked when it is first copied (header and payload CRC32C, as the log stores them; an
/// incremental backup compares what it already holds by batch-header fingerprint, or by its
/// last batch header when it reads the very file it copied before), every file and every new
/// directory entry is synced, and the manifest is written last, atomically: a directory
/// holding a manifest is a complete backup, and one without it is never trusted.
extension SegmentedLog {
    /// One segment as the backup sees it: its open file and the batches committed when the
    /// plan was taken.
    struct BackupSegment {
        let base: LogPosition
        let file: OpenFile
        let sealed: Bool
        let batches: [BatchLocation]
        let dataEnd: Int64
        let nextPosition: LogPosition
    }

    /// Backs the log up into `destination` at the position it has now, while writers go on.
    ///
    /// Into a directory holding an earlier complete backup of the same store and history,
    /// only the files that are new or changed (size or CRC32C differ from the manifest's) are
    /// written; an extra file its caller vouches is unchanged
    /// (``BackupExtraFile/init(name:unchanged:)``) is kept by its size alone. A directory
    /// holding a backup in progress (killed midway) is resumed: nothing in it is trusted, every
    /// file is written again.
    /// - Parameters:
    ///   - destination: The backup directory (created when missing).
    ///   - options: Linking, starting over, the system-call layer.
    ///   - extraFiles: Given the backup's position and history epoch, the files beside the log
    ///     the backup carries (EventKernel's snapshots), checked by their owner.
    /// - Returns: What was copied, linked, kept and removed, and the manifest.
    /// - Throws: ``LogError``: ``LogError/Code/locked`` when another backup (or a writer) holds
    ///   the destination's lock; ``LogError/Code/backupMismatch`` for a destination holding
    ///   another store's or another history's backup, or files that are not a backup (unless
    ///   ``BackupOptions/restart``, which still never removes files that are not a backup's),
    ///   and, `restart` or not, for a directory that holds something but no backup (a store:
    ///   `refuseUnlessBackupOrEmpty(_:names:restart:)`), left as it was;
    ///   ``LogError/Code/invalidArgument`` for the store itself or a directory inside it;
    ///   ``LogError/Code/corruption`` with the source file, offset and position when a batch
    ///   fails its checksums on the way; ``LogError/Code/io`` when a read, write or sync fails.
    ///   The destination then holds no manifest, but a restart over a complete backup (written
    ///   beside it and exchanged) leaves that backup as it was.
    public func backup(
        to destination: URL, options: BackupOptions = BackupOptions(),
        extraFiles: (LogPosition, UInt64) throws -> [BackupExtraFile] = { _, _ in [] }
    ) throws -> BackupReport {
        // Judged before anything is made or locked in it: a refused destination is left exactly
        // as it was (no directory, no `LOCK`).
        try Self.requireBackupDestination(destination.path, source: core.directory, restart: options.restart)
        // Over a complete backup, a restart writes beside it and exchanges the two: the
        // destination is never without a complete backup.
        if options.restart, let report = try backupBesideAndExchange(to: destination, options: options, extraFiles: extraFiles) {
            return report
        }
        // The epoch changes only by a cut of the history, which an open log does not make
        // while it serves appends; read first, not under the state lock (one lock at a time).
        let epoch = historyEpoch
        // The plan: taken under the log's lock, for a moment.
        let segments = core.state.withLock { state in
            state.segments.map { BackupSegment(base: $0.basePosition, file: $0.file, sealed: $0.sealed,
                                               batches: $0.batches, dataEnd: $0.dataEnd, nextPosition: $0.nextPosition) }
        }
        let position = segments.last?.nextPosition ?? 0
        let io = options.fileIO
        let dest = destination.path
        do throws(LogError) { try StoreDirectory.createDurably(dest, io: io) } catch {
            // A destination that cannot be made is an I/O failure, whatever the reason (the
            // store's own "not a store" is about the source).
            throw LogError(.io, "cannot create the backup directory: \(error.message)", file: error.file ?? dest,
                           systemErrorNumber: error.systemErrorNumber)
        }
        // One backup at a time per directory: two would share temporary names and each
        // remove the other's files, and the last manifest would describe bytes the other wrote.
        // Held to the end (released when `lock` goes); a store's writer takes the same lock.
        let lockExisted = StoreDirectory.exists(dest + "/" + DirectoryLock.fileName)
        let lock = try Self.lockDestination(dest, onWait: options.onLockWait)
        defer { lock.unlock() }
        let identity = try Self.storeIdentity(segments)
        let previous: BackupManifest?
        do throws(LogError) {
            previous = try Self.previousBackup(in: destination, identity: identity, epoch: epoch, segments: segments, options: options)
        } catch {
            // Refused: the directory is left as it was found, without the lock file this made.
            if !lockExisted { unlink(dest + "/" + DirectoryLock.fileName) }
            throw error
        }
        // From here until the new manifest, the directory is a backup in progress. The earlier
        // manifest stays: no file it lists changes before the new one replaces it (files only
        // grow past their listed size, new ones get new names, superseded ones go after), so a
        // backup killed here leaves the earlier complete backup. Only a file it lists that must
        // be rewritten (not grown) withdraws it first (``BackupWriter/withdrawPrevious()``).
        // The marker is empty, so its name is all it says: made in place (no temporary to sync
        // and rename) and durable with the directory that names it.
        _ = try OpenFile.open(dest + "/" + BackupManifest.partialFileName, flags: O_WRONLY | O_CREAT)
        try StoreDirectory.synchronize(dest, io: io)
        let known = Dictionary((previous?.files ?? []).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        var writer = BackupWriter(directory: dest, io: io, known: known, linking: options.link)
        var report: BackupReport
        var files: [BackupManifest.File] = []
        do {
            if previous == nil {
                // Not built on (none, --restart, cut short): every file is written again, so no
                // manifest may stay to describe what is being replaced.
                try StoreDirectory.remove(dest + "/" + BackupManifest.fileName)
                try StoreDirectory.synchronize(dest, io: io)
            }

            report = BackupReport(manifest: BackupManifest(format: BackupManifest.currentFormat, storeIdentity: identity,
                                                           historyEpoch: epoch, nextPosition: position, lastBatch: nil,
                                                           createdAt: "", files: []),
                                  incremental: previous != nil)
            // A compaction rewriting a sealed segment replaces its file and then its index: a
            // segment read from one version and its index copied from the other would disagree
            // (and the index would be dropped as invalid). So the segments and their indexes are
            // copied under the maintenance lock rewrites take, one at a time, from the segments
            // as they are now (a rewrite since the plan changed their files and batches, never
            // their positions, so the plan's position still holds). Only this part: the caller's
            // `extraFiles` and the destination lock's `onLockWait` run under no lock (a closure
            // that takes a lock, or starts another backup, must not deadlock), and nothing
            // else the backup reads is replaced by a rewrite.
            try core.maintenance.withLock { _ in
                let current = core.state.withLock { state in
                    segments.map { planned in
                        guard planned.sealed, let now = state.segments.first(where: { $0.basePosition == planned.base && $0.sealed }) else { return planned }
                        return BackupSegment(base: now.basePosition, file: now.file, sealed: true, batches: now.batches,
                                             dataEnd: now.dataEnd, nextPosition: now.nextPosition)
                    }
                }
                for segment in current {
                    let name = Segment.Name.segment(segment.base)
                    let source = Self.identity(of: segment.file)
                    if let old = known[name], old.size == segment.dataEnd, let headers = old.headers, writer.holds(name, size: old.size),
                       try Self.sameSegment(segment, listedAs: old, headers: headers, source: source, copyAt: dest + "/" + name) {
                        // A segment the earlier backup holds: the same size and the same batch headers
                        // (each with its payload's CRC32C), so the same bytes, not read again. Sealed
                        // or active alike: a log never rewrites its committed bytes in place, it
                        // only appends past them.
                        report.unchangedFiles.append(name)
                        var entry = old
                        entry.source = source
                        files.append(entry)
                    } else if let old = known[name], let headers = old.headers, old.size < segment.dataEnd, writer.canGrow(name, from: old),
                              let tail = try Self.checkedTail(of: segment, after: old.size, headers: headers,
                                                              prefixVouched: Self.vouchedPrefix(of: segment, listedAs: old, source: source,
                                                                                                copyAt: dest + "/" + name)) {
                        // The earlier copy is this segment's prefix (the same batch headers up to its
                        // listed size, each with its payload's CRC32C: the rule that keeps a sealed
                        // segment unread), so only the tail is read, checked and appended: an
                        // incremental backup costs what the log grew by, not the active segment's size.
                        var entry = try writer.append(name, tail: tail.bytes, checksum: tail.crc32c, to: old, report: &report)
                        entry.headers = tail.headers
                        entry.source = source
                        files.append(entry)
                    } else {
                        let (bytes, crc32c) = try Self.checkedSegmentBytes(segment)
                        // The file's CRC32C cannot tell segments apart whose batch headers differ (a
                        // CRC over a block followed by its own CRC is a constant): the earlier copy is
                        // kept, or grown, only when the batch headers it covers are these too.
                        var sameHeaders = true
                        if let old = known[name], let oldHeaders = old.headers {
                            sameHeaders = Self.headersChecksum(bytes, segment, upTo: old.size) == oldHeaders
                        }
                        var entry = try writer.put(name, bytes: bytes, checksum: crc32c, linkFrom: segment.sealed ? segment.file : nil,
                                                   trustingEarlierCopy: sameHeaders, report: &report)
                        entry.headers = Self.headersChecksum(bytes, segment)
                        entry.source = source
                        files.append(entry)
                    }
                    if segment.sealed {
                        let indexPath = core.directory + "/" + Segment.Name.index(segment.base)
                        if let (index, indexFile) = try Self.checkedIndexBytes(at: indexPath, segment: segment) {
                            files.append(try writer.put(Segment.Name.index(segment.base), bytes: index, linkFrom: indexFile, report: &report))
                        }
                    }
                }
                if let last = current.last(where: { !$0.batches.isEmpty }), let batch = last.batches.last {
                    let header = try last.file.read(fromAbsoluteOffset: batch.offset, count: BatchHeader.size)
                    report.manifest.lastBatch = Self.mark(segment: last.base, offset: batch.offset, header: header)
                }
            }
            let storePath = core.directory + "/" + StoreManifest.fileName
            if StoreDirectory.exists(storePath) {
                let file = try OpenFile.open(storePath, flags: O_RDONLY)
                let bytes = try file.read(fromAbsoluteOffset: 0, count: StoreManifest.size + 1)
                if case .failure(var error) = StoreManifest.decode(bytes) {
                    error.file = storePath
                    throw error
                }
                files.append(try writer.put(StoreManifest.fileName, bytes: bytes, linkFrom: nil, report: &report))
            }
            for extra in try extraFiles(position, epoch) {
                guard let earlier = extra.earlierCopy else {
                    files.append(try writer.put(extra.name, bytes: extra.bytes, checksum: extra.crc32c, linkFrom: nil, report: &report))
                    continue
                }
                if let old = writer.earlierCopy(of: extra.name, size: earlier.size) {
                    report.unchangedFiles.append(extra.name)
                    files.append(old)
                } else if let bytes = try earlier.read() {
                    files.append(try writer.put(extra.name, bytes: bytes, linkFrom: nil, report: &report))
                }
            }
            try writer.synchronizeDirectoriesWithNewEntries()
            report.manifest.files = files.sorted { $0.name < $1.name }
            report.manifest.createdAt = Date.now.formatted(.iso8601)
            // The new manifest replaces the earlier one in one rename: the directory is the earlier
            // complete backup until here, the new one after.
            try StoreDirectory.writeAtomically(try report.manifest.encoded(), directory: dest, name: BackupManifest.fileName, io: io)
            try StoreDirectory.remove(dest + "/" + BackupManifest.partialFileName)
        } catch {
            // A round that failed (a full disk, EIO) over an earlier backup it did not withdraw:
            // the directory goes back to exactly that backup, readable again.
            if let previous, !writer.withdrewPrevious { BackupWriter.returnToPrevious(previous, in: dest) }
            throw error
        }
        // What an earlier backup held and this one does not (older snapshots): removed only now,
        // when no manifest lists them.
        let kept = Set(files.map(\.name))
        var touched: Set<String> = []
        for name in try Self.backupContents(of: dest).ownedFiles where !kept.contains(name) && name != BackupManifest.partialFileName && name != DirectoryLock.fileName && name != BackupManifest.fileName {
            try StoreDirectory.remove(dest + "/" + name)
            report.removedFiles.append(name)
            if let slash = name.lastIndex(of: "/") { touched.insert(String(name[..<slash])) }
        }
        for directory in touched.sorted() { try StoreDirectory.synchronize(dest + "/" + directory, io: io) }
        try StoreDirectory.synchronize(dest, io: io)
        return report
    }

    /// The destination's lock, held for the whole backup.
    /// - Throws: ``LogError/Code/locked`` naming the destination when another backup (or a
    ///   store's writer) holds it.
    static func lockDestination(_ dest: String, onWait: (@Sendable () -> Void)?) throws(LogError) -> DirectoryLock {
        // `backups list` (BackupManifest.state(of:)) probes the lock with a shared flock for a
        // moment: that is waited out, a backup holding it is not.
        let deadline = ContinuousClock.now + .milliseconds(250)
        var waiting = false
        while true {
            do {
                return try DirectoryLock(directory: dest)
            } catch where error.code == .locked && ContinuousClock.now < deadline {
                if !waiting {
                    waiting = true
                    onWait?()
                }
                usleep(5_000)
            } catch {
                guard error.code == .locked else { throw error }
                throw LogError(.locked, "\(dest) is being written by another backup (or is a store open by a writer): wait for it to end, or back up into another directory",
                               file: error.file, systemErrorNumber: error.systemErrorNumber)
            }
        }
    }

    /// The CRC32C of a segment's header and its batch headers in order, each without its own
    /// trailing CRC32C field, read from the file: a fingerprint of the whole segment (each batch
    /// header holds its payload's CRC32C and lengths) that reads the headers alone, small
    /// batches' in windows of up to 4 MiB.
    ///
    /// The trailing checksums are left out because a CRC32C continued over a block followed by
    /// that block's own CRC32C ends in a constant state: chaining whole headers would give every
    /// segment of the same batch count the same fingerprint.
    private static func headersChecksum(_ segment: BackupSegment, upTo end: Int64? = nil) throws(LogError) -> UInt32 {
        let header = try segment.file.read(fromAbsoluteOffset: 0, count: SegmentHeader.size)
        var crc = fingerprintStart(header[...])
        // Small batches (a writer's synced single appends: tens of bytes each) are read in
        // windows of up to 4 MiB rather than one read per header: a read per batch costs a
        // system call per event, tens of thousands per backup, and with headers 4 KiB apart or
        // less on average it touched nearly every page anyway. Large ones: a read each.
        let limit = end ?? segment.dataEnd
        let windowed = !segment.batches.isEmpty && segment.dataEnd / Int64(segment.batches.count) <= 4_096
        var window: [UInt8] = [], windowStart: Int64 = 0
        for batch in segment.batches where end.map({ batch.endOffset <= $0 }) ?? true {
            if windowed, batch.offset < windowStart || batch.offset + Int64(BatchHeader.size) > windowStart + Int64(window.count) {
                windowStart = batch.offset
                window = try segment.file.read(fromAbsoluteOffset: batch.offset,
                                               count: Int(max(Int64(BatchHeader.size), min(Int64(4 << 20), limit - batch.offset))))
            }
            let start = Int(batch.offset - windowStart)
            if windowed, start + BatchHeader.size <= window.count {
                crc = fingerprint(window[start..<(start + BatchHeader.size)], continuing: crc)
            } else {
                let bytes = try segment.file.read(fromAbsoluteOffset: batch.offset, count: BatchHeader.size)
                crc = fingerprint(bytes[...], continuing: crc)
            }
        }
        return crc
    }

    /// ``headersChecksum(_:)`` of a segment's bytes already read; of its batches that end at or
    /// before `end` when given (the fingerprint an earlier backup recorded for a prefix).
    private static func headersChecksum(_ bytes: [UInt8], _ segment: BackupSegment, upTo end: Int64? = nil) -> UInt32 {
        var crc = fingerprintStart(bytes[0..<SegmentHeader.size])
        for batch in segment.batches where end.map({ batch.endOffset <= $0 }) ?? true {
            let start = Int(batch.offset)
            crc = fingerprint(bytes[start..<(start + BatchHeader.size)], continuing: crc)
        }
        return crc
    }

    /// The file's device, inode and inode generation, as a manifest records them
    /// (``BackupManifest/File/source``); `nil` when the file system does not give a generation
    /// (the segment is then fingerprinted on every round) or `fstat` fails.
    ///
    /// The generation (`FS_IOC_GETVERSION`) is what makes it name one file: ext4 gives a freed
    /// inode number to the next file it creates at once, so a segment compacted twice between two
    /// backups can be back at the number the first backup read, and the generation, which the file
    /// system draws anew for each inode it allocates, is then another.
    static func identity(of file: OpenFile) -> String? {
        #if os(Linux)
        var st = stat()
        guard fstat(file.descriptor, &st) == 0 else { return nil }
        // _IOR('v', 1, long): the kernel writes an int into the long it is given.
        let getVersion = UInt(0x8000_0000) | UInt(MemoryLayout<Int>.size << 16) | UInt(UInt8(ascii: "v")) << 8 | 1
        var generation = 0
        guard ioctl(file.descriptor, getVersion, &generation) == 0 else { return nil }
        return [UInt64(truncatingIfNeeded: st.st_dev), UInt64(truncatingIfNeeded: st.st_ino), UInt64(UInt32(truncatingIfNeeded: generation))]
            .map { String($0, radix: 16) }.joined(separator: ":")
        #else
        return nil
        #endif
    }

    /// Whether the earlier backup's copy at `copyPath`, listed as `old`, is `segment`'s prefix up
    /// to `old.size`, known without reading the prefix's batch headers: the copy was read from
    /// this very file (`old.source` is `source`: device, inode and generation), the segment's
    /// batches end exactly at `old.size`, and the header of the batch ending there is the copy's,
    /// byte for byte (it holds its payload's CRC32C).
    ///
    /// The log never rewrites a file's committed bytes in place: it appends past them, and a
    /// compaction writes the rewritten segment to a new file (another inode, or another
    /// generation of a reused inode number). Committed bytes change in place only when history
    /// is cut and new batches are written where the cut ones were: a `repair`, a torn tail cut
    /// at open, or a buffered store's tail lost to an OS crash. A cut past what the backup holds
    /// leaves its prefix as it was; one into it removed the backup's last batch, and the round
    /// refused the directory before it got here (``BackupManifest/lastBatch``). The last header
    /// guards what is left.
    ///
    /// - Complexity: One read of 64 bytes from each file, whatever the segment's size: the
    ///   fingerprint over every batch header it saves reads the whole prefix when batches are
    ///   small (a writer's synced single appends).
    static func vouchedPrefix(of segment: BackupSegment, listedAs old: BackupManifest.File, source: String?,
                              copyAt copyPath: String) throws(LogError) -> Bool {
        guard let source, old.source == source else { return false }
        let last = segment.batches.last { $0.endOffset <= old.size }
        guard (last?.endOffset ?? Int64(SegmentHeader.size)) == old.size else { return false }
        guard let last else { return true }
        let mine = try segment.file.read(fromAbsoluteOffset: last.offset, count: BatchHeader.size)
        // A copy that cannot be read is not vouched for: the round goes on by the fingerprint.
        guard let copy = try? OpenFile.open(copyPath, flags: O_RDONLY),
              let copied = try? copy.read(fromAbsoluteOffset: last.offset, count: BatchHeader.size) else { return false }
        return mine.count == BatchHeader.size && mine == copied
    }

    /// Whether the earlier backup's copy (listed as `old`, fingerprinted as `headers`) holds
    /// `segment` whole: vouched for from its last batch header, else by the fingerprint of every
    /// batch header.
    private static func sameSegment(_ segment: BackupSegment, listedAs old: BackupManifest.File, headers: UInt32,
                                    source: String?, copyAt copyPath: String) throws(LogError) -> Bool {
        if try vouchedPrefix(of: segment, listedAs: old, source: source, copyAt: copyPath) { return true }
        return try headersChecksum(segment) == headers
    }

    private static func fingerprintStart(_ header: ArraySlice<UInt8>) -> UInt32 {
        header.dropLast(4).withUnsafeBytes { CRC32C.checksum($0) }
    }

    private static func fingerprint(_ header: ArraySlice<UInt8>, continuing crc: UInt32) -> UInt32 {
        header.dropLast(4).withUnsafeBytes { CRC32C.checksum($0, continuing: crc) }
    }

    /// The store's identity: its first batch's header checksum and minimum timestamp.
    private static func storeIdentity(_ segments: [BackupSegment]) throws(LogError) -> String? {
        guard let first = segments.first, let batch = first.batches.first else { return nil }
        let header = try first.file.read(fromAbsoluteOffset: batch.offset, count: BatchHeader.size)
        guard header.count == BatchHeader.size else {
            throw LogError(.corruption, "the first batch header is cut short", file: first.file.path, offset: batch.offset, position: batch.firstPosition)
        }
        let crc = header.withUnsafeBytes { $0.loadLittleEndian(at: 60, as: UInt32.self) }
        let minimum = header.withUnsafeBytes { $0.loadLittleEndian(at: 32, as: Int64.self) }
        return String(format: "%08x-%016llx", crc, UInt64(bitPattern: minimum))
    }

    private static func mark(segment base: LogPosition, offset: Int64, header: [UInt8]) -> String {
        "\(Segment.Name.segment(base))@\(offset):" + String(format: "%08x", CRC32C.checksum(header))
    }

    /// The earlier complete backup in `destination` to build on, or `nil` to write everything;
    /// refuses what must not be built on or overwritten.
    private static func previousBackup(
        in destination: URL, identity: String?, epoch: UInt64, segments: [BackupSegment], options: BackupOptions
    ) throws(LogError) -> BackupManifest? {
        let dest = destination.path
        let names = try StoreDirectory.list(dest)
        // Judged again under the lock (``requireBackupDestination(_:source:restart:)`` judged it
        // before): something may have been put there since.
        try Self.refuseUnlessBackupOrEmpty(dest, names: names, restart: options.restart)
        // Files left alone (a `.DS_Store`) stay where they are, never removed: not foreign here.
        let foreign = names.filter { !isBackupOwned($0) && !isLeftAlone($0) }.sorted()
        if options.restart {
            // Starting over: nothing there is trusted (every file is written again, then the
            // old backup's other files removed); files that are not a backup's are never removed.
            guard foreign.isEmpty else {
                throw LogError(.backupMismatch, "\(dest) holds files that are not a backup's (\(foreign.prefix(3).joined(separator: ", "))): not removed; back up into another directory", file: dest)
            }
            return nil
        }
        let manifest: BackupManifest?
        do throws(LogError) { manifest = try BackupManifest.read(in: destination) } catch {
            // Only a manifest that does not decode is a damaged one; a newer build's (following
            // "--restart" would overwrite it), EIO or EACCES stay what they are.
            guard error.code == .corruption else { throw error }
            throw LogError(.backupMismatch, "\(dest) holds a damaged backup manifest (\(error)): back up with --restart --yes to start over",
                           file: error.file, offset: error.offset)
        }
        if let manifest {
            if let refusal = try Self.mismatch(of: manifest, identity: identity, epoch: epoch, segments: segments) {
                throw LogError(.backupMismatch, "\(dest) holds a backup that cannot be continued: \(refusal) (back up with --restart --yes to start over, or into another directory)", file: dest)
            }
            return manifest
        }
        // No manifest: a backup cut short (or an empty directory: judged above) is written whole.
        return nil
    }

    /// Refuses a destination a backup must not write into, before anything is made or locked
    /// in it: the store itself or a directory inside it (by real paths: a backup there would
    /// copy itself into itself), and a directory that holds something but is neither a backup
    /// nor one cut short (``refuseUnlessBackupOrEmpty(_:names:restart:)``). A destination
    /// that does not exist yet is left to the backup's own create.
    /// - Throws: ``LogError/Code/invalidArgument`` for the store or a directory inside it, or
    ///   a destination that is not a directory,
    ///   ``LogError/Code/backupMismatch`` for a directory that is not a backup.
    static func requireBackupDestination(_ dest: String, source: String, restart: Bool) throws(LogError) {
        if StoreDirectory.isWithin(dest, directory: source) {
            // Resolved again only for the message: which of the two it is, and where.
            let target = StoreDirectory.realPath(ofPossiblyMissing: dest) ?? dest
            let what = target == StoreDirectory.realPath(ofPossiblyMissing: source) ? "is the store \(source) itself" : "is inside the store \(source) (\(target))"
            throw LogError(.invalidArgument, "\(dest) \(what): a backup must go outside the store it backs up; back up into another directory (best on another disk)", file: dest)
        }
        var st = stat()
        guard stat(dest, &st) == 0 else { return }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            // The user's mistake (a file named where a directory was meant), not an I/O failure.
            throw LogError(.invalidArgument, "\(dest) exists and is not a directory: back up into a new or empty directory", file: dest)
        }
        try refuseUnlessBackupOrEmpty(dest, names: try StoreDirectory.list(dest), restart: restart)
    }

    /// The one rule for what a backup may write into: a directory is a backup's only when it
    /// carries a backup's own mark, its manifest (``BackupManifest/fileName``) or the marker of
    /// one cut short (``BackupManifest/partialFileName``); an empty one (or one holding only a
    /// lock file, or hidden files the backup never touches: a `.DS_Store`, as `demo` judges a
    /// directory empty) becomes one. Anything else is not the backup's to fill or, with `restart`,
    /// to empty: a store's own files (`eventkernel.store`, segments, checkpoints, snapshots)
    /// have the names a backup's have, so the names alone never make a directory a backup.
    /// - Parameter names: The destination's entries.
    /// - Throws: ``LogError/Code/backupMismatch`` naming the directory and what it holds.
    static func refuseUnlessBackupOrEmpty(_ dest: String, names: [String], restart: Bool) throws(LogError) {
        if names.contains(BackupManifest.fileName) || names.contains(BackupManifest.partialFileName) { return }
        let held = names.filter { $0 != DirectoryLock.fileName && !isLeftAlone($0) }.sorted()
        guard !held.isEmpty else { return }
        let shown = held.prefix(3).joined(separator: ", ") + (held.count > 3 ? ", ..." : "")
        let restarting = restart ? " (--restart starts over only a directory holding a backup: it never removes a store's files or anyone else's)" : ""
        if names.contains(StoreManifest.fileName) || Segment.Name.containsSegment(names) {
            throw LogError(.backupMismatch, "\(dest) is a store, not a backup: it holds \(shown) and no backup manifest (\(BackupManifest.fileName))\(restarting); back up into a new or empty directory", file: dest)
        }
        throw LogError(.backupMismatch, "\(dest) is not empty and holds no backup (\(shown); no backup manifest, \(BackupManifest.fileName))\(restarting): back up into a new or empty directory", file: dest)
    }

    /// Why a backup cannot be continued from this log, or `nil` when it can.
    /// - Throws: ``LogError`` when the source's batch header cannot be read (not a mismatch).
    private static func mismatch(of manifest: BackupManifest, identity: String?, epoch: UInt64, segments: [BackupSegment]) throws(LogError) -> String? {
        if let theirs = manifest.storeIdentity, let ours = identity, theirs != ours {
            return "it is a backup of another store (store \(theirs); this one is \(ours))"
        }
        if manifest.nextPosition > (segments.last?.nextPosition ?? 0) {
            return "it holds positions up to \(manifest.nextPosition) and the store ends at \(segments.last?.nextPosition ?? 0)"
        }
        if let mark = manifest.lastBatch {
            var holds = false
            search: for segment in segments {
                // The mark's segment and offset parsed once, not a string built per batch (a
                // log of synced single appends holds a batch per event); the whole mark is
                // compared below, in its one spelling.
                let name = Segment.Name.segment(segment.base) + "@"
                guard mark.hasPrefix(name), let colon = mark.dropFirst(name.count).firstIndex(of: ":"),
                      let offset = Int64(mark[mark.index(mark.startIndex, offsetBy: name.count)..<colon]) else { continue }
                for batch in segment.batches where batch.offset == offset {
                    let header = try segment.file.read(fromAbsoluteOffset: batch.offset, count: BatchHeader.size)
                    if Self.mark(segment: segment.base, offset: batch.offset, header: header) == mark {
                        holds = true
                        break search
                    }
                }
                // Not at its offset: a compaction of this segment copies the batches it does
                // not change verbatim, header and all, but packed at new offsets. The header
                // (its positions, lengths and payload CRC32C) is the batch, wherever it lies:
                // a batch of the segment whose header gives the mark (spelt at the mark's own
                // offset: only the CRC can differ) is the same batch.
                for batch in segment.batches where batch.offset != offset {
                    let header = try segment.file.read(fromAbsoluteOffset: batch.offset, count: BatchHeader.size)
                    if header.count == BatchHeader.size, Self.mark(segment: segment.base, offset: offset, header: header) == mark {
                        holds = true
                        break search
                    }
                }
            }
            // Compaction rewrites a sealed segment's batches (offsets and headers change) without
            // cutting the history: a mark in a batch it rewrote is gone, and the backup is still
            // a prefix of this history (its copies of rewritten segments are replaced below).
            if !holds, try !Self.isCompacted(manifest.nextPosition, in: segments) {
                return "the store no longer holds its last batch (\(mark)): it describes another history"
            }
        }
        if manifest.historyEpoch != epoch {
            // A cut since (a torn tail after a writer's crash, a repair) removed only bytes past
            // what the backup holds when every segment it lists is still there, at least as
            // long, with the same batch headers up to the listed size: the backup is then a
            // prefix of this history and goes on in the new epoch. An OS crash that lost
            // batches the backup copied fails here (or on the last-batch mark above).
            let bySegment = Dictionary(segments.map { (Segment.Name.segment($0.base), $0) }, uniquingKeysWith: { a, _ in a })
            for old in manifest.files where Segment.Name.basePosition(ofSegmentNamed: old.name) != nil {
                let why: String?
                if let segment = bySegment[old.name] {
                    if segment.dataEnd < old.size {
                        why = "\(old.name) is \(segment.dataEnd) bytes in the store, \(old.size) in the backup"
                    } else if let headers = old.headers, try Self.headersChecksum(segment, upTo: old.size) == headers {
                        why = nil
                    } else {
                        why = "\(old.name) holds other batches in the store than in the backup"
                    }
                } else {
                    why = "the store no longer holds \(old.name)"
                }
                if let why {
                    return "it was taken in history epoch \(manifest.historyEpoch), the store is now in epoch \(epoch) (the log was cut by a repair or a torn tail since) and is not a continuation of it: \(why)"
                }
            }
        }
        return nil
    }

    /// Whether compaction rewrote the batch holding the position before `next` (a sparse batch).
    private static func isCompacted(_ next: LogPosition, in segments: [BackupSegment]) throws(LogError) -> Bool {
        guard next > 0, let segment = segments.last(where: { $0.base < next }), next <= segment.nextPosition,
              let batch = segment.batches.last(where: { $0.firstPosition < next }) else { return false }
        return try batch.isSparse(in: segment.file)
    }

    /// Names a backup directory holds: the store's files and the backup's own.
    static func isBackupOwned(_ name: String) -> Bool {
        name == BackupManifest.fileName || name == DirectoryLock.fileName || name == BackupManifest.partialFileName || name.hasSuffix(".tmp")
            || Segment.Name.isSegmentOrSideFile(name) || name == StoreManifest.fileName || name == "snapshots"
    }

    /// Names a backup leaves alone in its directory, judging it empty beside them and never
    /// removing them: hidden files it does not own (a `.DS_Store`). A hidden name it would take
    /// for its own (a `.x.tmp`: its temporaries) is not left alone, since a backup removes its
    /// own leftovers. The one rule for both judging a destination and starting one over.
    static func isLeftAlone(_ name: String) -> Bool {
        name.hasPrefix(".") && !isBackupOwned(name)
    }

    /// What a backup directory holds, read in one walk: the files a backup owns, as paths
    /// relative to it (its top-level names, and the regular files in `snapshots/`), and whether
    /// anything else is there (another name, a `snapshots` that is not a real directory, or
    /// anything but a regular file in it).
    /// Every caller that removes or judges a backup's files reads them here, so that what a
    /// backup owns is decided once.
    static func backupContents(of directory: String) throws(LogError) -> (ownedFiles: [String], holdsForeign: Bool) {
        var owned: [String] = []
        var foreign = false
        for name in try StoreDirectory.list(directory) {
            guard isBackupOwned(name) else { foreign = true; continue }
            guard name == "snapshots" else { owned.append(name); continue }
            // Only a real directory: through a symbolic link, a removal would reach another
            // directory's files.
            var st = stat()
            guard lstat(directory + "/snapshots", &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { foreign = true; continue }
            for inner in try StoreDirectory.list(directory + "/snapshots") {
                var st = stat()
                if lstat(directory + "/snapshots/" + inner, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG {
                    owned.append("snapshots/" + inner)
                } else {
                    foreign = true
                }
            }
        }
        return (owned, foreign)
    }

    /// The segment's committed bytes, each batch checked against its header's checksums, and
    /// their CRC32C.
    private static func checkedSegmentBytes(_ segment: BackupSegment) throws(LogError) -> (bytes: [UInt8], crc32c: UInt32) {
        let path = segment.file.path
        let bytes = try segment.file.read(fromAbsoluteOffset: 0, count: Int(segment.dataEnd))
        guard bytes.count == Int(segment.dataEnd) else {
            throw LogError(.corruption, "the segment is \(bytes.count) bytes long, shorter than its \(segment.dataEnd) committed bytes",
                           file: path, offset: Int64(bytes.count), position: segment.base)
        }
        if case .failure(var error) = bytes.withUnsafeBytes({ SegmentHeader.decode(UnsafeRawBufferPointer(rebasing: $0[0..<SegmentHeader.size])) }) {
            error.file = path
            error.position = segment.base
            throw error
        }
        let crc32c = try checkBatches(bytes, from: 0, segment.batches[...], of: segment)
        return (bytes, crc32c)
    }

    /// The segment's committed bytes past `offset`, each batch checked, and the fingerprint of
    /// the whole segment's batch headers (``headersChecksum(_:upTo:)``); `nil` when the segment's
    /// batches up to `offset` do not end exactly there or, unless `prefixVouched`
    /// (``vouchedPrefix(of:listedAs:source:copyAt:)``), their headers' fingerprint is not
    /// `headers` (the earlier copy is not this segment's prefix: written whole instead).
    private static func checkedTail(of segment: BackupSegment, after offset: Int64, headers: UInt32,
                                    prefixVouched: Bool) throws(LogError) -> (bytes: [UInt8], headers: UInt32, crc32c: UInt32)? {
        let firstNew = segment.batches.firstIndex { $0.endOffset > offset } ?? segment.batches.endIndex
        let prefixEnd = firstNew == segment.batches.startIndex ? Int64(SegmentHeader.size) : segment.batches[firstNew - 1].endOffset
        guard prefixEnd == offset else { return nil }
        if !prefixVouched, try headersChecksum(segment, upTo: offset) != headers { return nil }
        let path = segment.file.path
        let bytes = try segment.file.read(fromAbsoluteOffset: offset, count: Int(segment.dataEnd - offset))
        guard Int64(bytes.count) == segment.dataEnd - offset else {
            throw LogError(.corruption, "the segment is \(offset + Int64(bytes.count)) bytes long, shorter than its \(segment.dataEnd) committed bytes",
                           file: path, offset: offset + Int64(bytes.count), position: segment.base)
        }
        let tail = segment.batches[firstNew...]
        let crc32c = try checkBatches(bytes, from: offset, tail, of: segment)
        var crc = headers
        for batch in tail {
            let start = Int(batch.offset - offset)
            crc = fingerprint(bytes[start..<(start + BatchHeader.size)], continuing: crc)
        }
        return (bytes, crc, crc32c)
    }

    /// The payload size from which ``checkBatches(_:from:_:of:)`` combines a batch's checksum
    /// into the file's instead of reading its bytes again: a combination costs about as much
    /// as the checksum of 2 KiB (`BenchProbe backup`: combining every batch of 10,000 appends
    /// of one activity each made an incremental backup a fifth slower).
    static let combinedPayloadBytes = 4_096

    /// Checks `batches` in `bytes`, the segment's bytes from file offset `origin` to its
    /// committed end: contiguous from `origin`, each header as the log's index has it, each
    /// payload against its header's CRC32C, the last ending at the committed end.
    /// - Returns: The CRC32C of all of `bytes` (the manifest's checksum of what is copied),
    ///   combined from the headers' bytes and the payloads' checksums just computed
    ///   (``CRC32C/combine(_:_:secondCount:)``): a second pass over the bytes was a tenth of a
    ///   full backup (perf, `BenchProbe backup-full`).
    /// - Throws: ``LogError/Code/corruption`` with the segment's file, the batch's offset and position.
    private static func checkBatches(_ bytes: [UInt8], from origin: Int64, _ batches: ArraySlice<BatchLocation>, of segment: BackupSegment) throws(LogError) -> UInt32 {
        let path = segment.file.path
        var expected = origin == 0 ? Int64(SegmentHeader.size) : origin
        var checksum = origin == 0 ? CRC32C.checksum(bytes[0..<min(bytes.count, SegmentHeader.size)]) : 0
        for batch in batches {
            guard batch.offset == expected else {
                throw LogError(.corruption, "the batches are not contiguous: one at offset \(batch.offset), expected \(expected)",
                               file: path, offset: batch.offset, position: batch.firstPosition)
            }
            let failure: String? = bytes.withUnsafeBytes { raw in
                let start = Int(batch.offset - origin)
                guard start + Int(batch.batchLength) <= raw.count else { return "the batch runs past the committed bytes" }
                let headerBytes = UnsafeRawBufferPointer(rebasing: raw[start..<(start + BatchHeader.size)])
                switch BatchHeader.decode(headerBytes) {
                case .failure(let why): return why.message
                case .success(let header):
                    guard header.firstPosition == batch.firstPosition, header.positionCount == batch.positionCount,
                          header.batchLength == Int(batch.batchLength) else {
                        return "the batch header does not match the log's index of it"
                    }
                    let payload = UnsafeRawBufferPointer(rebasing: raw[(start + BatchHeader.size)..<(start + header.batchLength)])
                    let computed = CRC32C.checksum(payload)
                    guard computed == header.payloadChecksum else {
                        return "payload checksum mismatch: stored 0x\(String(header.payloadChecksum, radix: 16)), computed 0x\(String(computed, radix: 16))"
                    }
                    if payload.count < Self.combinedPayloadBytes {
                        // A small batch (one append of a few events): read again from the cache
                        // costs less than the combination's multiplications.
                        checksum = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[start..<(start + header.batchLength)]), continuing: checksum)
                    } else {
                        checksum = CRC32C.combine(CRC32C.checksum(headerBytes, continuing: checksum), computed, secondCount: payload.count)
                    }
                    return nil
                }
            }
            if let failure {
                throw LogError(.corruption, "\(failure), found while backing up", file: path, offset: batch.offset, position: batch.firstPosition)
            }
            expected = batch.endOffset
        }
        guard expected == segment.dataEnd else {
            throw LogError(.corruption, "the batches end at offset \(expected), the committed data at \(segment.dataEnd)",
                           file: path, offset: expected, position: segment.nextPosition)
        }
        return checksum
    }

    /// A sealed segment's index file, checked against the segment; `nil` when there is none
    /// or it is invalid (it is derived: the backup's first open rebuilds it).
    private static func checkedIndexBytes(at path: String, segment: BackupSegment) throws(LogError) -> ([UInt8], OpenFile)? {
        guard StoreDirectory.exists(path) else { return nil }
        let file = try OpenFile.open(path, flags: O_RDONLY)
        let bytes = try file.read(fromAbsoluteOffset: 0, count: Int(try file.size()))
        guard case .success(let index) = bytes.withUnsafeBytes({ SegmentIndexFile.decode($0) }),
              index.basePosition == segment.base, index.nextPosition == segment.nextPosition,
              index.dataLength == segment.dataEnd else { return nil }
        return (bytes, file)
    }
}

/// Writes a backup's files: each to a temporary name, synced, renamed; or not at all when the
/// earlier backup's manifest lists it with the same size and CRC32C (or the same size, for an
/// extra file its caller vouches is unchanged) and the file is there; or only its new tail
/// when the earlier copy is its prefix.
struct BackupWriter {
    let directory: String
    let io: any LogFileIO
    let known: [String: BackupManifest.File]
    let linking: Bool
    /// The directories given a new entry since they were last synced (`""`: the destination
    /// itself), by a file written or linked into them or a subdirectory made in them. A round
    /// that only grew files or kept them has none, and syncs no directory before its manifest.
    private(set) var directoriesWithNewEntries: Set<String> = []

    /// Makes the new entries durable before anything names them: each subdirectory given one,
    /// then the destination when it was.
    /// - Throws: ``LogError`` naming the directory whose sync failed.
    mutating func synchronizeDirectoriesWithNewEntries() throws(LogError) {
        for name in directoriesWithNewEntries.sorted() where !name.isEmpty {
            try StoreDirectory.synchronize(directory + "/" + name, io: io)
        }
        if directoriesWithNewEntries.contains("") { try StoreDirectory.synchronize(directory, io: io) }
        directoriesWithNewEntries = []
    }

    /// Whether the earlier manifest was removed (a file it lists had to be rewritten).
    var withdrewPrevious = false

    /// Removes the earlier manifest (once) before a file it lists is rewritten, so that a
    /// backup killed afterwards leaves no manifest describing other bytes.
    mutating func withdrawPrevious() throws(LogError) {
        guard !withdrewPrevious else { return }
        try StoreDirectory.remove(directory + "/" + BackupManifest.fileName)
        try StoreDirectory.synchronize(directory, io: io)
        withdrewPrevious = true
    }

    /// Whether the destination's copy of `name` can be grown in place from `old`, the earlier
    /// manifest's entry: a regular file of at least the listed size that is not a hard link
    /// (a linked copy's bytes are the source's own).
    func canGrow(_ name: String, from old: BackupManifest.File) -> Bool {
        var st = stat()
        return stat(directory + "/" + name, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && st.st_nlink == 1 && Int64(st.st_size) >= old.size
    }

    /// Appends `tail` to the destination's copy of `name` at the earlier manifest's size (the
    /// listed prefix is never written, so the earlier backup stays whole), cuts what a backup
    /// killed earlier appended past it, and syncs. The caller has checked that the copy can be
    /// grown (``canGrow(_:from:)``) and that the file's new bytes are the listed prefix then `tail`.
    /// - Returns: The file's manifest entry: its CRC32C continues the listed prefix's over `tail`.
    mutating func append(_ name: String, tail: [UInt8], checksum: UInt32? = nil, to old: BackupManifest.File,
                         report: inout BackupReport) throws(LogError) -> BackupManifest.File {
        let path = directory + "/" + name
        let size = old.size + Int64(tail.count)
        let file = try OpenFile.open(path, flags: O_WRONLY)
        try tail.withBytes { (raw) throws(LogError) in
            try io.writeAll(raw, toAbsoluteOffset: old.size, descriptor: file.descriptor, path: path)
        }
        // A backup killed earlier may have appended more: the copy is exactly the new file again.
        if try file.size() > size { try io.truncate(descriptor: file.descriptor, path: path, length: size) }
        try io.synchronize(descriptor: file.descriptor, path: path)
        report.copiedFiles.append(name)
        report.copiedBytes += Int64(tail.count)
        let tailChecksum = checksum ?? CRC32C.checksum(tail)
        return BackupManifest.File(name: name, size: size, crc32c: CRC32C.combine(old.crc32c, tailChecksum, secondCount: tail.count))
    }

    /// Grows the destination's copy of `name` to `bytes` when the earlier copy is their prefix
    /// (the active segment since the last backup: ``append(_:tail:to:report:)``).
    /// - Returns: `false` when `bytes` do not extend the listed prefix (other bytes, shorter)
    ///   or the copy cannot be grown: the file is then written whole.
    private mutating func grow(_ name: String, from old: BackupManifest.File, to bytes: [UInt8], report: inout BackupReport) throws(LogError) -> Bool {
        guard old.size < Int64(bytes.count), canGrow(name, from: old),
              bytes.withUnsafeBytes({ CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<Int(old.size)])) }) == old.crc32c
        else { return false }
        _ = try append(name, tail: Array(bytes[Int(old.size)...]), to: old, report: &report)
        return true
    }

    /// Whether `path` is the file open as `file` (same device and inode).
    static func sameFile(_ path: String, _ file: OpenFile) -> Bool {
        var linked = stat(), opened = stat()
        guard stat(path, &linked) == 0, fstat(file.descriptor, &opened) == 0 else { return false }
        return linked.st_dev == opened.st_dev && linked.st_ino == opened.st_ino
    }

    /// The earlier backup's entry for `name` when the round may keep that copy: its manifest
    /// lists it at `size` (and with `crc32c`, when given) and the file is there at that size.
    func earlierCopy(of name: String, size: Int64, crc32c: UInt32? = nil) -> BackupManifest.File? {
        guard let old = known[name], old.size == size, crc32c == nil || old.crc32c == crc32c, holds(name, size: size) else { return nil }
        return old
    }

    /// Whether the destination holds `name` with `size` bytes.
    func holds(_ name: String, size: Int64) -> Bool {
        var st = stat()
        return stat(directory + "/" + name, &st) == 0 && Int64(st.st_size) == size
    }

    /// Writes (or links, or keeps) one file of the backup.
    /// - Parameter source: For `--link`, the open file whose bytes `bytes` were read from: the
    ///   link is kept only when it names that very file (the path may have been replaced since).
    /// - Parameter trustingEarlierCopy: `false` when the caller knows the earlier copy holds
    ///   other bytes than its CRC32C can show (a segment's batch headers differ): written whole.
    mutating func put(_ name: String, bytes: [UInt8], checksum: UInt32? = nil, linkFrom source: OpenFile?, trustingEarlierCopy: Bool = true,
                      report: inout BackupReport) throws(LogError) -> BackupManifest.File {
        let entry = BackupManifest.File(name: name, size: Int64(bytes.count), crc32c: checksum ?? CRC32C.checksum(bytes))
        let final = directory + "/" + name
        var parent = ""
        if let slash = name.lastIndex(of: "/") {
            parent = String(name[..<slash])
            // Made now, or by an earlier round that was cut short before its directory sync
            // (the earlier complete backup lists nothing in it): the destination's entry for it
            // is made durable before the manifest names a file inside.
            let made = !StoreDirectory.exists(directory + "/" + parent)
            try StoreDirectory.create(directory + "/" + parent)
            if made || !known.keys.contains(where: { $0.hasPrefix(parent + "/") }) { directoriesWithNewEntries.insert("") }
        }
        if trustingEarlierCopy, earlierCopy(of: name, size: entry.size, crc32c: entry.crc32c) != nil {
            report.unchangedFiles.append(name)
            return entry
        }
        if trustingEarlierCopy, let old = known[name], try grow(name, from: old, to: bytes, report: &report) {
            return entry
        }
        // Replacing a file the earlier manifest lists: that backup is no longer whole.
        if known[name] != nil { try withdrawPrevious() }
        let temporary = final + ".tmp"
        unlink(temporary)
        if linking, let source, systemLink(source.path, temporary) == 0, Self.sameFile(temporary, source) {
            // Sealed files are not rewritten by the writer: the link shares the bytes just
            // checked (it is that file: the same device and inode as the one read).
            do throws(SystemCallError) {
                try SystemCall.run("rename to \(final)") { rename(temporary, final) }
            } catch {
                unlink(temporary)
                throw LogError.system(error, file: temporary)
            }
            directoriesWithNewEntries.insert(parent)
            report.linkedFiles.append(name)
            return entry
        }
        // No link, or one to another file than the one read (removed and recreated since): a copy.
        unlink(temporary)
        try StoreDirectory.writeAtomically(bytes, directory: directory, name: name, io: io, synchronizingDirectory: false)
        directoriesWithNewEntries.insert(parent)
        report.copiedFiles.append(name)
        report.copiedBytes += entry.size
        return entry
    }
}

extension BackupWriter {
    /// Undoes a failed round over `previous`, a complete backup whose listed bytes the round
    /// never wrote: files it grew are cut back to their listed sizes, files it does not list
    /// (new segments, snapshots, temporaries) removed, then the marker. Best effort with plain
    /// system calls (the round's own I/O layer just failed): whatever fails leaves the marker,
    /// so the directory stays refused by read commands and the next round redoes it.
    static func returnToPrevious(_ previous: BackupManifest, in dest: String) {
        // A round that failed after its manifest's rename (syncing the directory) is the new
        // backup, not to be cut back.
        guard let current = try? BackupManifest.read(in: URL(filePath: dest)), current == previous else { return }
        let listed = Dictionary(previous.files.map { ($0.name, $0.size) }, uniquingKeysWith: { a, _ in a })
        guard let names = try? SegmentedLog.backupContents(of: dest).ownedFiles else { return }
        for name in names where name != BackupManifest.fileName && name != DirectoryLock.fileName && name != BackupManifest.partialFileName {
            let path = dest + "/" + name
            if let size = listed[name] {
                var st = stat()
                guard lstat(path, &st) == 0 else { return }
                guard Int64(st.st_size) > size else { continue }
                let descriptor = open(path, O_WRONLY | O_CLOEXEC)
                guard descriptor >= 0 else { return }
                defer { close(descriptor) }
                guard ftruncate(descriptor, off_t(size)) == 0, fsync(descriptor) == 0 else { return }
            } else {
                guard unlink(path) == 0 || errno == ENOENT else { return }
            }
        }
        for directory in [dest + "/snapshots", dest] where StoreDirectory.exists(directory) {
            let descriptor = open(directory, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return }
            defer { close(descriptor) }
            guard fsync(descriptor) == 0 else { return }
        }
        guard unlink(dest + "/" + BackupManifest.partialFileName) == 0 else { return }
        let descriptor = open(dest, O_RDONLY | O_CLOEXEC)
        if descriptor >= 0 {
            _ = fsync(descriptor)
            close(descriptor)
        }
    }

}

#if canImport(Glibc)
private func systemLink(_ source: String, _ destination: String) -> Int32 { Glibc.link(source, destination) }
#elseif canImport(Darwin)
private func systemLink(_ source: String, _ destination: String) -> Int32 { Darwin.link(source, destination) }
#endif
