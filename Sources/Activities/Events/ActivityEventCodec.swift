public import EventKernel
public import EventLog
public import Foundation

/// The compact binary encoding of ``ActivityEvent``s in the log.
///
/// Event types are `activity.added`, `activity.updated`, `activity.ended` and
/// `activity.deleted`, written at schema version 2. The activity's id is the envelope's entity
/// id and is not repeated in the payload. Payloads (little-endian):
///
/// - added, updated: flags `UInt8` (bit 0: has an end date), start date (Float64), end date
///   (Float64, if flagged), type (varint length + UTF-8).
/// - ended: end date (Float64).
/// - deleted: empty.
///
/// Dates: schema version 2 stores `Date.timeIntervalSinceReferenceDate` (seconds since
/// 2001-01-01), the `Double` a `Date` holds, so that a model reads back equal to what was
/// written. Version 1 stored seconds since 1970, which converting to and from the reference
/// date rounds for some dates (a model could read back one ulp off); it is still decoded.
/// A future schema version must keep decoding versions 1 and 2 (see ``decode(_:)``).
public struct ActivityEventCodec: Sendable {
    /// The event type names.
    public enum EventType {
        /// `activity.added`
        public static let added = "activity.added"
        /// `activity.updated`
        public static let updated = "activity.updated"
        /// `activity.ended`
        public static let ended = "activity.ended"
        /// `activity.deleted`
        public static let deleted = "activity.deleted"
    }

    /// The schema version written.
    public static let schemaVersion: UInt16 = 2

    /// The entity type of activity streams: an activity's stream is `activity/<uuid>`.
    public static let entityType = "activity"

    /// The stream of the activity with `id`.
    public static func stream(of id: UUID) -> StreamID { StreamID(entityType, .uuid(id)) }

    /// Creates the codec.
    public init() {}

    /// Encodes an event for ``EventStore/append(_:)``.
    public func encode(_ event: ActivityEvent) -> EncodedEvent {
        var writer = BinaryWriter(capacity: 32)
        let type: String
        switch event {
        case .added(let model), .updated(let model):
            type = if case .added = event { EventType.added } else { EventType.updated }
            writer.writeUInt8(model.endDate == nil ? 0 : 1)
            writer.writeDateReference(model.startDate)
            if let end = model.endDate { writer.writeDateReference(end) }
            writer.writeString(model.type.rawValue)
        case .ended(_, let date):
            type = EventType.ended
            writer.writeDateReference(date)
        case .deleted:
            type = EventType.deleted
        }
        return EncodedEvent(eventType: type, schemaVersion: Self.schemaVersion, stream: Self.stream(of: event.activityID), payload: writer.bytes)
    }

    /// Decodes an event from its envelope.
    /// - Throws: ``BinaryDecodingError`` for a malformed payload, ``ActivityDecodingError`` for an
    ///   event type or schema version this build does not know, or an entity id that is not a UUID.
    public func decode(_ envelope: EventEnvelope) throws -> ActivityEvent {
        var strings = StringInterner()
        return try decode(envelope, strings: &strings)
    }

    /// ``decode(_:)``, taking type names from `strings` when they repeat (the projection's
    /// fold and replay decode every event: building each type name anew was most of a decode).
    package func decode(_ envelope: EventEnvelope, strings: inout StringInterner) throws -> ActivityEvent {
        guard case .uuid(let id) = envelope.entityID else {
            throw ActivityDecodingError(position: envelope.position, message: "the entity id \(envelope.entityID) is not a UUID")
        }
        guard envelope.schemaVersion == 1 || envelope.schemaVersion == 2 else {
            throw ActivityDecodingError(position: envelope.position, message: "schema version \(envelope.schemaVersion) is newer than this build's (\(Self.schemaVersion))")
        }
        let version1 = envelope.schemaVersion == 1
        var reader = BinaryReader(envelope.payload)
        func readDate() throws(BinaryDecodingError) -> Date {
            version1 ? try reader.readDateExact() : try reader.readDateReference()
        }
        let event: ActivityEvent
        switch envelope.eventType {
        case EventType.added, EventType.updated:
            let flags = try reader.readUInt8()
            let start = try readDate()
            let end = flags & 1 != 0 ? try readDate() : nil
            let type = ActivityType(rawValue: try reader.readString(interning: &strings))
            let model = ActivityModel(id: id, startDate: start, endDate: end, type: type)
            event = envelope.eventType == EventType.added ? .added(model) : .updated(model)
        case EventType.ended:
            event = .ended(id: id, at: try readDate())
        case EventType.deleted:
            event = .deleted(id: id)
        default:
            throw ActivityDecodingError(position: envelope.position, message: "unknown activity event type \"\(envelope.eventType)\"")
        }
        try reader.expectEnd()
        return event
    }

    /// Whether an envelope holds an activity event (a store may hold other domains too).
    public static func isActivityEvent(_ envelope: EventEnvelope) -> Bool {
        envelope.stream.entityType == entityType
    }
}

/// An activity event this build cannot decode: where, and why.
public struct ActivityDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The event's log position.
    public var position: LogPosition
    /// What is wrong with it.
    public var message: String
    public var description: String { "activity event at position \(position): \(message)" }
}
