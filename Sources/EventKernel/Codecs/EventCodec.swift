/// An event in encoded form, ready to append: its type name, schema version, stream and bytes.
public struct EncodedEvent: Hashable, Sendable {
    /// The event type name.
    public var eventType: String
    /// The schema version the payload was written with.
    public var schemaVersion: UInt16
    /// The stream (entity type and id) the event belongs to.
    public var stream: StreamID
    /// The encoded payload.
    public var payload: [UInt8]

    /// The id of the entity the event is about (``stream``'s).
    public var entityID: EntityID { stream.entityID }

    /// Creates an encoded event.
    /// - Parameters:
    ///   - eventType: The event type name, e.g. `"Account.added"`.
    ///   - schemaVersion: The schema version of `payload`.
    ///   - stream: The stream the event belongs to.
    ///   - payload: The encoded event.
    public init(eventType: String, schemaVersion: UInt16, stream: StreamID, payload: [UInt8]) {
        self.eventType = eventType
        self.schemaVersion = schemaVersion
        self.stream = stream
        self.payload = payload
    }
}

/// Maps a typed event to its encoded form and back.
///
/// Old schema versions stay decodable forever: ``decode(eventType:schemaVersion:payload:)``
/// receives the version the payload was written with and upcasts it to the current `Event`.
public protocol EventCodec<Event>: Sendable {
    /// The typed event.
    associatedtype Event: Sendable

    /// Encodes an event with the current schema version.
    /// - Throws: Whatever the encoding throws.
    func encode(_ event: Event) throws -> EncodedEvent

    /// Decodes a payload written with any schema version this codec has ever written,
    /// upcasting older versions.
    /// - Throws: ``BinaryDecodingError``, `DecodingError`, or ``EventDecodingError`` for a type
    ///   or version the codec does not know.
    func decode(eventType: String, schemaVersion: UInt16, payload: [UInt8]) throws -> Event
}

extension EventCodec {
    /// Decodes the event in an envelope.
    /// - Throws: See ``decode(eventType:schemaVersion:payload:)``.
    public func decode(_ envelope: EventEnvelope) throws -> Event {
        try decode(eventType: envelope.eventType, schemaVersion: envelope.schemaVersion, payload: envelope.payload)
    }
}
