import Foundation

/// A codec for any `Codable` event: JSON payloads, one event type name, a current schema
/// version, and decoders for the older versions (upcasters).
///
/// ```swift
/// let codec = JSONEventCodec<RenamedV2>(eventType: "Person.renamed", schemaVersion: 2, entityType: "Person", entityID: { .uuid($0.id) })
///     .upcasting(from: 1, decoding: RenamedV1.self) { RenamedV2(id: $0.id, name: $0.name, reason: nil) }
/// ```
public struct JSONEventCodec<E: Codable & Sendable>: EventCodec {
    public typealias Event = E

    /// The event type name written.
    public let eventType: String
    /// The schema version written.
    public let schemaVersion: UInt16
    /// The entity type of the streams the events belong to.
    public let entityType: String
    private let entityIDOf: @Sendable (E) -> EntityID
    private var upcasters: [UInt16: @Sendable ([UInt8]) throws -> E] = [:]

    /// Creates a codec.
    /// - Parameters:
    ///   - eventType: The event type name.
    ///   - schemaVersion: The current schema version.
    ///   - entityType: The entity type of the event's stream.
    ///   - entityID: Extracts the entity an event is about.
    public init(eventType: String, schemaVersion: UInt16 = 1, entityType: String, entityID: @escaping @Sendable (E) -> EntityID) {
        self.eventType = eventType
        self.schemaVersion = schemaVersion
        self.entityType = entityType
        self.entityIDOf = entityID
    }

    /// Returns a codec that also decodes payloads written with `version` as `Old`, converted by `upcast`.
    /// - Parameters:
    ///   - version: The older schema version.
    ///   - type: The `Decodable` shape of that version.
    ///   - upcast: Converts an old value to the current event.
    public func upcasting<Old: Decodable & Sendable>(
        from version: UInt16, decoding type: Old.Type, _ upcast: @escaping @Sendable (Old) throws -> E
    ) -> Self {
        var copy = self
        copy.upcasters[version] = { bytes in try upcast(JSONDecoder().decode(Old.self, from: Data(bytes))) }
        return copy
    }

    public func encode(_ event: E) throws -> EncodedEvent {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys // Stable bytes for the same value.
        return EncodedEvent(
            eventType: eventType, schemaVersion: schemaVersion, stream: StreamID(entityType, entityIDOf(event)),
            payload: Array(try encoder.encode(event)))
    }

    public func decode(eventType: String, schemaVersion: UInt16, payload: [UInt8]) throws -> E {
        guard eventType == self.eventType else {
            throw EventDecodingError.unknownEventType(eventType, entityType: entityType)
        }
        if schemaVersion == self.schemaVersion {
            return try JSONDecoder().decode(E.self, from: Data(payload))
        }
        guard let upcast = upcasters[schemaVersion] else {
            throw EventDecodingError.unknownSchemaVersion(schemaVersion, eventType: eventType, current: self.schemaVersion)
        }
        return try upcast(payload)
    }
}
