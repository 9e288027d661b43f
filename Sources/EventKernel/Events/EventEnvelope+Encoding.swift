public import EventLog

extension EventEnvelope {
    /// The version of the record payload layout written by ``encodeRecordPayload(eventType:schemaVersion:stream:entityVersion:metadata:payload:)``.
    ///
    /// Format 2 added streams: an event belongs to an entity type and id, not to an id alone.
    /// Format 1 (no stream) is still read: its entity type is the event type up to its last `.`.
    public static let recordFormatVersion: UInt8 = 2

    /// Flag bits of the byte after the entity version.
    private enum Flag {
        static let correlationID: UInt8 = 1
        static let actor: UInt8 = 2
        /// The entity type is written out (format 2); otherwise it is the event type up to its
        /// last `.`, which saves its bytes in every record of the usual naming.
        static let entityType: UInt8 = 4
    }

    /// Encodes an event as a log record payload.
    ///
    /// Layout: format version (1 byte), event type (varint length + UTF-8), schema version
    /// (varint), entity id (tag + 16 bytes or string), stream version (varint), flags (1 byte:
    /// bit 0 correlation id, bit 1 actor, bit 2 explicit entity type), the entity type when
    /// flagged, the present metadata strings, then the payload to the end of the record.
    /// Position and timestamp are not stored: the log record holds them.
    public static func encodeRecordPayload(
        eventType: String, schemaVersion: UInt16, stream: StreamID, entityVersion: UInt64,
        metadata: EventMetadata, payload: [UInt8]
    ) -> [UInt8] {
        let implicitType = StreamID.isImplicit(entityType: stream.entityType, ofEventType: eventType)
        var writer = BinaryWriter(capacity: 32 + eventType.utf8.count + payload.count)
        writer.writeUInt8(recordFormatVersion)
        writer.writeString(eventType)
        writer.writeVarint(UInt64(schemaVersion))
        writer.writeEntityID(stream.entityID)
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
        return writer.bytes
    }

    /// Decodes an envelope from a log record (format 1 or 2).
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
        var reader = BinaryReader(copy bytes)
        let version = try reader.readUInt8()
        guard version == 1 || version == Self.recordFormatVersion else {
            throw BinaryDecodingError(.invalidValue("unknown envelope format version \(version)"), at: 0)
        }
        let eventType = try reader.readString(interning: &strings)
        let schemaVersion = try reader.readVarint(as: UInt16.self)
        let entityID = try reader.readEntityID()
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
        // The payload is the rest of the record: moved to the front of the record's own
        // buffer, not copied into a new one (one allocation per record instead of two).
        let headerLength = reader.offset
        reader = BinaryReader([])
        var payload = consume bytes
        payload.removeSubrange(0..<headerLength)
        self.init(
            position: position, timestamp: timestamp, eventType: eventType,
            schemaVersion: schemaVersion, stream: StreamID(entityType, entityID), entityVersion: entityVersion,
            metadata: EventMetadata(correlationID: correlationID, actor: actor),
            payload: payload)
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
