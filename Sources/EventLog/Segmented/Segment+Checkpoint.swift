// The active segment's checkpoint (`<base>.ckpt`, Docs/FileFormat.md): written on clean
// close, it lists the batches the segment held then, so that the next open checks only what
// was appended after them, as a sealed segment's index spares its scan. It is also a record of
// what was acknowledged: the recovery rule (Docs/Durability.md, "What counts as torn") holds a
// segment to it here, for recovery and `verify` alike.

extension Segment.Active {
    /// Records the segment's batches in its checkpoint, or removes the checkpoint when it
    /// holds none. Best effort: without a checkpoint, the next open scans the whole segment,
    /// as after a crash.
    /// - Parameter batches: The segment's batches, as published to its readers.
    func writeCheckpoint(batches: [BatchLocation]) {
        let name = Segment.Name.checkpoint(basePosition)
        guard !batches.isEmpty else {
            try? StoreDirectory.remove(directory + "/" + name)
            return
        }
        try? StoreDirectory.writeAtomically(index(of: batches).encoded(), directory: directory, name: name, io: io)
    }
}

extension Segment {
    /// Reads a checkpoint file: nil when it is missing or fails its own checks.
    static func readCheckpoint(at path: String) throws(LogError) -> SegmentIndexFile? {
        guard StoreDirectory.exists(path), case .success(let checkpoint) = try readSideFile(at: path) else { return nil }
        return checkpoint
    }

    /// The checkpoint of the active segment `file` (starting at `base`), checked against it.
    ///
    /// A checkpoint whose own checksum fails is derived data gone bad: ignored (removed when
    /// `removingInvalid`, as a writer does) and the whole segment is scanned. A valid one is a
    /// record of what was acknowledged, so a segment that no longer holds its batches is
    /// damage, never a torn tail (``checkAgainstCheckpoint(_:base:file:path:)``).
    /// - Returns: The checkpoint, or nil when there is none to use.
    /// - Throws: ``LogError``: corruption when the segment does not match its checkpoint.
    static func loadCheckpoint(of file: OpenFile, base: LogPosition, directory: String, removingInvalid: Bool) throws(LogError) -> SegmentIndexFile? {
        let path = directory + "/" + Name.checkpoint(base)
        guard let checkpoint = try readCheckpoint(at: path) else {
            if removingInvalid { try StoreDirectory.remove(path) }
            return nil
        }
        try checkAgainstCheckpoint(checkpoint, base: base, file: file, path: path)
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
            // Located at the first listed batch the file no longer holds whole: where the loss
            // begins, and where `repair` cuts (at the file's end it cut nothing, leaving that
            // batch's first bytes as a torn tail for the next writer to find).
            let lost = checkpoint.batches.first { $0.endOffset > size }
            throw LogError(.corruption,
                "the segment is \(size) bytes but its checkpoint (\(checkpointPath)) lists acknowledged batches up to byte \(checkpoint.dataLength): acknowledged records are missing",
                file: file.path, offset: lost?.offset ?? size, position: lost?.firstPosition ?? checkpoint.nextPosition)
        }
        guard let last = checkpoint.batches.last else { return }
        let header = try file.read(fromAbsoluteOffset: last.offset, count: BatchHeader.size)
        guard header.count == BatchHeader.size,
              case .success(let decoded) = header.withUnsafeBytes({ BatchHeader.decode($0) }),
              decoded.firstPosition == last.firstPosition, decoded.positionCount == last.positionCount,
              decoded.batchLength == Int(last.batchLength) else {
            throw LogError(.corruption,
                "the batch at this offset does not match the one the checkpoint (\(checkpointPath)) lists (positions \(last.firstPosition)..<\(last.endPosition)): an acknowledged batch is damaged",
                file: file.path, offset: last.offset, position: last.firstPosition)
        }
    }

    /// Fails when a valid checkpoint names a segment that is not there (the active segment was
    /// deleted: acknowledged records are gone, which is damage).
    /// - Parameters:
    ///   - directory: The store directory.
    ///   - bases: The base positions of the segment files in it.
    static func checkForOrphanedCheckpoints(in directory: String, segmentBases bases: [LogPosition]) throws(LogError) {
        let names = try StoreDirectory.list(directory)
        for name in names {
            guard let base = Name.basePosition(ofCheckpointNamed: name), !bases.contains(base) else { continue }
            let checkpointPath = directory + "/" + name
            guard let checkpoint = try readCheckpoint(at: checkpointPath), !checkpoint.batches.isEmpty else { continue }
            throw LogError(.corruption,
                "the checkpoint lists acknowledged records \(checkpoint.basePosition)..<\(checkpoint.nextPosition) of segment \(Name.segment(base)), which is missing",
                file: checkpointPath, offset: 0, position: checkpoint.basePosition)
        }
    }
}
