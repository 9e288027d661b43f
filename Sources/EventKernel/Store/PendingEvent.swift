public import Foundation
package import EventLog

/// An event to append: its encoded form plus an optional expected entity version.
public struct PendingEvent: Hashable, Sendable {
    /// The encoded event.
    public var event: EncodedEvent
    /// The entity version the caller expects before this event (0: the entity has no event
    /// yet); `nil` appends unconditionally.
    public var expectedVersion: UInt64?
    /// Audit context.
    public var metadata: EventMetadata
    /// The recorded-at time; `nil` uses the time of the append.
    public var recordedAt: Date?
    /// The recorded-at time exactly as the log stores it, overriding ``recordedAt``: a `Date`
    /// cannot hold the log's nanoseconds, and `eventkernel import` must store an exported
    /// event's time as it was.
    package var timestamp: LogTimestamp?

    /// Creates a pending event from an encoded one.
    public init(_ event: EncodedEvent, expectedVersion: UInt64? = nil, metadata: EventMetadata = .none, recordedAt: Date? = nil) {
        self.event = event
        self.expectedVersion = expectedVersion
        self.metadata = metadata
        self.recordedAt = recordedAt
    }

    /// Creates a pending event by encoding a typed event with its codec.
    /// - Throws: Whatever the codec throws.
    public init<Codec: EventCodec>(
        _ event: Codec.Event, codec: Codec, expectedVersion: UInt64? = nil,
        metadata: EventMetadata = .none, recordedAt: Date? = nil
    ) throws {
        self.init(try codec.encode(event), expectedVersion: expectedVersion, metadata: metadata, recordedAt: recordedAt)
    }
}
