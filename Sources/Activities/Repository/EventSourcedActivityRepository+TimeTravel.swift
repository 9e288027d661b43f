public import EventKernel
public import EventLog
public import Foundation

/// One event in an activity's history.
public struct ActivityHistoryEntry: Hashable, Sendable {
    /// The event's position in the log.
    public var position: LogPosition
    /// When the event was recorded, exactly as stored (nanoseconds since 1970).
    public var timestamp: LogTimestamp
    /// When the event was recorded, as a `Date` (see `EventEnvelope.recordedAt`).
    public var recordedAt: Date { timestamp.date }
    /// The activity's version after the event (1 for its first event).
    public var entityVersion: UInt64
    /// Correlation id and actor, if the writer gave them.
    public var metadata: EventMetadata
    /// The schema version the event was stored with (a tombstone's is the kernel's, not the
    /// Activities codec's).
    public var schemaVersion: UInt16
    /// What happened (a kernel tombstone reads as `.deleted`; see ``tombstone``).
    public var event: ActivityEvent
    /// The kernel's tombstone this event is (`$deleted`, `$purged`), written without the
    /// domain's code (`eventkernel delete`, `purge`); `nil` for the domain's own events.
    public var tombstone: Tombstone?
}

extension EventSourcedActivityRepository {
    /// Every event of one activity, oldest first, with positions and timestamps.
    /// - Parameters:
    ///   - id: The activity's id.
    ///   - end: The last position to read (`nil`: the end), as in
    ///     `EventStore.history(of:through:)`.
    /// - Throws: `RepositoryError.storage` if the log cannot be read or an event does not decode.
    /// - Complexity: O(n) in the events of the store (a full scan).
    public func history(of id: UUID, through end: LogPosition? = nil) throws -> [ActivityHistoryEntry] {
        try store.history(of: ActivityEventCodec.stream(of: id), through: end).map { envelope in
            ActivityHistoryEntry(position: envelope.position, timestamp: envelope.timestamp,
                                 entityVersion: envelope.entityVersion, metadata: envelope.metadata, schemaVersion: envelope.schemaVersion,
                                 event: try codec.decode(envelope), tombstone: Tombstone(eventType: envelope.eventType))
        }
    }

    /// The activities as they were after the event at `position` (inclusive), replayed from the
    /// newest snapshot at or before it.
    /// - Complexity: O(events between that snapshot and `position`).
    public func activities(throughPosition position: LogPosition) throws -> ActivityIndex {
        try store.state(of: { ActivityProjection() }, throughPosition: position).read { $0 }
    }

    /// The activities as they were at `date`: after every event recorded at or before it.
    /// Empty if the store has no event that old.
    public func activities(asOf date: Date) throws -> ActivityIndex {
        try store.state(of: { ActivityProjection() }, asOf: date)?.read { $0 } ?? ActivityIndex()
    }
}
