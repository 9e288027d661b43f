import KernelPrimitives
/// The fixed 64-byte header in front of every batch (Docs/FileFormat.md, "Batch header").
///
/// ```
/// offset size field
///      0    4 magic "EKB1"
///      4    2 format version (1)
///      6    1 codec (0 none, 1 LZ4)
///      7    1 flags (0, or 1 = sparse)
///      8    8 first position
///     16    4 record count (>= 1; >= 0 when sparse)
///     20    4 stored payload length
///     24    4 uncompressed payload length
///     28    4 CRC32C of the stored payload
///     32    8 minimum record timestamp (ns since 1970, signed)
///     40    8 maximum record timestamp
///     48    4 position count when sparse, else zero
///     52    8 reserved (zero)
///     60    4 CRC32C of bytes 0..<60
/// ```
/// A *sparse* batch (flag bit 0) is what compaction writes in place of batches it removed
/// records from (Docs/FileFormat.md, "Sparse batches"): it covers `position count` positions
/// from its first, holds `record count` of them (possibly none), and each record carries its
/// distance from the previous one. Covering the whole range of what it replaces keeps the rule
/// that batches and segments are contiguous by position, so a gap never needs a second rule.
/// All integers little-endian. The header checksum is separate from the payload checksum so
/// that a reader can trust the lengths (and skip the payload) before reading the payload.
struct BatchHeader: Hashable, Sendable {
    static let size = 64
    /// "EKB1" read as a little-endian UInt32.
    static let magic: UInt32 = 0x3142_4B45
    static let formatVersion: UInt16 = 1
    /// Batches larger than this are refused on write and treated as damage on read; it bounds
    /// what a damaged length field can make a reader allocate.
    static let maxPayloadLength = 1 << 30

    /// Flag bit 0: the batch is sparse.
    static let sparseFlag: UInt8 = 1

    var codec: CompressionCodec
    var firstPosition: LogPosition
    /// The records the batch holds.
    var recordCount: UInt32
    /// The positions it covers, from `firstPosition`: its record count unless it is sparse.
    var positionCount: UInt32
    /// Whether each record carries its position (compaction's batches).
    var isSparse: Bool
    var storedLength: UInt32
    var uncompressedLength: UInt32
    var payloadChecksum: UInt32
    var minTimestamp: Int64
    var maxTimestamp: Int64

    /// A header; `sparsePositionCount` makes it a sparse batch covering that many positions.
    init(codec: CompressionCodec, firstPosition: LogPosition, recordCount: UInt32, sparsePositionCount: UInt32? = nil,
         storedLength: UInt32, uncompressedLength: UInt32, payloadChecksum: UInt32, minTimestamp: Int64, maxTimestamp: Int64) {
        self.codec = codec
        self.firstPosition = firstPosition
        self.recordCount = recordCount
        self.positionCount = sparsePositionCount ?? recordCount
        self.isSparse = sparsePositionCount != nil
        self.storedLength = storedLength
        self.uncompressedLength = uncompressedLength
        self.payloadChecksum = payloadChecksum
        self.minTimestamp = minTimestamp
        self.maxTimestamp = maxTimestamp
    }

    /// Header plus stored payload: the bytes the batch occupies in its segment.
    var batchLength: Int { Self.size + Int(storedLength) }
    /// One past the last position the batch covers.
    var endPosition: LogPosition { firstPosition + LogPosition(positionCount) }

    func encode(into bytes: inout [UInt8]) {
        let start = bytes.count
        bytes.reserveCapacity(start + Self.size)
        bytes.appendLittleEndian(Self.magic)
        bytes.appendLittleEndian(Self.formatVersion)
        bytes.append(codec.rawValue)
        bytes.append(isSparse ? Self.sparseFlag : 0)
        bytes.appendLittleEndian(firstPosition)
        bytes.appendLittleEndian(recordCount)
        bytes.appendLittleEndian(storedLength)
        bytes.appendLittleEndian(uncompressedLength)
        bytes.appendLittleEndian(payloadChecksum)
        bytes.appendLittleEndian(minTimestamp)
        bytes.appendLittleEndian(maxTimestamp)
        bytes.appendLittleEndian(isSparse ? positionCount : 0)
        bytes.append(contentsOf: repeatElement(0, count: 8))
        let crc = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[start..<(start + 60)])) }
        bytes.appendLittleEndian(crc)
    }

    /// Why a header failed to decode; the scanner turns these into located ``LogError``s.
    enum DecodeFailure: Error, Equatable {
        case allZero
        case badMagic(UInt32)
        case badHeaderChecksum(stored: UInt32, computed: UInt32)
        case unsupportedVersion(UInt16)
        case invalidField(String)

        var message: String {
            switch self {
            case .allZero: "batch header is all zero bytes (unwritten space)"
            case .badMagic(let m): "bad batch magic 0x\(String(m, radix: 16)) (expected 0x\(String(BatchHeader.magic, radix: 16)))"
            case .badHeaderChecksum(let s, let c):
                "batch header checksum mismatch: stored 0x\(String(s, radix: 16)), computed 0x\(String(c, radix: 16))"
            case .unsupportedVersion(let v): "batch format version \(v) is newer than this reader (\(BatchHeader.formatVersion))"
            case .invalidField(let what): "invalid batch header: \(what)"
            }
        }
    }

    /// Decodes and validates a header from exactly ``size`` bytes.
    static func decode(_ raw: UnsafeRawBufferPointer) -> Result<BatchHeader, DecodeFailure> {
        precondition(raw.count >= size)
        let bytes = UnsafeRawBufferPointer(rebasing: raw[0..<size])
        if bytes.isAllZero() { return .failure(.allZero) }
        let magic = bytes.loadLittleEndian(at: 0, as: UInt32.self)
        guard magic == Self.magic else { return .failure(.badMagic(magic)) }
        let stored = bytes.loadLittleEndian(at: 60, as: UInt32.self)
        let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<60]))
        guard stored == computed else { return .failure(.badHeaderChecksum(stored: stored, computed: computed)) }
        let version = bytes.loadLittleEndian(at: 4, as: UInt16.self)
        guard version == Self.formatVersion else { return .failure(.unsupportedVersion(version)) }
        guard let codec = CompressionCodec(rawValue: bytes[6]) else {
            return .failure(.invalidField("unknown codec \(bytes[6])"))
        }
        let flags = bytes[7]
        if flags & ~Self.sparseFlag != 0 { return .failure(.invalidField("flags \(flags) set")) }
        let isSparse = flags & Self.sparseFlag != 0
        let recordCount = bytes.loadLittleEndian(at: 16, as: UInt32.self)
        let header = BatchHeader(
            codec: codec,
            firstPosition: bytes.loadLittleEndian(at: 8, as: UInt64.self),
            recordCount: recordCount,
            sparsePositionCount: isSparse ? bytes.loadLittleEndian(at: 48, as: UInt32.self) : nil,
            storedLength: bytes.loadLittleEndian(at: 20, as: UInt32.self),
            uncompressedLength: bytes.loadLittleEndian(at: 24, as: UInt32.self),
            payloadChecksum: bytes.loadLittleEndian(at: 28, as: UInt32.self),
            minTimestamp: bytes.loadLittleEndian(at: 32, as: Int64.self),
            maxTimestamp: bytes.loadLittleEndian(at: 40, as: Int64.self))
        if header.isSparse {
            if header.positionCount == 0 { return .failure(.invalidField("sparse batch covering no position")) }
            if header.recordCount > header.positionCount {
                return .failure(.invalidField("sparse batch of \(header.recordCount) records covering \(header.positionCount) positions"))
            }
        } else if header.recordCount == 0 {
            return .failure(.invalidField("record count 0"))
        }
        if Int(header.storedLength) > maxPayloadLength || Int(header.uncompressedLength) > maxPayloadLength {
            return .failure(.invalidField("payload length \(header.storedLength)/\(header.uncompressedLength) exceeds \(maxPayloadLength)"))
        }
        if header.codec == .none && header.storedLength != header.uncompressedLength {
            return .failure(.invalidField("uncompressed batch with stored length \(header.storedLength) != \(header.uncompressedLength)"))
        }
        if header.minTimestamp > header.maxTimestamp {
            return .failure(.invalidField("minimum timestamp after maximum"))
        }
        if header.firstPosition > UInt64.max - UInt64(header.positionCount) {
            return .failure(.invalidField("position range overflows"))
        }
        return .success(header)
    }
}
