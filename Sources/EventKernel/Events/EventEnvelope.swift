public import Foundation
public import EventLog

/// Optional context recorded with an event, for audit.
public struct EventMetadata: Hashable, Sendable, Codable {
    /// Ties together events caused by one request or operation.
    public var correlationID: String?
    /// Who or what caused the event (a user, a service).
    public var actor: String?

    /// Creates metadata.
    public init(correlationID: String? = nil, actor: String? = nil) {
        self.correlationID = correlationID
        self.actor = actor
    }

    /// No metadata.
    public static let none = EventMetadata()
}

/// A committed event as read back from the store: where and when it was recorded, what it is
/// about, and its encoded payload.
public struct EventEnvelope: Hashable, Sendable {
    /// The log position: global, gap-free, assigned on commit.
    public var position: LogPosition
    /// When the event was recorded, exactly as the log stores it (nanoseconds since 1970).
    public var timestamp: LogTimestamp
    /// When the event was recorded, as a `Date` (``timestamp`` through a `Double`: below a
    /// microsecond it may round; print ``timestamp`` to show what is stored).
    public var recordedAt: Date {
        get { timestamp.date }
        set { timestamp = LogTimestamp(clamping: newValue) }
    }
    /// The event type name, e.g. `"Account.added"`.
    public var eventType: String
    /// The schema version of ``payload``; codecs upcast older versions.
    public var schemaVersion: UInt16
    /// The stream (entity type and id) the event belongs to.
    public var stream: StreamID
    /// The stream's version after this event: 1 for its first event, then +1 per event.
    /// (Records of envelope format 1 keep the version they were written with, which counted
    /// per entity id across types; see Docs/FileFormat.md.)
    public var entityVersion: UInt64
    /// Audit context.
    public var metadata: EventMetadata
    /// The codec-encoded event.
    public var payload: [UInt8]

    /// The id of the entity the event is about (``stream``'s).
    public var entityID: EntityID { stream.entityID }

    /// Creates an envelope recorded at `recordedAt` (rounded to the nanosecond).
    public init(
        position: LogPosition, recordedAt: Date, eventType: String, schemaVersion: UInt16,
        stream: StreamID, entityVersion: UInt64, metadata: EventMetadata = .none, payload: [UInt8]
    ) {
        self.init(position: position, timestamp: LogTimestamp(clamping: recordedAt), eventType: eventType,
                  schemaVersion: schemaVersion, stream: stream, entityVersion: entityVersion, metadata: metadata, payload: payload)
    }

    /// Creates an envelope recorded at a log timestamp.
    public init(
        position: LogPosition, timestamp: LogTimestamp, eventType: String, schemaVersion: UInt16,
        stream: StreamID, entityVersion: UInt64, metadata: EventMetadata = .none, payload: [UInt8]
    ) {
        self.position = position
        self.timestamp = timestamp
        self.eventType = eventType
        self.schemaVersion = schemaVersion
        self.stream = stream
        self.entityVersion = entityVersion
        self.metadata = metadata
        self.payload = payload
    }
}
