#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The writer's view of the active segment after recovery.
struct ActiveSegment {
    var file: OpenFile
    var basePosition: LogPosition
    var dataEnd: Int64
    var preallocatedTo: Int64
    var batchCount: Int
}

/// Opens a store's segments: sealed ones from their index side files (reading no payload),
/// the active one by a full scan, applying the recovery rules of Docs/Durability.md.
struct LogLoader {
    let directory: String
    let writable: Bool
    let configuration: SegmentedLog.Configuration
    var io: any LogFileIO { configuration.fileIO }

    struct Loaded {
        var segments: [SegmentEntry]
        var active: ActiveSegment?
        var nextPosition: LogPosition
    }

    /// The segment base positions in the directory, in order.
    static func segmentBases(in directory: String) throws(LogError) -> [LogPosition] {
        try StoreDirectory.list(directory).compactMap(SegmentName.basePosition(ofSegmentNamed:)).sorted()
    }

    func path(_ name: String) -> String { directory + "/" + name }

    func load(report: inout RecoveryReport, reusingSealed known: [SegmentEntry] = []) throws(LogError) -> Loaded {
        let bases = try Self.segmentBases(in: directory)
        try checkForOrphanedCheckpoints(segmentBases: bases)
        var segments: [SegmentEntry] = []
        var expected: LogPosition? = nil
        var lastIsSealed = false
        for (k, base) in bases.enumerated() {
            let isLast = k == bases.count - 1
            let segmentPath = path(SegmentName.segment(base))
            if let expected, base != expected {
                throw LogError(.corruption,
                    "segments are not contiguous: the previous segment ends before position \(expected) but the next file starts at \(base) (a segment file is missing or extra)",
                    file: segmentPath, offset: 0, position: expected)
            }
            if let reused = known.first(where: { $0.basePosition == base && $0.sealed }) {
                segments.append(reused)
                expected = reused.nextPosition
                lastIsSealed = true
                continue
            }
            let file = try OpenFile.open(segmentPath, flags: writable ? O_RDWR : O_RDONLY)
            if let sealed = try loadSealed(file: file, base: base, isLast: isLast, report: &report) {
                segments.append(sealed)
                expected = sealed.nextPosition
                lastIsSealed = true
                continue
            }
            // The active segment: the last one, without a valid index.
            lastIsSealed = false
            let entry = try scanActive(file: file, base: base, report: &report)
            segments.append(entry)
            expected = entry.nextPosition
        }

        let nextPosition = expected ?? 0
        guard writable else {
            return Loaded(segments: segments, active: nil, nextPosition: nextPosition)
        }
        if segments.isEmpty || lastIsSealed {
            let created = try createSegment(base: nextPosition)
            segments.append(created.entry)
            return Loaded(segments: segments, active: created.active, nextPosition: nextPosition)
        }
        let last = segments[segments.count - 1]
        var active = ActiveSegment(file: last.file, basePosition: last.basePosition, dataEnd: last.dataEnd,
                                   preallocatedTo: try last.file.size(), batchCount: last.batches.count)
        if configuration.preallocate && active.preallocatedTo < Int64(configuration.segmentSize) {
            try io.preallocate(descriptor: active.file.descriptor, path: active.file.path, length: Int64(configuration.segmentSize))
            active.preallocatedTo = Int64(configuration.segmentSize)
            // Commit the new extents now: otherwise the first append's fdatasync pays for the
            // file-system journal commit (milliseconds), not just for its data.
            try io.synchronize(descriptor: active.file.descriptor, path: active.file.path)
        }
        return Loaded(segments: segments, active: active, nextPosition: nextPosition)
    }

    /// Loads a segment through its index; returns nil for the active segment (the last one
    /// without a valid index). A sealed segment whose index is missing or damaged is rebuilt
    /// by a strict scan: any invalid batch in it is damage.
    private func loadSealed(file: OpenFile, base: LogPosition, isLast: Bool, report: inout RecoveryReport) throws(LogError) -> SegmentEntry? {
        let indexPath = path(SegmentName.index(base))
        let fileSize = try file.size()
        if StoreDirectory.exists(indexPath) {
            let indexFile = try OpenFile.open(indexPath, flags: O_RDONLY)
            let bytes = try indexFile.read(fromAbsoluteOffset: 0, count: Int(try indexFile.size()))
            if case .success(let index) = bytes.withUnsafeBytes({ SegmentIndexFile.decode($0) }),
               index.basePosition == base, index.dataLength == fileSize {
                var entry = SegmentEntry(basePosition: base, file: file, batches: [], nextPosition: base,
                                         minTimestamp: nil, maxTimestamp: nil, sealed: true, dataEnd: Int64(SegmentHeader.size))
                entry.batches.reserveCapacity(index.batches.count)
                for batch in index.batches { entry.add(batch) }
                return entry
            }
        } else if isLast {
            return nil
        }
        // A sealed segment (not the last, or the last with an index) whose index is absent or
        // does not match it. The index is derived data; the segment decides.
        let scan = try SegmentScanner(file: file, basePosition: base).scan()
        switch scan.end {
        case .clean:
            break
        case .damage(let error), .tornTail(let error):
            if isLast {
                // The index of the last segment is damaged and the segment has a bad tail:
                // treat it as active so the normal tail rules apply.
                if writable { try StoreDirectory.remove(indexPath) }
                return nil
            }
            throw error
        }
        if scan.dataEnd != fileSize && !isLast {
            throw LogError(.corruption, "sealed segment has \(fileSize - scan.dataEnd) bytes after its last batch",
                           file: file.path, offset: scan.dataEnd, position: scan.nextPosition)
        }
        if isLast && scan.dataEnd != fileSize {
            if writable { try StoreDirectory.remove(indexPath) }
            return nil
        }
        let index = SegmentIndexFile(basePosition: base, nextPosition: scan.nextPosition, dataLength: scan.dataEnd, batches: scan.batches)
        if writable {
            try StoreDirectory.writeAtomically(index.encoded(), directory: directory, name: SegmentName.index(base), io: io)
        }
        report.rebuiltIndexes.append(indexPath)
        return SegmentEntry(basePosition: base, file: file, batches: scan.batches, nextPosition: scan.nextPosition,
                            minTimestamp: scan.minTimestamp, maxTimestamp: scan.maxTimestamp, sealed: true, dataEnd: scan.dataEnd)
    }

    /// Scans the active segment; truncates a torn tail (writable) or stops before it (read-only).
    private func scanActive(file: OpenFile, base: LogPosition, report: inout RecoveryReport) throws(LogError) -> SegmentEntry {
        let headerBytes = try file.read(fromAbsoluteOffset: 0, count: SegmentHeader.size)
        if case .failure(var error) = headerBytes.withUnsafeBytes({ SegmentHeader.decode($0) }) {
            // A segment header that is not valid: harmless if the file holds nothing else and
            // the header is a prefix of the right one (a crash while the segment was being
            // created), damage otherwise.
            error.file = file.path
            error.position = base
            let size = try file.size()
            let bytes = try file.read(fromAbsoluteOffset: 0, count: Int(size))
            guard Self.isUnfinishedSegmentCreation(bytes, base: base) else { throw error }
            if writable {
                try file.writeHeader(base: base, io: io)
                try io.synchronize(descriptor: file.descriptor, path: file.path)
                report.reinitializedSegments.append(file.path)
            }
            return SegmentEntry(basePosition: base, file: file, batches: [], nextPosition: base,
                                minTimestamp: nil, maxTimestamp: nil, sealed: false, dataEnd: Int64(SegmentHeader.size))
        }
        var scanner = SegmentScanner(file: file, basePosition: base)
        scanner.concurrentWriterPossible = !writable
        if let checkpoint = try loadCheckpoint(file: file, base: base) {
            scanner.resume = (checkpoint.batches, checkpoint.dataLength, checkpoint.nextPosition)
        }
        let scan = try scanner.scan()
        switch scan.end {
        case .clean:
            break
        case .damage(let error):
            throw error
        case .tornTail(let error):
            if writable {
                report.truncatedTail = try truncateTornTail(file: file, base: base, at: scan.dataEnd, fileSize: scan.fileSize, reason: error.message)
            } else {
                report.incompleteTail = "\(file.path) at offset \(scan.dataEnd): \(error.message)"
            }
        }
        return SegmentEntry(basePosition: base, file: file, batches: scan.batches, nextPosition: scan.nextPosition,
                            minTimestamp: scan.minTimestamp, maxTimestamp: scan.maxTimestamp, sealed: false, dataEnd: scan.dataEnd)
    }

    /// The active segment's checkpoint, if one exists.
    ///
    /// Written on clean close, it lets open skip re-checking the batches that were already
    /// checked, as a sealed segment's index does; only what was appended after it is scanned.
    /// A checkpoint whose own checksum fails is derived data gone bad: ignored (a writer deletes
    /// it) and the whole segment is scanned. A valid one is a record of what was acknowledged,
    /// so a segment that no longer holds its batches is damage, never a torn tail
    /// (``checkAgainstCheckpoint(_:base:file:path:)``).
    private func loadCheckpoint(file: OpenFile, base: LogPosition) throws(LogError) -> SegmentIndexFile? {
        let path = path(SegmentName.checkpoint(base))
        guard let checkpoint = try Self.readCheckpoint(at: path) else {
            if writable { try StoreDirectory.remove(path) }
            return nil
        }
        try Self.checkAgainstCheckpoint(checkpoint, base: base, file: file, path: path)
        return checkpoint
    }

    /// Reads a checkpoint file: nil when it is missing or fails its own checks.
    static func readCheckpoint(at path: String) throws(LogError) -> SegmentIndexFile? {
        guard StoreDirectory.exists(path) else { return nil }
        let checkpointFile = try OpenFile.open(path, flags: O_RDONLY)
        let bytes = try checkpointFile.read(fromAbsoluteOffset: 0, count: Int(try checkpointFile.size()))
        guard case .success(let checkpoint) = bytes.withUnsafeBytes({ SegmentIndexFile.decode($0) }) else { return nil }
        return checkpoint
    }

    /// The recovery rule's check against a checkpoint (Docs/Durability.md, "What counts as
    /// torn"): the checkpoint must be the segment's, the segment must still be as long as the
    /// checkpoint says, and its last listed batch must be where the checkpoint says. Anything
    /// less is acknowledged data lost.
    /// - Throws: ``LogError`` (corruption, with the file, offset and position) otherwise.
    static func checkAgainstCheckpoint(_ checkpoint: SegmentIndexFile, base: LogPosition, file: OpenFile, path checkpointPath: String) throws(LogError) {
        guard checkpoint.basePosition == base else {
            throw LogError(.corruption, "the checkpoint is for a segment starting at \(checkpoint.basePosition), not \(base)",
                           file: checkpointPath, offset: 16, position: base)
        }
        let size = try file.size()
        guard checkpoint.dataLength <= size else {
            throw LogError(.corruption,
                "the segment is \(size) bytes but its checkpoint (\(checkpointPath)) lists acknowledged batches up to byte \(checkpoint.dataLength): acknowledged records are missing",
                file: file.path, offset: size, position: checkpoint.batches.last(where: { $0.endOffset > size })?.firstPosition ?? checkpoint.nextPosition)
        }
        guard let last = checkpoint.batches.last else { return }
        let header = try file.read(fromAbsoluteOffset: last.offset, count: BatchHeader.size)
        guard header.count == BatchHeader.size,
              case .success(let decoded) = header.withUnsafeBytes({ BatchHeader.decode($0) }),
              decoded.firstPosition == last.firstPosition, decoded.recordCount == last.recordCount,
              decoded.batchLength == Int(last.batchLength) else {
            throw LogError(.corruption,
                "the batch at this offset does not match the one the checkpoint (\(checkpointPath)) lists (positions \(last.firstPosition)..<\(last.endPosition)): an acknowledged batch is damaged",
                file: file.path, offset: last.offset, position: last.firstPosition)
        }
    }

    /// Fails when a valid checkpoint names a segment that is not there (the active segment was
    /// deleted: acknowledged records are gone, which is damage).
    func checkForOrphanedCheckpoints(segmentBases bases: [LogPosition]) throws(LogError) {
        let names = try StoreDirectory.list(directory)
        for name in names {
            guard let base = SegmentName.basePosition(ofCheckpointNamed: name), !bases.contains(base) else { continue }
            let checkpointPath = path(name)
            guard let checkpoint = try Self.readCheckpoint(at: checkpointPath), !checkpoint.batches.isEmpty else { continue }
            throw LogError(.corruption,
                "the checkpoint lists acknowledged records \(checkpoint.basePosition)..<\(checkpoint.nextPosition) of segment \(SegmentName.segment(base)), which is missing",
                file: checkpointPath, offset: 0, position: checkpoint.basePosition)
        }
    }

    /// Whether a segment file whose header is invalid is only a segment whose creation was cut
    /// short by a crash: its header bytes are a prefix of the right header (unwritten bytes are
    /// zero) and nothing but zeros follows. Such a file holds no data and is rewritten on open.
    static func isUnfinishedSegmentCreation(_ bytes: [UInt8], base: LogPosition) -> Bool {
        let onlyHeaderSpace = bytes.count <= SegmentHeader.size
            || bytes.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[SegmentHeader.size...]).isAllZero() }
        let expectedHeader = SegmentHeader(basePosition: base).encoded()
        let headerIsPartialWrite = zip(bytes.prefix(SegmentHeader.size), expectedHeader).allSatisfy { $0 == $1 || $0 == 0 }
        return onlyHeaderSpace && headerIsPartialWrite
    }

    /// Keeps the torn bytes in `recovered/`, advances the history epoch, then cuts the segment
    /// at `offset`. The epoch goes first: a crash in between leaves a new epoch and an uncut
    /// tail (cut again at the next open), never a cut history in the old epoch.
    private func truncateTornTail(file: OpenFile, base: LogPosition, at offset: Int64, fileSize: Int64, reason: String) throws(LogError) -> RecoveryReport.TruncatedTail {
        var tail = try file.read(fromAbsoluteOffset: offset, count: Int(fileSize - offset))
        while let last = tail.last, last == 0 { tail.removeLast() }
        if !tail.isEmpty { try Self.advanceHistoryEpoch(in: directory, io: io) }
        var savedTo: String? = nil
        if !tail.isEmpty {
            let name = SegmentName.segment(base) + ".\(offset).torn"
            try RecoveredFiles.save(tail, directory: directory, name: name, io: io)
            savedTo = RecoveredFiles.path(directory: directory, name: name)
        }
        try io.truncate(descriptor: file.descriptor, path: file.path, length: offset)
        try io.synchronize(descriptor: file.descriptor, path: file.path)
        return RecoveryReport.TruncatedTail(file: file.path, offset: offset, droppedBytes: Int64(tail.count), savedTo: savedTo, reason: reason)
    }

    /// Records that the history was cut (Docs/Durability.md): every cut goes through here.
    static func advanceHistoryEpoch(in directory: String, io: any LogFileIO) throws(LogError) {
        let next: UInt64
        do {
            next = (try StoreManifest.read(in: directory)?.historyEpoch ?? 0) + 1
        } catch {
            // The old epoch is unreadable: any value it cannot have been will do (epochs are
            // only compared for equality). Counts stay small; this is far above any.
            next = (1 << 62) | UInt64(truncatingIfNeeded: time(nil))
        }
        try StoreManifest(historyEpoch: next).write(in: directory, io: io)
    }

    /// Creates a new, empty segment: header, preallocation, file and directory sync.
    func createSegment(base: LogPosition) throws(LogError) -> (entry: SegmentEntry, active: ActiveSegment) {
        let segmentPath = path(SegmentName.segment(base))
        let file = try OpenFile.open(segmentPath, flags: O_RDWR | O_CREAT | O_EXCL)
        try file.writeHeader(base: base, io: io)
        var preallocated = Int64(SegmentHeader.size)
        if configuration.preallocate {
            try io.preallocate(descriptor: file.descriptor, path: segmentPath, length: Int64(configuration.segmentSize))
            preallocated = max(preallocated, try file.size())
        }
        try io.synchronize(descriptor: file.descriptor, path: segmentPath)
        try StoreDirectory.synchronize(directory, io: io)
        let entry = SegmentEntry(basePosition: base, file: file, batches: [], nextPosition: base,
                                 minTimestamp: nil, maxTimestamp: nil, sealed: false, dataEnd: Int64(SegmentHeader.size))
        return (entry, ActiveSegment(file: file, basePosition: base, dataEnd: Int64(SegmentHeader.size), preallocatedTo: preallocated, batchCount: 0))
    }
}

extension OpenFile {
    func writeHeader(base: LogPosition, io: any LogFileIO) throws(LogError) {
        try SegmentHeader(basePosition: base).encoded().withBytes { (raw) throws(LogError) in
            try io.writeAll(raw, toAbsoluteOffset: 0, descriptor: descriptor, path: path)
        }
    }
}

/// `recovered/`: where recovery and repair keep every byte they remove from the log.
enum RecoveredFiles {
    static let directoryName = "recovered"

    static func path(directory: String, name: String) -> String {
        directory + "/" + directoryName + "/" + name
    }

    static func save(_ bytes: [UInt8], directory: String, name: String, io: any LogFileIO) throws(LogError) {
        let folder = directory + "/" + directoryName
        try StoreDirectory.create(folder)
        try StoreDirectory.writeAtomically(bytes, directory: folder, name: name, io: io)
    }
}
