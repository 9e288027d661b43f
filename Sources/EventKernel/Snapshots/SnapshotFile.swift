public import EventLog

/// One projection snapshot as stored on disk.
///
/// Layout (integers little-endian):
/// ```
/// magic "EKSN" (4) | format version u16 | codec u8 (0 none, 1 lz4) | reserved u8
/// projection schema version u16 | name length u16 | name (UTF-8)
/// next position u64 (first position not covered) | uncompressed length u64 | stored length u64
/// CRC32C of the stored body u32 | CRC32C of every header byte before this field u32
/// stored body (stored length bytes)
/// ```
public struct SnapshotFile: Hashable, Sendable {
    /// The file magic.
    public static let magic: [UInt8] = Array("EKSN".utf8)
    /// The format version written and understood.
    public static let formatVersion: UInt16 = 1

    /// The projection's name.
    public var projectionName: String
    /// The projection's schema version.
    public var schemaVersion: UInt16
    /// The first log position not covered by the state.
    public var nextPosition: LogPosition
    /// The uncompressed state.
    public var body: [UInt8]

    /// Creates a snapshot value.
    public init(projectionName: String, schemaVersion: UInt16, nextPosition: LogPosition, body: [UInt8]) {
        self.projectionName = projectionName
        self.schemaVersion = schemaVersion
        self.nextPosition = nextPosition
        self.body = body
    }

    /// Encodes the file, LZ4-compressing the body when that makes it smaller.
    /// - Throws: ``LogError`` when compression fails.
    public func encoded() throws -> [UInt8] {
        var compressed: [UInt8] = []
        try body.withUnsafeBytes { raw in _ = try LZ4Block.compress(raw, appendingTo: &compressed) }
        let useLZ4 = !body.isEmpty && compressed.count < body.count
        let stored = useLZ4 ? compressed : body
        var writer = BinaryWriter(capacity: 64 + stored.count)
        writer.writeRaw(Self.magic)
        writer.writeFixed(Self.formatVersion)
        writer.writeUInt8(useLZ4 ? 1 : 0)
        writer.writeUInt8(0)
        writer.writeFixed(schemaVersion)
        let name = Array(projectionName.utf8)
        writer.writeFixed(UInt16(clamping: name.count))
        writer.writeRaw(name.prefix(Int(UInt16.max)))
        writer.writeFixed(nextPosition)
        writer.writeFixed(UInt64(body.count))
        writer.writeFixed(UInt64(stored.count))
        writer.writeFixed(CRC32C.checksum(stored))
        writer.writeFixed(CRC32C.checksum(writer.bytes))
        writer.writeRaw(stored)
        return writer.bytes
    }

    /// Decodes and verifies a file.
    /// - Throws: ``BinaryDecodingError`` (with the byte offset) for bad magic, an unknown
    ///   version or codec, a checksum mismatch, truncation or a failed decompression.
    public init(decoding bytes: [UInt8]) throws(BinaryDecodingError) {
        var reader = BinaryReader(bytes)
        guard try reader.readRaw(count: 4) == Self.magic else {
            throw BinaryDecodingError(.invalidValue("not a snapshot file (bad magic)"), at: 0)
        }
        let version = try reader.readFixed(UInt16.self)
        guard version == Self.formatVersion else {
            throw BinaryDecodingError(.invalidValue("unknown snapshot format version \(version)"), at: 4)
        }
        let codec = try reader.readUInt8()
        guard codec <= 1 else { throw BinaryDecodingError(.invalidValue("unknown snapshot codec \(codec)"), at: 6) }
        _ = try reader.readUInt8()
        let schemaVersion = try reader.readFixed(UInt16.self)
        let nameLength = try reader.readFixed(UInt16.self)
        let nameOffset = reader.offset
        guard let name = String(validating: try reader.readRaw(count: Int(nameLength)), as: UTF8.self) else {
            throw BinaryDecodingError(.invalidUTF8, at: nameOffset)
        }
        let nextPosition = try reader.readFixed(UInt64.self)
        let uncompressedLength = try reader.readFixed(UInt64.self)
        let storedLength = try reader.readFixed(UInt64.self)
        let bodyCRC = try reader.readFixed(UInt32.self)
        let headerEnd = reader.offset
        let headerCRC = try reader.readFixed(UInt32.self)
        guard CRC32C.checksum(bytes[0..<headerEnd]) == headerCRC else {
            throw BinaryDecodingError(.invalidValue("snapshot header checksum mismatch"), at: headerEnd)
        }
        let bodyOffset = reader.offset
        guard storedLength == UInt64(reader.remaining) else {
            throw BinaryDecodingError(.invalidValue("stored length \(storedLength) but \(reader.remaining) byte(s) follow the header"), at: bodyOffset)
        }
        let stored = reader.readRemaining()
        guard CRC32C.checksum(stored) == bodyCRC else {
            throw BinaryDecodingError(.invalidValue("snapshot body checksum mismatch"), at: bodyOffset)
        }
        guard uncompressedLength <= UInt64(LZ4Block.maxInputSize) else {
            throw BinaryDecodingError(.invalidValue("uncompressed length \(uncompressedLength) is too large"), at: bodyOffset)
        }
        if codec == 1 {
            var body = [UInt8](repeating: 0, count: Int(uncompressedLength))
            let failure = Self.decompress(stored, into: &body)
            if let failure {
                throw BinaryDecodingError(.invalidValue("snapshot body: \(failure.message)"), at: bodyOffset)
            }
            self.body = body
        } else {
            guard uncompressedLength == storedLength else {
                throw BinaryDecodingError(.invalidValue("uncompressed body with differing lengths"), at: bodyOffset)
            }
            self.body = stored
        }
        self.projectionName = name
        self.schemaVersion = schemaVersion
        self.nextPosition = nextPosition
    }

    private static func decompress(_ stored: [UInt8], into body: inout [UInt8]) -> LogError? {
        do {
            try stored.withUnsafeBytes { source in
                try body.withUnsafeMutableBytes { destination in try LZ4Block.decompress(source, into: destination) }
            }
            return nil
        } catch {
            return error as? LogError ?? LogError(.compression, "\(error)")
        }
    }
}
