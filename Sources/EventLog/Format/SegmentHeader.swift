import KernelPrimitives
/// The 32-byte header at the start of every segment file (Docs/FileFormat.md, "Segment file"):
/// the format's definition. Writing and checking a segment's header is ``Segment``'s
/// (`Segment+Header.swift`).
///
/// ```
/// offset size field
///      0    8 magic "EKLOGSEG"
///      8    4 format version (1)
///     12    4 header length (32)
///     16    8 base position: the first position the segment holds (also its file name)
///     24    4 reserved (zero)
///     28    4 CRC32C of bytes 0..<28
/// ```
struct SegmentHeader: Hashable, Sendable {
    static let size = 32
    static let magic: [UInt8] = Array("EKLOGSEG".utf8)
    static let formatVersion: UInt32 = 1

    var basePosition: LogPosition

    func encoded() -> [UInt8] {
        var bytes = Self.magic
        bytes.appendLittleEndian(Self.formatVersion)
        bytes.appendLittleEndian(UInt32(Self.size))
        bytes.appendLittleEndian(basePosition)
        bytes.appendLittleEndian(UInt32(0))
        let crc = bytes.withUnsafeBytes { CRC32C.checksum($0) }
        bytes.appendLittleEndian(crc)
        return bytes
    }

    /// Decodes a header; the failure is a message for a located ``LogError``.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<SegmentHeader, LogError> {
        guard bytes.count >= size else {
            return .failure(LogError(.corruption, "segment header is truncated (\(bytes.count) of \(size) bytes)", offset: 0))
        }
        guard Array(bytes[0..<8]) == magic else {
            return .failure(LogError(.corruption, "bad segment magic (not an EventKernel log segment)", offset: 0))
        }
        let stored = bytes.loadLittleEndian(at: 28, as: UInt32.self)
        let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<28]))
        guard stored == computed else {
            return .failure(LogError(.corruption, "segment header checksum mismatch", offset: 0))
        }
        let version = bytes.loadLittleEndian(at: 8, as: UInt32.self)
        guard version == formatVersion else {
            return .failure(LogError(.unsupportedVersion, "segment format version \(version) is not supported (this build reads \(formatVersion))", offset: 8))
        }
        guard bytes.loadLittleEndian(at: 12, as: UInt32.self) == UInt32(size) else {
            return .failure(LogError(.corruption, "segment header length is not \(size)", offset: 12))
        }
        return .success(SegmentHeader(basePosition: bytes.loadLittleEndian(at: 16, as: UInt64.self)))
    }
}
