public import EventLog
import Foundation
public import KernelPrimitives

extension EventEnvelope {
    /// The version of the record payload layout written by ``encodeRecordPayload(eventType:schemaVersion:stream:entityVersion:metadata:payload:)``.
    ///
    /// Format 3 moved the entity id to the end of the record (see the layout there); format 2
    /// added streams: an event belongs to an entity type and id, not to an id alone. Formats 1
    /// and 2 are still read; format 1's entity type is the event type up to its last `.`.
    public static let recordFormatVersion: UInt8 = 3

    /// Flag bits of the flags byte.
    private enum Flag {
        static let correlationID: UInt8 = 1
        static let actor: UInt8 = 2
        /// The entity type is written out (formats 2 and 3); otherwise it is the event type up
        /// to its last `.`, which saves its bytes in every record of the usual naming.
        static let entityType: UInt8 = 4
    }

    /// The last byte of a format 3 record: how the entity id before it is written.
    private enum IDTrailer {
        /// The 16 bytes of a UUID.
        static let uuid: UInt8 = 0
        /// A string's UTF-8 bytes, then their count as a 4-byte little-endian integer.
        static let string: UInt8 = 1
    }

    /// Encodes an event as a log record payload.
    ///
    /// Layout (format 3): format version (1 byte), event type (varint length + UTF-8), schema
    /// version (varint), stream version (varint), flags (1 byte: bit 0 correlation id, bit 1
    /// actor, bit 2 explicit entity type), the entity type when flagged, the present metadata
    /// strings, the payload, then the entity id as a trailer: a UUID's 16 bytes and the byte 0,
    /// or a string's UTF-8 bytes, their count (4 bytes, little-endian) and the byte 1. Position
    /// and timestamp are not stored: the log record holds them.
    ///
    /// Why the id last: a batch is compressed as a whole with LZ4, which copies repeated runs
    /// of four bytes or more and stores everything else as it is. With the parts that repeat
    /// from record to record (format, types, versions, flags, a domain's first fields) together
    /// and the parts that never repeat (the id, a domain's last fields) together, a record is
    /// one copy and one literal run instead of three or four: about 3 bytes less per event
    /// after compression (the payload puts its repeating fields first too).
    public static func encodeRecordPayload(
        eventType: String, schemaVersion: UInt16, stream: StreamID, entityVersion: UInt64,
        metadata: EventMetadata, payload: [UInt8]
    ) -> [UInt8] {
        let implicitType = StreamID.isImplicit(entityType: stream.entityType, ofEventType: eventType)
        var writer = BinaryWriter(capacity: 40 + eventType.utf8.count + payload.count)
        writer.writeUInt8(recordFormatVersion)
        writer.writeString(eventType)
        writer.writeVarint(UInt64(schemaVersion))
        writer.writeVarint(entityVersion)
        var flags: UInt8 = 0
        if metadata.correlationID != nil { flags |= Flag.correlationID }
        if metadata.actor != nil { flags |= Flag.actor }
        if !implicitType { flags |= Flag.entityType }
        writer.writeUInt8(flags)
        if !implicitType { writer.writeString(stream.entityType) }
        if let correlationID = metadata.correlationID { writer.writeString(correlationID) }
        if let actor = metadata.actor { writer.writeString(actor) }
        writer.writeRaw(payload)
        switch stream.entityID {
        case .uuid(let uuid):
            writer.writeUUID(uuid)
            writer.writeUInt8(IDTrailer.uuid)
        case .string(let string):
            let bytes = Array(string.utf8)
            writer.writeRaw(bytes)
            writer.writeFixed(UInt32(bytes.count))
            writer.writeUInt8(IDTrailer.string)
        }
        return writer.bytes
    }

    /// Decodes an envelope from a log record (format 1, 2 or 3).
    /// - Parameters:
    ///   - bytes: The record payload.
    ///   - position: The record's position.
    ///   - timestamp: The record's timestamp.
    /// - Throws: ``BinaryDecodingError`` with the byte offset of the damage.
    public init(recordPayload bytes: [UInt8], position: LogPosition, timestamp: LogTimestamp) throws(BinaryDecodingError) {
        var strings = StringInterner()
        try self.init(recordPayload: bytes, position: position, timestamp: timestamp, strings: &strings)
    }

    /// Decodes an envelope, taking its strings (event and entity types, metadata) from
    /// `strings` when they repeat: what a replay, which decodes every record, calls.
    /// - Throws: ``BinaryDecodingError`` with the byte offset of the damage.
    package init(
        recordPayload bytes: consuming [UInt8], position: LogPosition, timestamp: LogTimestamp, strings: inout StringInterner
    ) throws(BinaryDecodingError) {
        let header = try Self.readHeader(bytes, strings: &strings)
        let entityID: EntityID, trailerLength: Int
        if let leadingID = header.leadingID { (entityID, trailerLength) = (leadingID, 0) } else { (entityID, trailerLength) = try Self.trailingEntityID(bytes, after: header.length) }
        // The payload is what lies between: moved to the front of the record's own buffer, not
        // copied into a new one (one allocation per record instead of two).
        var payload = consume bytes
        payload.removeLast(trailerLength)
        payload.removeSubrange(0..<header.length)
        self.init(
            position: position, timestamp: timestamp, eventType: header.eventType,
            schemaVersion: header.schemaVersion, stream: StreamID(header.entityType, entityID), entityVersion: header.entityVersion,
            metadata: EventMetadata(correlationID: header.correlationID, actor: header.actor),
            payload: payload)
    }

    /// The stream of the event in a record payload, without decoding the rest: what a pass that
    /// only sorts records by stream (compaction) reads. The same checks as the full decode
    /// (``init(recordPayload:position:timestamp:strings:)``), so a record one refuses the other does.
    /// - Throws: ``BinaryDecodingError`` with the byte offset of the damage.
    package static func stream(inRecordPayload bytes: [UInt8], strings: inout StringInterner) throws(BinaryDecodingError) -> StreamID {
        let header = try readHeader(bytes, strings: &strings)
        if let leadingID = header.leadingID { return StreamID(header.entityType, leadingID) }
        return StreamID(header.entityType, try trailingEntityID(bytes, after: header.length).0)
    }

    /// A record's fields before its payload (formats 1 to 3).
    private struct RecordHeader {
        var eventType: String
        var schemaVersion: UInt16
        /// Formats 1 and 2 write the id here; format 3 at the end.
        var leadingID: EntityID?
        var entityVersion: UInt64
        var entityType: String
        var correlationID: String?
        var actor: String?
        /// Where the payload starts.
        var length: Int
    }

    /// Reads the fields before the payload: the one reader of them.
    /// - Throws: ``BinaryDecodingError`` with the byte offset of the damage.
    private static func readHeader(_ bytes: [UInt8], strings: inout StringInterner) throws(BinaryDecodingError) -> RecordHeader {
        var reader = BinaryReader(bytes)
        let version = try reader.readUInt8()
        guard (1...Self.recordFormatVersion).contains(version) else {
            throw BinaryDecodingError(.invalidValue("unknown envelope format version \(version)"), at: 0)
        }
        let eventType = try reader.readString(interning: &strings)
        let schemaVersion = try reader.readVarint(as: UInt16.self)
        let leadingID = version < 3 ? try reader.readEntityID() : nil
        let entityVersion = try reader.readVarint()
        let flagsOffset = reader.offset
        let flags = try reader.readUInt8()
        let known = version == 1 ? Flag.correlationID | Flag.actor : Flag.correlationID | Flag.actor | Flag.entityType
        guard flags & ~known == 0 else {
            throw BinaryDecodingError(.invalidValue("unknown metadata flags \(flags)"), at: flagsOffset)
        }
        let entityType = flags & Flag.entityType != 0 ? try reader.readString(interning: &strings)
            : StreamID.legacyEntityType(ofEventType: eventType, interning: &strings)
        let correlationID = flags & Flag.correlationID != 0 ? try reader.readString(interning: &strings) : nil
        let actor = flags & Flag.actor != 0 ? try reader.readString(interning: &strings) : nil
        return RecordHeader(eventType: eventType, schemaVersion: schemaVersion, leadingID: leadingID, entityVersion: entityVersion,
                            entityType: entityType, correlationID: correlationID, actor: actor, length: reader.offset)
    }

    /// Reads a format 3 record's trailing entity id, which must leave `headerLength` bytes
    /// before it.
    /// - Returns: The id and the trailer's length.
    private static func trailingEntityID(_ bytes: [UInt8], after headerLength: Int) throws(BinaryDecodingError) -> (EntityID, Int) {
        let count = bytes.count
        guard count > headerLength else { throw BinaryDecodingError(.truncated(needed: 1), at: count) }
        let tagOffset = count - 1
        switch bytes[tagOffset] {
        case IDTrailer.uuid:
            guard tagOffset - headerLength >= 16 else {
                throw BinaryDecodingError(.truncated(needed: 16 - (tagOffset - headerLength)), at: headerLength)
            }
            var value = uuid_t(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            bytes.withUnsafeBytes { source in
                withUnsafeMutableBytes(of: &value) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[(tagOffset - 16)..<tagOffset])) }
            }
            return (.uuid(UUID(uuid: value)), 17)
        case IDTrailer.string:
            guard tagOffset - headerLength >= 4 else {
                throw BinaryDecodingError(.truncated(needed: 4 - (tagOffset - headerLength)), at: headerLength)
            }
            let lengthOffset = tagOffset - 4
            let length = bytes.withUnsafeBytes { Int($0.loadLittleEndian(at: lengthOffset, as: UInt32.self)) }
            guard lengthOffset - headerLength >= length else {
                throw BinaryDecodingError(.truncated(needed: length - (lengthOffset - headerLength)), at: headerLength)
            }
            let string = bytes.withUnsafeBufferPointer { String(utf8Validating: UnsafeBufferPointer(rebasing: $0[(lengthOffset - length)..<lengthOffset])) }
            guard let string else { throw BinaryDecodingError(.invalidUTF8, at: lengthOffset - length) }
            return (.string(string), length + 5)
        case let tag:
            throw BinaryDecodingError(.invalidValue("unknown entity id trailer \(tag)"), at: tagOffset)
        }
    }

    /// Decodes an envelope from a borrowed log record view.
    /// - Throws: ``BinaryDecodingError`` with the byte offset of the damage.
    public init(_ view: LogRecordView) throws(BinaryDecodingError) {
        try self.init(recordPayload: Array(view.payload), position: view.position, timestamp: view.timestamp)
    }

    /// Decodes an envelope from a borrowed log record view, with `strings` (see
    /// ``init(recordPayload:position:timestamp:strings:)``).
    /// - Throws: ``BinaryDecodingError`` with the byte offset of the damage.
    package init(_ view: LogRecordView, strings: inout StringInterner) throws(BinaryDecodingError) {
        try self.init(recordPayload: Array(view.payload), position: view.position, timestamp: view.timestamp, strings: &strings)
    }

    /// Decodes an envelope from an owned log record.
    /// - Throws: ``BinaryDecodingError`` with the byte offset of the damage.
    public init(_ record: LogRecord) throws(BinaryDecodingError) {
        try self.init(recordPayload: record.payload, position: record.position, timestamp: record.timestamp)
    }
}
