import Foundation
public import EventLog
import KernelPrimitives

/// A ``Projection`` over a value-type `State` and a reducer: the helper a domain uses.
///
/// The store folds commits in under a lock held only for the in-memory fold. Queries call
/// ``read(_:)``, which takes the current state (a copy-on-write value: O(1)) under that lock
/// and runs the query *outside* it, so a query may call back into any repository, and no user
/// closure ever runs under a lock. The cost of this: a commit folded while a query still holds
/// the state it read copies that state's storage once.
///
/// A reducer that throws marks the projection failed (``failure``): it folds nothing more, the
/// store refuses to open with it, and its snapshot is never written.
///
/// A new version (another reducer, encoding or schema version over the same `State` type) is
/// built from the log in the background and switched to with ``EventStore/rebuild(_:from:progress:)``:
/// the definition lives with the state, so both change in one step.
public final class ProjectedState<State: Sendable>: Projection, RebuildableProjection, StreamVersionSource, DefinitionSwitching {
    /// Folds one event into the state.
    public typealias Reducer = @Sendable (inout State, EventEnvelope) throws -> Void

    public let name: String

    /// How events fold and the state encodes: replaced, with the state, by a rebuild.
    private struct Definition: Sendable {
        var schemaVersion: UInt16
        var initial: State
        /// The one-step reducer; `nil` for a two-step fold.
        var reduce: Reducer?
        /// Prepares a commit for a two-step fold; `nil` for a one-step reducer.
        var prepareEvents: (@Sendable ([EventEnvelope]) -> PreparedEvents)?
        var encodeState: @Sendable (State) throws -> [UInt8]
        var decodeState: @Sendable ([UInt8]) throws -> State
    }

    private struct Inner {
        var state: State
        var nextPosition: LogPosition = 0
        var eventsApplied = 0
        var failure: UndecodableEvent?
        var definition: Definition
        /// Counts the rebuilds switched to: a commit prepared by an earlier definition is
        /// prepared again by the current one.
        var generation: UInt64 = 0
    }

    /// How a repository's state answers for its streams' versions.
    package struct Versioning: Sendable {
        /// The entity type.
        package var entityType: String
        /// The committed version of a stream of that type in a state.
        package var version: @Sendable (State, StreamID) -> UInt64
        /// Whether the entity of a stream of that type exists in a state; `nil`: not known.
        package var contains: (@Sendable (State, StreamID) -> Bool)?
        /// Drops what a state keeps of purged streams compaction removes
        /// (``StreamVersionSource/forgetVersions(of:)``).
        package var forget: @Sendable (inout State, [StreamID]) -> Void

        package init(
            entityType: String, version: @escaping @Sendable (State, StreamID) -> UInt64,
            contains: (@Sendable (State, StreamID) -> Bool)? = nil,
            forget: @escaping @Sendable (inout State, [StreamID]) -> Void
        ) {
            self.entityType = entityType
            self.version = version
            self.contains = contains
            self.forget = forget
        }
    }

    /// What ``prepare(_:)`` makes of one commit's events: each event's prepared value (or
    /// error), kept with its type inside `fold`, so that no value is boxed or cast per event.
    public struct PreparedEvents: Sendable {
        /// The position of the first event prepared.
        fileprivate var first: LogPosition
        /// How many events were prepared.
        fileprivate var count: Int
        /// Folds the event at an index of the commit with its prepared value.
        fileprivate var fold: @Sendable (inout State, EventEnvelope, Int) throws -> Void
        /// The definition's generation that prepared the events.
        fileprivate var generation: UInt64 = 0
    }

    private let inner: Locked<Inner>
    /// The entity type whose stream versions the state keeps, and how to read one: set by the
    /// repositories (see ``StreamVersionSource``).
    private let versioning: Versioning?
    private let listeners = Locked<(next: UInt64, all: [UInt64: @Sendable ([EventEnvelope]) -> Void])>((0, [:]))

    /// Creates a projection with explicit snapshot encoding.
    /// - Parameters:
    ///   - name: Unique per store.
    ///   - schemaVersion: The snapshot encoding's version.
    ///   - initial: The state before any event.
    ///   - encode: Encodes the state for a snapshot.
    ///   - decode: Decodes a snapshot's state.
    ///   - reducer: Folds one event. An error marks the projection failed (see ``failure``).
    public init(
        name: String, schemaVersion: UInt16, initial: State,
        encode: @escaping @Sendable (State) throws -> [UInt8],
        decode: @escaping @Sendable ([UInt8]) throws -> State,
        reducer: @escaping Reducer
    ) {
        self.name = name
        self.inner = Locked(Inner(state: initial, definition: Definition(
            schemaVersion: schemaVersion, initial: initial, reduce: reducer, prepareEvents: nil,
            encodeState: encode, decodeState: decode)))
        self.versioning = nil
    }

    /// Creates a projection whose fold has two steps: `prepare` turns an event into a value
    /// (decoding, upcasting, computing index keys: a domain's closures) outside every lock, and
    /// `fold` applies that value to the state under the projection's lock.
    /// - Parameters:
    ///   - name: Unique per store.
    ///   - schemaVersion: The snapshot encoding's version.
    ///   - initial: The state before any event.
    ///   - encode: Encodes the state for a snapshot.
    ///   - decode: Decodes a snapshot's state.
    ///   - prepare: Prepares one event. An error marks the projection failed at that event.
    ///   - fold: Folds one prepared event. An error marks the projection failed.
    public convenience init<Value: Sendable>(
        name: String, schemaVersion: UInt16, initial: State,
        encode: @escaping @Sendable (State) throws -> [UInt8],
        decode: @escaping @Sendable ([UInt8]) throws -> State,
        prepare: @escaping @Sendable (EventEnvelope) throws -> Value,
        fold: @escaping @Sendable (inout State, EventEnvelope, Value) throws -> Void
    ) {
        self.init(name: name, schemaVersion: schemaVersion, initial: initial, encode: encode, decode: decode,
                  prepare: prepare, fold: fold, versioning: nil)
    }

    /// A two-step projection that also keeps its entity type's stream versions (the
    /// repositories' projections; see ``StreamVersionSource``).
    package convenience init<Value: Sendable>(
        name: String, schemaVersion: UInt16, initial: State,
        encode: @escaping @Sendable (State) throws -> [UInt8],
        decode: @escaping @Sendable ([UInt8]) throws -> State,
        prepare: @escaping @Sendable (EventEnvelope) throws -> Value,
        fold: @escaping @Sendable (inout State, EventEnvelope, Value) throws -> Void,
        versioning: Versioning?
    ) {
        self.init(name: name, schemaVersion: schemaVersion, initial: initial, encode: encode, decode: decode,
                  prepareAll: { envelopes in envelopes.map { envelope in Result { try prepare(envelope) } } },
                  fold: fold, versioning: versioning)
    }

    /// A projection whose `prepareAll` prepares a whole batch of envelopes at once, outside
    /// every lock: what a projection does per batch (the generic repository computes a
    /// batch's index keys a property at a time) rather than per event.
    /// - Parameters:
    ///   - prepareAll: One result per envelope, in order; an envelope's failure is its fold's
    ///     (the projection fails at that event, as a throwing `prepare` would make it).
    package init<Value: Sendable>(
        name: String, schemaVersion: UInt16, initial: State,
        encode: @escaping @Sendable (State) throws -> [UInt8],
        decode: @escaping @Sendable ([UInt8]) throws -> State,
        prepareAll: @escaping @Sendable ([EventEnvelope]) -> [Result<Value, any Error>],
        fold: @escaping @Sendable (inout State, EventEnvelope, Value) throws -> Void,
        versioning: Versioning?
    ) {
        self.name = name
        let prepareEvents: @Sendable ([EventEnvelope]) -> PreparedEvents = { envelopes in
            let results = prepareAll(envelopes)
            precondition(results.count == envelopes.count, "\(name): prepared \(results.count) results for \(envelopes.count) events")
            return PreparedEvents(first: envelopes.first?.position ?? 0, count: envelopes.count) { state, envelope, index in
                try fold(&state, envelope, results[index].get())
            }
        }
        self.inner = Locked(Inner(state: initial, definition: Definition(
            schemaVersion: schemaVersion, initial: initial, reduce: nil, prepareEvents: prepareEvents,
            encodeState: encode, decodeState: decode)))
        self.versioning = versioning
    }

    private init(copying other: ProjectedState<State>) {
        self.name = other.name
        let definition = other.inner.withLock { $0.definition }
        self.inner = Locked(Inner(state: definition.initial, definition: definition))
        // A fresh copy (time travel) is never registered as a source.
        self.versioning = nil
    }

    /// A fresh instance with the same configuration and the initial state (for time travel).
    public func makeFresh() -> ProjectedState<State> {
        ProjectedState(copying: self)
    }

    /// Runs `body` on the current state, outside the projection's lock.
    /// - Complexity: O(1) plus `body`.
    public func read<R, E: Error>(_ body: (State) throws(E) -> R) throws(E) -> R {
        let state = inner.withLock { $0.state }
        return try body(state)
    }

    /// Runs `body` under the projection's lock, for the kernel's own short reads (an id lookup)
    /// that should not retain the state: never with a user closure.
    package func withLockedState<R>(_ body: (State) -> R) -> R {
        inner.withLock { body($0.state) }
    }

    package var versionedEntityType: String? { versioning?.entityType }

    package func committedVersion(of stream: StreamID) -> UInt64 {
        guard let versioning else { return 0 }
        return inner.withLock { versioning.version($0.state, stream) }
    }

    package func containsEntity(of stream: StreamID) -> Bool? {
        guard let contains = versioning?.contains else { return nil }
        return inner.withLock { contains($0.state, stream) }
    }

    package func forgetVersions(of streams: [StreamID]) {
        guard let versioning else { return }
        inner.withLock { versioning.forget(&$0.state, streams) }
    }

    /// The current state (a copy-on-write value).
    public var state: State { inner.withLock { $0.state } }

    /// How many rebuilds this instance switched to: what an observation compares, since a
    /// rebuilt state may hold other values at the same stream versions.
    package var generation: UInt64 { inner.withLock { $0.generation } }

    /// The version of the state's snapshot encoding (a rebuild may change it).
    public var schemaVersion: UInt16 { inner.withLock { $0.definition.schemaVersion } }

    public var nextPosition: LogPosition { inner.withLock { $0.nextPosition } }

    /// How many events were folded into this instance (snapshot restores excluded).
    public var eventsApplied: Int { inner.withLock { $0.eventsApplied } }

    /// The event the reducer could not fold, if any (then nothing after it was folded).
    public var failure: UndecodableEvent? { inner.withLock { $0.failure } }

    public func apply(_ envelopes: [EventEnvelope]) {
        apply(envelopes, prepared: nil)
    }

    /// Prepares a commit's events for a two-step fold, outside every lock: the definition's
    /// `prepareAll` on the whole batch at once (the per-event `prepare` of the public
    /// initialiser is wrapped into one), and nothing else.
    /// - Parameter envelopes: The commit's events, in log order.
    /// - Returns: Each event's prepared value or error, for ``apply(_:prepared:)``; `nil` for a
    ///   one-step reducer (which prepares nothing).
    public func prepare(_ envelopes: [EventEnvelope]) -> PreparedEvents? {
        let (prepareEvents, generation) = inner.withLock { ($0.definition.prepareEvents, $0.generation) }
        guard var prepared = prepareEvents?(envelopes) else { return nil }
        prepared.generation = generation
        return prepared
    }

    public func apply(_ envelopes: [EventEnvelope], prepared: PreparedEvents?) {
        var prepared = prepared
        if let given = prepared, given.first != envelopes.first?.position || given.count != envelopes.count {
            prepared = nil
        }
        var folded: [EventEnvelope]?
        while folded == nil {
            if prepared == nil {
                // Not prepared by the caller (a replay, or a projection registered between the
                // store's prepare and its commit): prepared here, still outside the state lock.
                prepared = prepare(envelopes)
            }
            folded = inner.withLock { inner -> [EventEnvelope]? in
                var folded: [EventEnvelope] = []
                guard inner.failure == nil else { return folded }
                let reduce = inner.definition.reduce
                if inner.definition.prepareEvents != nil, prepared?.generation != inner.generation {
                    // Prepared by the definition a rebuild replaced since: prepare again.
                    return nil
                }
                for (index, envelope) in envelopes.enumerated() where envelope.position >= inner.nextPosition {
                    do {
                        if let reduce {
                            try reduce(&inner.state, envelope)
                        } else if let prepared {
                            try prepared.fold(&inner.state, envelope, index)
                        }
                    } catch {
                        inner.failure = UndecodableEvent(projection: name, envelope: envelope, cause: error)
                        break
                    }
                    inner.nextPosition = envelope.position + 1
                    inner.eventsApplied += 1
                    folded.append(envelope)
                }
                return folded
            }
            if folded == nil { prepared = nil }
        }
        guard let folded, !folded.isEmpty else { return }
        // Outside the state lock: listeners read the state themselves.
        for listener in listeners.withLock({ Array($0.all.values) }) { listener(folded) }
    }

    public func snapshotState() throws -> ProjectionSnapshot {
        let (state, position, encode) = inner.withLock { ($0.state, $0.nextPosition, $0.definition.encodeState) }
        return ProjectionSnapshot(bytes: try encode(state), nextPosition: position)
    }

    public func restore(from snapshot: ProjectionSnapshot) throws {
        let state = try inner.withLock { $0.definition.decodeState }(snapshot.bytes)
        inner.withLock {
            $0.state = state
            $0.nextPosition = snapshot.nextPosition
        }
    }

    /// Takes over `rebuilt`'s state, definition and position in one step, then tells the
    /// listeners (with no events: everything may have changed). See
    /// ``RebuildableProjection/replaceState(with:)``; the stream-version role stays this
    /// instance's.
    public func replaceState(with rebuilt: ProjectedState<State>) {
        // Moved, not copied: were `rebuilt` to keep sharing the state's storage, the first
        // commit after the switch would copy the whole state under the commit lock.
        var taken = rebuilt.inner.withLock { inner in
            let taken = inner
            inner.state = inner.definition.initial
            return taken
        }
        inner.withLock { inner in
            let generation = inner.generation + 1
            swap(&inner, &taken)
            inner.generation = generation
        }
        for listener in listeners.withLock({ Array($0.all.values) }) { listener([]) }
    }

    /// Registers a listener called after each commit this projection folded, with its events,
    /// and with none after a rebuild replaced the whole state.
    /// It runs in the commit path, under the store's commit lock: only the kernel's own
    /// observation uses it (to poke a task that recomputes a query outside every lock).
    /// - Returns: A token for ``removeListener(_:)``.
    @discardableResult
    package func addListener(_ listener: @escaping @Sendable ([EventEnvelope]) -> Void) -> UInt64 {
        listeners.withLock { l in
            l.next += 1
            l.all[l.next] = listener
            return l.next
        }
    }

    /// Removes a listener.
    package func removeListener(_ token: UInt64) {
        _ = listeners.withLock { $0.all.removeValue(forKey: token) }
    }
}

extension ProjectedState where State: Codable {
    /// Creates a projection whose snapshots are the JSON encoding of `State`.
    /// - Parameters:
    ///   - name: Unique per store.
    ///   - schemaVersion: Bump when `State`'s coding changes.
    ///   - initial: The state before any event.
    ///   - reducer: Folds one event.
    public convenience init(name: String, schemaVersion: UInt16, initial: State, reducer: @escaping Reducer) {
        self.init(
            name: name, schemaVersion: schemaVersion, initial: initial,
            encode: { Array(try JSONEncoder.deterministic().encode($0)) },
            decode: { try JSONDecoder().decode(State.self, from: Data($0)) },
            reducer: reducer)
    }
}
