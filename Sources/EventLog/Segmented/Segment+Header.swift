import KernelPrimitives
extension Segment {
    /// Writes the header of the segment starting at `base` (``SegmentHeader``) at offset 0.
    static func writeHeader(base: LogPosition, to file: OpenFile, io: any LogFileIO) throws(LogError) {
        try SegmentHeader(basePosition: base).encoded().withBytes { (raw) throws(LogError) in
            try io.writeAll(raw, toAbsoluteOffset: 0, descriptor: file.descriptor, path: file.path)
        }
    }

    /// Reads and decodes the header of the segment file named for `base`.
    /// - Returns: The header, or why it is not valid (with the file, offset and position).
    /// - Throws: ``LogError`` when the file cannot be read.
    static func readHeader(of file: OpenFile, base: LogPosition) throws(LogError) -> Result<SegmentHeader, LogError> {
        let bytes = try file.read(fromAbsoluteOffset: 0, count: SegmentHeader.size)
        return bytes.withUnsafeBytes { SegmentHeader.decode($0) }.mapError { error in
            var error = error
            error.file = file.path
            error.position = base
            return error
        }
    }

    /// Checks that the file starts with a valid header for the base position its name says.
    /// - Throws: ``LogError`` (corruption or an unsupported version, with file, offset and
    ///   position) otherwise.
    static func checkHeader(of file: OpenFile, base: LogPosition) throws(LogError) {
        let header = try readHeader(of: file, base: base).get()
        guard header.basePosition == base else {
            throw LogError(.corruption, "segment header says base position \(header.basePosition), its name says \(base)",
                           file: file.path, offset: 16, position: base)
        }
    }

    /// Whether a segment file whose header is invalid is only a segment whose creation was cut
    /// short by a crash: its header bytes are a prefix of the right header (unwritten bytes are
    /// zero) and nothing but zeros follows. Such a file holds no data; a writer rewrites it
    /// (``finishCreation(of:base:io:)``).
    /// - Parameter bytes: The whole file.
    static func isUnfinishedCreation(_ bytes: [UInt8], base: LogPosition) -> Bool {
        let onlyHeaderSpace = bytes.count <= SegmentHeader.size
            || bytes.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[SegmentHeader.size...]).isAllZero() }
        let expectedHeader = SegmentHeader(basePosition: base).encoded()
        let headerIsPartialWrite = zip(bytes.prefix(SegmentHeader.size), expectedHeader).allSatisfy { $0 == $1 || $0 == 0 }
        return onlyHeaderSpace && headerIsPartialWrite
    }

    /// Whether the last segment `file`, whose header is invalid, is a segment whose creation
    /// was cut short by a crash (``isUnfinishedCreation(_:base:)`` of the whole file) that no
    /// checkpoint says held data: the one rule recovery and `verify` apply before calling such
    /// a file harmless.
    ///
    /// Why the checkpoint: a checkpoint is written at a clean close, after the segment's header
    /// was written and synced, so a valid one that lists batches says they were acknowledged.
    /// A file cut to nothing or overwritten with zeros afterwards looks like an unfinished
    /// creation, and calling it one lost those batches without a word (a newcomer's
    /// `truncate -s 0` of a store's only segment: `verify` said intact, a snapshot then
    /// removed the checkpoint, the last trace).
    /// - Parameter directory: The store directory (where the segment's checkpoint is).
    /// - Throws: ``LogError``: corruption when a valid checkpoint lists batches the file does
    ///   not hold (naming the checkpoint and the first position lost); an I/O failure.
    static func isUnfinishedCreation(of file: OpenFile, base: LogPosition, directory: String) throws(LogError) -> Bool {
        guard isUnfinishedCreation(try file.read(fromAbsoluteOffset: 0, count: Int(try file.size())), base: base) else { return false }
        let checkpointPath = directory + "/" + Name.checkpoint(base)
        if let checkpoint = try readCheckpoint(at: checkpointPath), let first = checkpoint.batches.first {
            throw LogError(.corruption,
                "the segment's header is missing or zeroed and it holds no batches, but its checkpoint (\(checkpointPath)) lists acknowledged batches at positions \(first.firstPosition)..<\(checkpoint.nextPosition) up to byte \(checkpoint.dataLength): acknowledged records are missing",
                file: file.path, offset: 0, position: first.firstPosition)
        }
        return true
    }

    /// Completes a creation cut short: writes the header and syncs the file.
    static func finishCreation(of file: OpenFile, base: LogPosition, io: any LogFileIO) throws(LogError) {
        try writeHeader(base: base, to: file, io: io)
        try io.synchronize(descriptor: file.descriptor, path: file.path)
    }
}
