#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Segment {
    /// A sealed segment as its index side file lists it (no payload read).
    init(file: OpenFile, index: SegmentIndexFile) {
        self.init(file: file, basePosition: index.basePosition, sealed: true)
        batches.reserveCapacity(index.batches.count)
        for batch in index.batches { add(batch) }
    }

    /// The segment's index: what its side file lists.
    var index: SegmentIndexFile {
        SegmentIndexFile(basePosition: basePosition, nextPosition: nextPosition, dataLength: dataEnd, batches: batches)
    }

    /// Writes the index side file of the segment `index` describes (atomically).
    static func writeIndex(_ index: SegmentIndexFile, directory: String, io: any LogFileIO) throws(LogError) {
        try StoreDirectory.writeAtomically(index.encoded(), directory: directory, name: Name.index(index.basePosition), io: io)
    }

    /// Reads a side file (an index or a checkpoint: they share a layout, ``SegmentIndexFile``).
    /// - Returns: Its contents, or why they fail their own checks.
    /// - Throws: ``LogError`` when the file cannot be opened or read.
    static func readSideFile(at path: String) throws(LogError) -> Result<SegmentIndexFile, LogError> {
        let file = try OpenFile.open(path, flags: O_RDONLY)
        let bytes = try file.read(fromAbsoluteOffset: 0, count: Int(try file.size()))
        return bytes.withUnsafeBytes { SegmentIndexFile.decode($0) }
    }
}
