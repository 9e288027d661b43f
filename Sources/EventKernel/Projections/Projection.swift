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
    /// The part of folding a commit that needs no state: decoding payloads and running a
    /// domain's closures on them (upcasters, index keys). The store calls it before it takes
    /// its commit lock and hands the result to ``apply(_:prepared:)``, so those closures never
    /// run under a lock; a projection whose fold runs only its own code returns `nil`.
    /// - Parameter envelopes: One commit's events, in position order.
    /// - Returns: Whatever ``apply(_:prepared:)`` needs, or `nil`.
    func prepare(_ envelopes: [EventEnvelope]) -> (any Sendable)?
    /// Folds one commit's events given what ``prepare(_:)`` returned for them (`nil` when it
    /// was not called: the projection then prepares them itself).
    func apply(_ envelopes: [EventEnvelope], prepared: (any Sendable)?)
    /// Captures the state and its ``nextPosition`` consistently.
    /// - Throws: Whatever encoding the state throws.
    func snapshotState() throws -> ProjectionSnapshot
    /// Replaces the state with a snapshot's. Called only before the projection serves queries.
    /// - Throws: When the bytes do not decode; the caller then falls back to a replay.
    func restore(from snapshot: ProjectionSnapshot) throws
    /// The event this projection could not fold, if one was met. A failed projection folds
    /// nothing after it; the store refuses to open (or to register it) and never writes its
    /// snapshot, so the failure costs an error, never data.
    var failure: UndecodableEvent? { get }
}

extension Projection {
    /// Projections with nothing to prepare fold in ``apply(_:)`` alone.
    public func prepare(_ envelopes: [EventEnvelope]) -> (any Sendable)? { nil }

    /// Folds with ``apply(_:)``.
    public func apply(_ envelopes: [EventEnvelope], prepared: (any Sendable)?) { apply(envelopes) }

    /// Projections that cannot fail (their fold accepts every event) report none.
    public var failure: UndecodableEvent? { nil }
}
