public import EventLog

/// A projection's state captured for a snapshot: the encoded state and how much of the log it covers.
public struct ProjectionSnapshot: Hashable, Sendable {
    /// The encoded state.
    public var bytes: [UInt8]
    /// The position of the first event *not* folded in (0 for the empty state).
    public var nextPosition: LogPosition

    /// Creates a snapshot value.
    public init(bytes: [UInt8], nextPosition: LogPosition) {
        self.bytes = bytes
        self.nextPosition = nextPosition
    }
}

/// Folds committed events into in-memory state that queries read.
///
/// The ``EventStore`` calls ``apply(_:)`` with each commit's events in position order, from
/// inside the commit path (after the log made them durable), so a query never sees an event a
/// crash could still take away. Implementations keep their state behind their own lock, held
/// only for the in-memory fold and for reads, so queries never wait on a write or an fsync.
/// ``ProjectedState`` is the ready-made implementation most domains use.
public protocol Projection: AnyObject, Sendable {
    /// A stable name, unique per store; snapshot files are keyed by it.
    var name: String { get }
    /// The version of the state's encoding; bump it when ``snapshotState()`` changes shape, and
    /// older snapshots are ignored (a full replay rebuilds the state).
    var schemaVersion: UInt16 { get }
    /// The position of the first event not yet folded in.
    var nextPosition: LogPosition { get }
    /// Folds one commit's events, in position order. Events below ``nextPosition`` must be
    /// ignored (replays may overlap what a snapshot covered).
    func apply(_ envelopes: [EventEnvelope])
    /// Captures the state and its ``nextPosition`` consistently.
    /// - Throws: Whatever encoding the state throws.
    func snapshotState() throws -> ProjectionSnapshot
    /// Replaces the state with a snapshot's. Called only before the projection serves queries.
    /// - Throws: When the bytes do not decode; the caller then falls back to a replay.
    func restore(from snapshot: ProjectionSnapshot) throws
}
