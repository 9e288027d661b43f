public import EventKernel
public import EventLog
public import Foundation
package import KernelPrimitives

/// The compact binary encoding of ``ActivityEvent``s in the log.
///
/// Event types are `activity.added`, `activity.updated`, `activity.ended` and
/// `activity.deleted`, written at schema version 3. The activity's id is the envelope's entity
/// id and is not repeated in the payload. Payloads (little-endian):
///
/// - added, updated (version 3): type (varint length + UTF-8), flags `UInt8` (bit 0: has an end
///   date; bit 1: the start is a whole number of seconds; bit 2: the end is the start plus a
///   whole number of seconds), the start (zigzag varint seconds if bit 1, else Float64), the end
///   if flagged (varint seconds after the start if bit 2, else Float64). The fields that repeat
///   between events come first and the dates last, next to the envelope's trailing id, so that a
///   batch's compression copies one run and stores one (see `EventEnvelope.encodeRecordPayload`).
///   Version 2: flags, start, end, then the type.
/// - ended (version 3): flags `UInt8` (bit 1 as above), the end date as the start is written.
/// - deleted: empty.
///
/// Dates are `Date.timeIntervalSinceReferenceDate` (seconds since 2001-01-01), the `Double` a
/// `Date` holds, so that a model reads back bit for bit equal to what was written. Version 3
/// writes a date that is a whole number of seconds (as an app's timestamps mostly are) as an
/// integer, and an end as its duration: 5 and 2-3 bytes instead of 8 and 8, which is most of
/// the log's bytes after the id (about a fifth of an activity's compressed bytes).
/// Version 2 wrote both as Float64 (flags bit 0 only); version 1 wrote seconds since 1970, which
/// converting to and from the reference date rounds for some dates (a model could read back
/// one ulp off). Both are still decoded, and a future version must keep decoding all three
/// (see ``decode(_:)``).
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
    public static let schemaVersion: UInt16 = 3

    private enum Flag {
        static let hasEnd: UInt8 = 1
        static let wholeStart: UInt8 = 2
        static let wholeDuration: UInt8 = 4
    }

    /// `value` as a whole number of seconds, when the `Double` is exactly that integer (bit for
    /// bit, so `-0.0` is not 0) and within the range where doubles hold every integer.
    private static func wholeSeconds(_ value: Double) -> Int64? {
        guard value.isFinite, abs(value) <= 0x1p53 else { return nil }
        let whole = Int64(value)
        return Double(whole).bitPattern == value.bitPattern ? whole : nil
    }

    /// The entity type of activity streams: an activity's stream is `activity/<uuid>`.
    public static let entityType = "activity"

    /// The stream of the activity with `id`.
    public static func stream(of id: UUID) -> StreamID { StreamID(entityType, .uuid(id)) }

    /// Creates the codec.
    public init() {}

    /// Encodes an event for `EventStore.append(_:)`.
    public func encode(_ event: ActivityEvent) -> EncodedEvent {
        var writer = BinaryWriter(capacity: 32)
        let type: String
        switch event {
        case .added(let model), .updated(let model):
            type = if case .added = event { EventType.added } else { EventType.updated }
            let start = model.startDate.timeIntervalSinceReferenceDate
            let wholeStart = Self.wholeSeconds(start)
            let end = model.endDate?.timeIntervalSinceReferenceDate
            // The end as the start plus whole seconds, when that gives back exactly the end.
            let duration = end.flatMap { end in
                Self.wholeSeconds(end - start).flatMap { $0 >= 0 && (start + Double($0)).bitPattern == end.bitPattern ? UInt64($0) : nil }
            }
            var flags: UInt8 = end == nil ? 0 : Flag.hasEnd
            if wholeStart != nil { flags |= Flag.wholeStart }
            if duration != nil { flags |= Flag.wholeDuration }
            writer.writeString(model.type.rawValue)
            writer.writeUInt8(flags)
            if let wholeStart { writer.writeZigZag(wholeStart) } else { writer.writeDouble(start) }
            if let duration { writer.writeVarint(duration) } else if let end { writer.writeDouble(end) }
        case .ended(_, let date):
            type = EventType.ended
            let end = date.timeIntervalSinceReferenceDate
            if let whole = Self.wholeSeconds(end) {
                writer.writeUInt8(Flag.wholeStart)
                writer.writeZigZag(whole)
            } else {
                writer.writeUInt8(0)
                writer.writeDouble(end)
            }
        case .deleted:
            type = EventType.deleted
        }
        return EncodedEvent(eventType: type, schemaVersion: Self.schemaVersion, stream: Self.stream(of: event.activityID), payload: writer.bytes)
    }

    /// Decodes an event from its envelope.
    /// - Throws: `BinaryDecodingError` for a malformed payload, ``ActivityDecodingError`` for an
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
        // The kernel's tombstones (soft delete and purge, written without this codec) end the
        // activity as its own delete event does; their schema version is the kernel's.
        if Tombstone(eventType: envelope.eventType) != nil {
            guard envelope.payload.isEmpty else {
                throw ActivityDecodingError(position: envelope.position, message: "the \(envelope.eventType) event of \(envelope.stream) has a \(envelope.payload.count)-byte payload; a tombstone's is empty")
            }
            return .deleted(id: id)
        }
        guard (1...Self.schemaVersion).contains(envelope.schemaVersion) else {
            throw ActivityDecodingError(position: envelope.position, message: "schema version \(envelope.schemaVersion) is newer than this build's (\(Self.schemaVersion))")
        }
        let version = envelope.schemaVersion
        var reader = BinaryReader(envelope.payload)
        /// A date written as a Float64 (versions 1 and 2, and version 3 without the whole flag).
        func readDouble() throws(BinaryDecodingError) -> Date {
            version == 1 ? try reader.readDateExact() : try reader.readDateReference()
        }
        /// A date of version 3, per its whole-seconds flag.
        func readDate(whole: Bool) throws(BinaryDecodingError) -> Date {
            whole ? Date(timeIntervalSinceReferenceDate: Double(try reader.readZigZag())) : try readDouble()
        }
        func readFlags(allowing known: UInt8) throws(BinaryDecodingError) -> UInt8 {
            let at = reader.offset
            let flags = try reader.readUInt8()
            guard flags & ~known == 0 else { throw BinaryDecodingError(.invalidValue("unknown activity flags \(flags)"), at: at) }
            return flags
        }
        let event: ActivityEvent
        switch envelope.eventType {
        case EventType.added, EventType.updated:
            let leadingType = version >= 3 ? ActivityType(rawValue: try reader.readString(interning: &strings)) : nil
            let flags = try readFlags(allowing: version < 3 ? Flag.hasEnd : Flag.hasEnd | Flag.wholeStart | Flag.wholeDuration)
            let start = try readDate(whole: flags & Flag.wholeStart != 0)
            var end: Date?
            if flags & Flag.hasEnd != 0 {
                end = flags & Flag.wholeDuration != 0
                    ? Date(timeIntervalSinceReferenceDate: start.timeIntervalSinceReferenceDate + Double(try reader.readVarint()))
                    : try readDouble()
            }
            let type = try leadingType ?? ActivityType(rawValue: try reader.readString(interning: &strings))
            let model = ActivityModel(id: id, startDate: start, endDate: end, type: type)
            event = envelope.eventType == EventType.added ? .added(model) : .updated(model)
        case EventType.ended:
            let whole = version >= 3 ? try readFlags(allowing: Flag.wholeStart) & Flag.wholeStart != 0 : false
            event = .ended(id: id, at: try readDate(whole: whole))
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
