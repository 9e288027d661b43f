package import EventLog
import KernelPrimitives

/// The last event a snapshot covers, as the log held it when the snapshot was written: the
/// snapshot is used only while the log still holds exactly that event there.
package struct SnapshotAnchor: Hashable, Sendable {
    /// The record's timestamp.
    package var timestamp: LogTimestamp
    /// CRC32C of the record's payload.
    package var payloadChecksum: UInt32

    /// Creates an anchor.
    package init(timestamp: LogTimestamp, payloadChecksum: UInt32) {
        self.timestamp = timestamp
        self.payloadChecksum = payloadChecksum
    }

    /// The anchor of a log record.
    package init(_ record: LogRecordView) {
        self.init(timestamp: record.timestamp, payloadChecksum: CRC32C.checksum(record.payload))
    }
}

/// One projection snapshot as stored on disk.
///
/// Layout (integers little-endian):
/// ```
/// magic "EKSN" (4) | format version u16 (2) | codec u8 (0 none, 1 lz4) | reserved u8
/// projection schema version u16 | name length u16 | name (UTF-8)
/// next position u64 (first position not covered)
/// history epoch u64 | anchor timestamp i64 | anchor payload CRC32C u32     (format 2)
/// uncompressed length u64 | stored length u64
/// CRC32C of the stored body u32 | CRC32C of every header byte before this field u32
/// stored body (stored length bytes)
/// ```
/// The anchor is the record at `next position - 1` (zeros when the position is 0). Format 1
/// files (no epoch, no anchor) are still decoded, and never used: nothing says which history
/// they describe.
package struct SnapshotFile: Hashable, Sendable {
    /// The file magic.
    package static let magic: [UInt8] = Array("EKSN".utf8)
    /// The format version written.
    package static let formatVersion: UInt16 = 2

    /// The projection's name.
    package var projectionName: String
    /// The projection's schema version.
    package var schemaVersion: UInt16
    /// The first log position not covered by the state.
    package var nextPosition: LogPosition
    /// The log's history epoch when the snapshot was written (nil in format 1 files).
    package var historyEpoch: UInt64?
    /// The last covered record (nil when nothing is covered, and in format 1 files).
    package var anchor: SnapshotAnchor?
    /// The uncompressed state.
    package var body: [UInt8]

    /// Creates a snapshot value.
    /// - Parameters:
    ///   - projectionName: The projection's name.
    ///   - schemaVersion: The projection's schema version.
    ///   - nextPosition: The first position not covered.
    ///   - historyEpoch: The log's `historyEpoch` when the state was captured.
    ///   - anchor: The record at `nextPosition - 1` (nil when `nextPosition` is 0).
    ///   - body: The state.
    package init(projectionName: String, schemaVersion: UInt16, nextPosition: LogPosition,
                historyEpoch: UInt64? = nil, anchor: SnapshotAnchor? = nil, body: [UInt8]) {
        self.projectionName = projectionName
        self.schemaVersion = schemaVersion
        self.nextPosition = nextPosition
        self.historyEpoch = historyEpoch
        self.anchor = anchor
        self.body = body
    }

    /// Encodes the file, LZ4-compressing the body when that makes it smaller.
    /// - Throws: `LogError` when compression fails.
    package func encoded() throws -> [UInt8] {
        let (header, stored) = try encodedParts()
        return header + stored
    }

    /// The file in two parts, its header and its stored body (the body LZ4-compressed when that
    /// makes it smaller), written one after the other: a writer need not copy a large body
    /// into one array with its header (``SnapshotDirectory/write(_:keep:)``).
    /// - Throws: `LogError` when compression fails.
    package func encodedParts() throws -> (header: [UInt8], stored: [UInt8]) {
        let compressed = try body.withBytes { (raw) throws(LogError) -> [UInt8] in
            do throws(CompressionError) {
                return try LZ4Block.compressed(raw)
            } catch {
                throw LogError(error)
            }
        }
        let useLZ4 = !body.isEmpty && compressed.count < body.count
        let stored = useLZ4 ? compressed : body
        var writer = BinaryWriter(capacity: 64 + projectionName.utf8.count)
        writer.writeRaw(Self.magic)
        writer.writeFixed(Self.formatVersion)
        writer.writeUInt8(useLZ4 ? 1 : 0)
        writer.writeUInt8(0)
        writer.writeFixed(schemaVersion)
        let name = Array(projectionName.utf8)
        // The store refuses such a name when a projection registers (EventStore.checkName):
        // cut short, it would name no projection and the snapshot would never be used.
        precondition(name.count <= Int(UInt16.max), "a projection name of \(name.count) bytes does not fit a snapshot header")
        writer.writeFixed(UInt16(name.count))
        writer.writeRaw(name)
        writer.writeFixed(nextPosition)
        writer.writeFixed(historyEpoch ?? 0)
        writer.writeFixed(anchor?.timestamp.nanosecondsSince1970 ?? 0)
        writer.writeFixed(anchor?.payloadChecksum ?? 0)
        writer.writeFixed(UInt64(body.count))
        writer.writeFixed(UInt64(stored.count))
        writer.writeFixed(CRC32C.checksum(stored))
        writer.writeFixed(CRC32C.checksum(writer.bytes))
        return (writer.bytes, stored)
    }

    /// What a snapshot file's header holds: enough to know what the snapshot covers without
    /// reading its body.
    struct Header {
        var codec: UInt8
        var projectionName: String
        var schemaVersion: UInt16
        var nextPosition: LogPosition
        var historyEpoch: UInt64?
        var anchor: SnapshotAnchor?
        var uncompressedLength: UInt64
        var storedLength: UInt64
        var bodyCRC: UInt32
        /// Where the body starts.
        var bodyOffset: Int
    }

    /// The most bytes a header can take (a name of `UInt16.max` bytes and every fixed field).
    static let maximumHeaderSize = 64 + Int(UInt16.max)

    /// Decodes and checks (against its own checksum) the header at the start of `bytes`,
    /// which may hold the whole file or only its first ``maximumHeaderSize`` bytes.
    /// - Throws: ``BinaryDecodingError`` (with the byte offset) for bad magic, an unknown
    ///   version or codec, truncation or a header checksum mismatch.
    static func decodeHeader(_ bytes: [UInt8]) throws(BinaryDecodingError) -> Header {
        var reader = BinaryReader(bytes)
        guard try reader.readRaw(count: 4) == Self.magic else {
            throw BinaryDecodingError(.invalidValue("not a snapshot file (bad magic)"), at: 0)
        }
        let version = try reader.readFixed(UInt16.self)
        guard version == 1 || version == Self.formatVersion else {
            throw BinaryDecodingError(.invalidValue("unknown snapshot format version \(version)"), at: 4)
        }
        let codec = try reader.readUInt8()
        guard codec <= 1 else { throw BinaryDecodingError(.invalidValue("unknown snapshot codec \(codec)"), at: 6) }
        // Reserved: written 0. Anything else is a format this reader does not know.
        let reserved = try reader.readUInt8()
        guard reserved == 0 else { throw BinaryDecodingError(.invalidValue("reserved header byte is \(reserved), not 0"), at: 7) }
        let schemaVersion = try reader.readFixed(UInt16.self)
        let nameLength = try reader.readFixed(UInt16.self)
        let nameOffset = reader.offset
        guard let name = String(validating: try reader.readRaw(count: Int(nameLength)), as: UTF8.self) else {
            throw BinaryDecodingError(.invalidUTF8, at: nameOffset)
        }
        let nextPosition = try reader.readFixed(UInt64.self)
        var historyEpoch: UInt64?
        var anchor: SnapshotAnchor?
        if version >= 2 {
            historyEpoch = try reader.readFixed(UInt64.self)
            let timestamp = try reader.readFixed(Int64.self)
            let checksum = try reader.readFixed(UInt32.self)
            if nextPosition > 0 {
                anchor = SnapshotAnchor(timestamp: LogTimestamp(nanosecondsSince1970: timestamp), payloadChecksum: checksum)
            }
        }
        let uncompressedLength = try reader.readFixed(UInt64.self)
        let storedLength = try reader.readFixed(UInt64.self)
        let bodyCRC = try reader.readFixed(UInt32.self)
        let headerEnd = reader.offset
        let headerCRC = try reader.readFixed(UInt32.self)
        guard CRC32C.checksum(bytes[0..<headerEnd]) == headerCRC else {
            throw BinaryDecodingError(.invalidValue("snapshot header checksum mismatch"), at: headerEnd)
        }
        return Header(codec: codec, projectionName: name, schemaVersion: schemaVersion, nextPosition: nextPosition,
                      historyEpoch: historyEpoch, anchor: anchor, uncompressedLength: uncompressedLength,
                      storedLength: storedLength, bodyCRC: bodyCRC, bodyOffset: reader.offset)
    }

    /// Checks a whole file's bytes as they were written, without decompressing its body: the
    /// header against its checksum, the stored body's length and CRC32C, and the lengths its
    /// codec allows. What a copy of the file (a backup) must keep, at the speed of a checksum;
    /// ``init(decoding:)`` checks the same, then decompresses.
    /// - Parameter bytes: The whole file.
    /// - Returns: The header, and the CRC32C of the stored body (``Header/bodyCRC``, checked).
    /// - Throws: ``BinaryDecodingError`` (with the byte offset) for bad magic, an unknown
    ///   version or codec, a checksum mismatch, or a length that does not fit.
    static func checkedHeader(ofFile bytes: [UInt8]) throws(BinaryDecodingError) -> Header {
        let header = try decodeHeader(bytes)
        let bodyOffset = header.bodyOffset
        guard header.storedLength == UInt64(bytes.count - bodyOffset) else {
            throw BinaryDecodingError(.invalidValue("stored length \(header.storedLength) but \(bytes.count - bodyOffset) byte(s) follow the header"), at: bodyOffset)
        }
        guard CRC32C.checksum(bytes[bodyOffset...]) == header.bodyCRC else {
            throw BinaryDecodingError(.invalidValue("snapshot body checksum mismatch"), at: bodyOffset)
        }
        guard header.uncompressedLength <= UInt64(LZ4Block.maxInputSize) else {
            throw BinaryDecodingError(.invalidValue("uncompressed length \(header.uncompressedLength) is too large"), at: bodyOffset)
        }
        guard header.codec == 1 || header.uncompressedLength == header.storedLength else {
            throw BinaryDecodingError(.invalidValue("uncompressed body with differing lengths"), at: bodyOffset)
        }
        return header
    }

    /// Decodes and verifies a file.
    /// - Throws: ``BinaryDecodingError`` (with the byte offset) for bad magic, an unknown
    ///   version or codec, a checksum mismatch, truncation or a failed decompression.
    package init(decoding bytes: [UInt8]) throws(BinaryDecodingError) {
        let header = try Self.checkedHeader(ofFile: bytes)
        let (codec, name, schemaVersion, nextPosition, historyEpoch, anchor) =
            (header.codec, header.projectionName, header.schemaVersion, header.nextPosition, header.historyEpoch, header.anchor)
        let uncompressedLength = header.uncompressedLength
        let bodyOffset = header.bodyOffset
        let stored = bytes[bodyOffset...]
        if codec == 1 {
            var body = [UInt8](repeating: 0, count: Int(uncompressedLength))
            let failure = Self.decompress(stored, into: &body)
            if let failure {
                throw BinaryDecodingError(.invalidValue("snapshot body: \(failure.message)"), at: bodyOffset)
            }
            self.body = body
        } else {
            self.body = Array(stored)
        }
        self.projectionName = name
        self.schemaVersion = schemaVersion
        self.nextPosition = nextPosition
        self.historyEpoch = historyEpoch
        self.anchor = anchor
    }

    private static func decompress(_ stored: ArraySlice<UInt8>, into body: inout [UInt8]) -> CompressionError? {
        do {
            try stored.withUnsafeBytes { source in
                try body.withUnsafeMutableBytes { destination in try LZ4Block.decompress(source, into: destination) }
            }
            return nil
        } catch {
            return error as? CompressionError ?? CompressionError(.failed, "\(error)")
        }
    }
}
