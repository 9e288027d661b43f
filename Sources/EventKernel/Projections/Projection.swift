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
    /// What ``prepare(_:)`` makes of one commit's events, handed back to
    /// ``apply(_:prepared:)`` as it is (never boxed or cast); `Void` for a projection with
    /// nothing to prepare.
    associatedtype Prepared: Sendable = Void
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
    func prepare(_ envelopes: [EventEnvelope]) -> Prepared?
    /// Folds one commit's events given what ``prepare(_:)`` returned for them (`nil` when it
    /// was not called: the projection then prepares them itself).
    /// - Parameters:
    ///   - envelopes: One commit's events, in position order.
    ///   - prepared: What ``prepare(_:)`` returned for exactly these events, or `nil`.
    func apply(_ envelopes: [EventEnvelope], prepared: Prepared?)
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

extension Projection where Prepared == Void {
    /// Projections with nothing to prepare fold in ``apply(_:)`` alone.
    public func prepare(_ envelopes: [EventEnvelope]) -> Void? { nil }

    /// Folds with ``apply(_:)``.
    public func apply(_ envelopes: [EventEnvelope], prepared: Void?) { apply(envelopes) }
}

extension Projection {
    /// Projections that cannot fail (their fold accepts every event) report none.
    public var failure: UndecodableEvent? { nil }
}

/// One commit's (or replay chunk's) events as a projection prepared them outside every lock,
/// to be folded later under the store's commit lock. The prepared value keeps its type in the
/// closure: the store holds projections of different types side by side, and nothing is cast
/// back (one allocation per projection and commit, none per event).
struct PreparedFold: Sendable {
    /// The projection that prepared the events.
    fileprivate let projection: any Projection
    fileprivate let foldPrepared: @Sendable ([EventEnvelope]) -> Void
    /// The projection as one whose definition a rebuild can switch (``ProjectedState``), and
    /// its generation when it prepared: stored, not captured in a closure, because every commit
    /// makes one of these per projection and the benchmarks count the allocations of an append.
    private let switching: (any DefinitionSwitching)?
    private let generation: UInt64?

    /// Runs `projection`'s ``Projection/prepare(_:)`` on `envelopes`.
    init<P: Projection>(_ projection: P, _ envelopes: [EventEnvelope]) {
        // Read before it prepares: a switch in between makes the preparation look stale (it is
        // made again), never a stale one look current.
        switching = projection as? any DefinitionSwitching
        generation = switching?.generation
        let prepared = projection.prepare(envelopes)
        self.projection = projection
        self.foldPrepared = { projection.apply($0, prepared: prepared) }
    }

    /// Whether the projection's definition is still the one that prepared the events.
    fileprivate var isCurrent: Bool { switching?.generation == generation }

    /// Each of `projections` prepares `envelopes`.
    static func prepare(_ projections: [any Projection], _ envelopes: [EventEnvelope]) -> [PreparedFold] {
        projections.map { PreparedFold($0, envelopes) }
    }

    /// `envelopes` prepared for `projections`, in their order: what `earlier` holds for a
    /// projection, if still current, and otherwise prepared now.
    static func prepare(_ projections: [any Projection], _ envelopes: [EventEnvelope], reusing earlier: [PreparedFold]) -> [PreparedFold] {
        projections.map { projection in
            earlier.first { $0.projection === projection && $0.isCurrent } ?? PreparedFold(projection, envelopes)
        }
    }
}

/// A projection whose definition can change after it prepared a commit's events (a rebuild's
/// switch), so that the store can tell a preparation that is no longer current.
package protocol DefinitionSwitching: AnyObject, Sendable {
    /// Counts the definitions switched to.
    var generation: UInt64 { get }
}

extension [PreparedFold] {
    /// Whether these were prepared for exactly `projections` (the store's list as it is now, in
    /// its order), each by its current definition. Checked under the commit lock before a
    /// fold: when not, the caller leaves the lock, prepares again
    /// (``PreparedFold/prepare(_:_:reusing:)``) and comes back, so that a projection registered
    /// or rebuilt since the events were prepared never runs the domain's code (decoders,
    /// upcasters, index keys) under the lock.
    func cover(_ projections: [any Projection]) -> Bool {
        guard count == projections.count else { return false }
        for index in indices where self[index].projection !== projections[index] || !self[index].isCurrent { return false }
        return true
    }

    /// Folds `envelopes`, the events these were prepared for, into `projection`, registered at
    /// `index`: with what was prepared when `projection` prepared it there, and otherwise (not
    /// where the caller checked ``cover(_:)`` first, as every fold under the commit lock does)
    /// it prepares them itself.
    func fold(_ envelopes: [EventEnvelope], into projection: any Projection, at index: Int) {
        if index < count, self[index].projection === projection {
            self[index].foldPrepared(envelopes)
        } else {
            projection.apply(envelopes)
        }
    }
}

/// A projection whose state can be rebuilt from the log in the background and swapped in whole
/// (blue/green): see ``EventStore/rebuild(_:from:progress:)``.
///
/// The registered instance stays the one the store folds into, the repositories read and the
/// observers listen to; only its state (and its definition: fold, snapshot encoding) changes,
/// in one step. A query therefore reads either the complete old state or the complete new one.
public protocol RebuildableProjection: Projection {
    /// Takes over `rebuilt`'s state, definition and position in one step under this
    /// projection's lock, then tells this projection's listeners that the whole state changed.
    /// The store calls it under its commit lock, when `rebuilt` has folded exactly the events
    /// this projection has; `rebuilt` is not used afterwards.
    /// - Parameter rebuilt: A fresh instance of the same name, caught up with the log.
    func replaceState(with rebuilt: Self)
}
