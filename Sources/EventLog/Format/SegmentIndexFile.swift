import KernelPrimitives
/// Where one batch lives, as recorded in a sealed segment's index and kept in memory for reads.
struct BatchLocation: Hashable, Sendable {
    var firstPosition: LogPosition
    /// The positions the batch covers: its record count, unless it is sparse (compaction's).
    var positionCount: UInt32
    /// Header plus stored payload.
    var batchLength: UInt32
    /// Byte offset of the batch header in its segment file.
    var offset: Int64
    var minTimestamp: Int64
    var maxTimestamp: Int64

    var endPosition: LogPosition { firstPosition + LogPosition(positionCount) }
    var endOffset: Int64 { offset + Int64(batchLength) }
}

/// The side file written when a segment is sealed (`<base>.idx`), listing its batches so that
/// opening a store reads no payload of a sealed segment (Docs/FileFormat.md, "Segment index").
///
/// ```
/// offset size field
///      0    8 magic "EKINDEX1"
///      8    4 format version (1)
///     12    4 batch count n
///     16    8 base position
///     24    8 next position (one past the last position the segment covers)
///     32    8 data length: the segment file's exact length
///     40  40n entries: first position u64, position count u32 (the record count, unless the
///                      batch is sparse), batch length u32, offset u64, min timestamp i64,
///                      max timestamp i64
///  40+40n   4 CRC32C of all preceding bytes
/// ```
/// A side file rather than a footer: the segment stays a pure sequence of batches, and an index
/// lost or damaged is rebuilt from the segment itself (it is derived data).
struct SegmentIndexFile: Hashable, Sendable {
    static let magic: [UInt8] = Array("EKINDEX1".utf8)
    static let formatVersion: UInt32 = 1
    static let headerSize = 40
    static let entrySize = 40

    var basePosition: LogPosition
    var nextPosition: LogPosition
    var dataLength: Int64
    var batches: [BatchLocation]

    func encoded() -> [UInt8] {
        var bytes = Self.magic
        bytes.reserveCapacity(Self.headerSize + batches.count * Self.entrySize + 4)
        bytes.appendLittleEndian(Self.formatVersion)
        bytes.appendLittleEndian(UInt32(batches.count))
        bytes.appendLittleEndian(basePosition)
        bytes.appendLittleEndian(nextPosition)
        bytes.appendLittleEndian(dataLength)
        for batch in batches {
            bytes.appendLittleEndian(batch.firstPosition)
            bytes.appendLittleEndian(batch.positionCount)
            bytes.appendLittleEndian(batch.batchLength)
            bytes.appendLittleEndian(batch.offset)
            bytes.appendLittleEndian(batch.minTimestamp)
            bytes.appendLittleEndian(batch.maxTimestamp)
        }
        let crc = bytes.withUnsafeBytes { CRC32C.checksum($0) }
        bytes.appendLittleEndian(crc)
        return bytes
    }

    /// Decodes and cross-checks an index; the error message says what is wrong, without location.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<SegmentIndexFile, LogError> {
        func fail(_ message: String, _ offset: Int) -> Result<SegmentIndexFile, LogError> {
            .failure(LogError(.corruption, message, offset: Int64(offset)))
        }
        guard bytes.count >= headerSize + 4 else { return fail("index file is truncated (\(bytes.count) bytes)", 0) }
        guard Array(bytes[0..<8]) == magic else { return fail("bad index magic", 0) }
        let stored = bytes.loadLittleEndian(at: bytes.count - 4, as: UInt32.self)
        let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<(bytes.count - 4)]))
        guard stored == computed else { return fail("index checksum mismatch", bytes.count - 4) }
        let version = bytes.loadLittleEndian(at: 8, as: UInt32.self)
        guard version == formatVersion else {
            return .failure(LogError(.unsupportedVersion, "index format version \(version) is not supported", offset: 8))
        }
        let count = Int(bytes.loadLittleEndian(at: 12, as: UInt32.self))
        guard bytes.count == headerSize + count * entrySize + 4 else {
            return fail("index length \(bytes.count) does not match its \(count) entries", 12)
        }
        var index = SegmentIndexFile(
            basePosition: bytes.loadLittleEndian(at: 16, as: UInt64.self),
            nextPosition: bytes.loadLittleEndian(at: 24, as: UInt64.self),
            dataLength: bytes.loadLittleEndian(at: 32, as: Int64.self),
            batches: [])
        index.batches.reserveCapacity(count)
        var expectedPosition = index.basePosition
        var expectedOffset = Int64(SegmentHeader.size)
        for i in 0..<count {
            let o = headerSize + i * entrySize
            let batch = BatchLocation(
                firstPosition: bytes.loadLittleEndian(at: o, as: UInt64.self),
                positionCount: bytes.loadLittleEndian(at: o + 8, as: UInt32.self),
                batchLength: bytes.loadLittleEndian(at: o + 12, as: UInt32.self),
                offset: bytes.loadLittleEndian(at: o + 16, as: Int64.self),
                minTimestamp: bytes.loadLittleEndian(at: o + 24, as: Int64.self),
                maxTimestamp: bytes.loadLittleEndian(at: o + 32, as: Int64.self))
            guard batch.firstPosition == expectedPosition, batch.offset == expectedOffset, batch.positionCount > 0,
                  Int(batch.batchLength) >= BatchHeader.size else {
                return fail("index entry \(i) is not contiguous with the previous one", o)
            }
            expectedPosition = batch.endPosition
            expectedOffset = batch.endOffset
            index.batches.append(batch)
        }
        guard expectedPosition == index.nextPosition, expectedOffset == index.dataLength else {
            return fail("index entries do not add up to its next position and data length", 24)
        }
        return .success(index)
    }
}
