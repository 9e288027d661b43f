public import EventLog

extension EventEnvelope {
    /// The version of the record payload layout written by ``encodeRecordPayload(eventType:schemaVersion:entityID:entityVersion:metadata:payload:)``.
    public static let recordFormatVersion: UInt8 = 1

    /// Encodes an event as a log record payload.
    ///
    /// Layout: format version (1 byte), event type (varint length + UTF-8), schema version
    /// (varint), entity id (tag + 16 bytes or string), entity version (varint), metadata flags
    /// (1 byte: bit 0 correlation id, bit 1 actor) and the present strings, then the payload
    /// to the end of the record. Position and timestamp are not stored: the log record holds them.
    public static func encodeRecordPayload(
        eventType: String, schemaVersion: UInt16, entityID: EntityID, entityVersion: UInt64,
        metadata: EventMetadata, payload: [UInt8]
    ) -> [UInt8] {
        var writer = BinaryWriter(capacity: 32 + eventType.utf8.count + payload.count)
        writer.writeUInt8(recordFormatVersion)
        writer.writeString(eventType)
        writer.writeVarint(UInt64(schemaVersion))
        writer.writeEntityID(entityID)
        writer.writeVarint(entityVersion)
        var flags: UInt8 = 0
        if metadata.correlationID != nil { flags |= 1 }
        if metadata.actor != nil { flags |= 2 }
        writer.writeUInt8(flags)
        if let correlationID = metadata.correlationID { writer.writeString(correlationID) }
        if let actor = metadata.actor { writer.writeString(actor) }
        writer.writeRaw(payload)
        return writer.bytes
    }

    /// Decodes an envelope from a log record.
    /// - Parameters:
    ///   - bytes: The record payload.
    ///   - position: The record's position.
    ///   - timestamp: The record's timestamp.
    /// - Throws: ``BinaryDecodingError`` with the byte offset of the damage.
    public init(recordPayload bytes: [UInt8], position: LogPosition, timestamp: LogTimestamp) throws(BinaryDecodingError) {
        var reader = BinaryReader(bytes)
        let version = try reader.readUInt8()
        guard version == Self.recordFormatVersion else {
            throw BinaryDecodingError(.invalidValue("unknown envelope format version \(version)"), at: 0)
        }
        let eventType = try reader.readString()
        let schemaVersion = try reader.readVarint(as: UInt16.self)
        let entityID = try reader.readEntityID()
        let entityVersion = try reader.readVarint()
        let flagsOffset = reader.offset
        let flags = try reader.readUInt8()
        guard flags & ~3 == 0 else {
            throw BinaryDecodingError(.invalidValue("unknown metadata flags \(flags)"), at: flagsOffset)
        }
        let correlationID = flags & 1 != 0 ? try reader.readString() : nil
        let actor = flags & 2 != 0 ? try reader.readString() : nil
        self.init(
            position: position, recordedAt: timestamp.date, eventType: eventType,
            schemaVersion: schemaVersion, entityID: entityID, entityVersion: entityVersion,
            metadata: EventMetadata(correlationID: correlationID, actor: actor),
            payload: reader.readRemaining())
    }

    /// Decodes an envelope from a borrowed log record view.
    /// - Throws: ``BinaryDecodingError`` with the byte offset of the damage.
    public init(_ view: LogRecordView) throws(BinaryDecodingError) {
        try self.init(recordPayload: Array(view.payload), position: view.position, timestamp: view.timestamp)
    }

    /// Decodes an envelope from an owned log record.
    /// - Throws: ``BinaryDecodingError`` with the byte offset of the damage.
    public init(_ record: LogRecord) throws(BinaryDecodingError) {
        try self.init(recordPayload: record.payload, position: record.position, timestamp: record.timestamp)
    }
}
