import Foundation
public import EventLog

/// A ``Projection`` over a value-type `State` and a reducer: the helper a domain uses.
///
/// Queries call ``read(_:)``; the store folds commits in. Both take one `Mutex`, held only for
/// the in-memory fold or the read itself: never across I/O, so many query tasks proceed while
/// the log writes and syncs. (A reader/writer lock would let readers overlap each other, but
/// in-memory queries are short and `Mutex` is the lock the standard library provides.)
///
/// Listeners registered with ``addListener(_:)`` are told, after each commit this projection
/// folded, which events it contained; observation recomputes a query there and yields only
/// when the result changed.
public final class ProjectedState<State: Sendable>: Projection {
    /// Folds one event into the state.
    public typealias Reducer = @Sendable (inout State, EventEnvelope) throws -> Void

    public let name: String
    public let schemaVersion: UInt16

    private struct Inner {
        var state: State
        var nextPosition: LogPosition = 0
        var eventsApplied = 0
        var lastError: String?
    }

    private let initial: State
    private let reducer: Reducer
    private let encodeState: @Sendable (State) throws -> [UInt8]
    private let decodeState: @Sendable ([UInt8]) throws -> State
    private let inner: Locked<Inner>
    private let listeners = Locked<(next: UInt64, all: [UInt64: @Sendable ([EventEnvelope]) -> Void])>((0, [:]))

    /// Creates a projection with explicit snapshot encoding.
    /// - Parameters:
    ///   - name: Unique per store.
    ///   - schemaVersion: The snapshot encoding's version.
    ///   - initial: The state before any event.
    ///   - encode: Encodes the state for a snapshot.
    ///   - decode: Decodes a snapshot's state.
    ///   - reducer: Folds one event. An error is recorded in ``lastError`` and the event skipped.
    public init(
        name: String, schemaVersion: UInt16, initial: State,
        encode: @escaping @Sendable (State) throws -> [UInt8],
        decode: @escaping @Sendable ([UInt8]) throws -> State,
        reducer: @escaping Reducer
    ) {
        self.name = name
        self.schemaVersion = schemaVersion
        self.initial = initial
        self.reducer = reducer
        self.encodeState = encode
        self.decodeState = decode
        self.inner = Locked(Inner(state: initial))
    }

    /// A fresh instance with the same configuration and the initial state (for time travel).
    public func makeFresh() -> ProjectedState<State> {
        ProjectedState(name: name, schemaVersion: schemaVersion, initial: initial,
                       encode: encodeState, decode: decodeState, reducer: reducer)
    }

    /// Runs `body` on the current state.
    /// - Complexity: O(1) plus `body`; holds the lock for `body` only, so keep it in-memory.
    public func read<R: Sendable, E: Error>(_ body: (State) throws(E) -> R) throws(E) -> R {
        try inner.withLock { (inner) throws(E) -> R in try body(inner.state) }
    }

    /// The current state (a copy-on-write value).
    public var state: State { inner.withLock { $0.state } }

    public var nextPosition: LogPosition { inner.withLock { $0.nextPosition } }

    /// How many events were folded into this instance (snapshot restores excluded).
    public var eventsApplied: Int { inner.withLock { $0.eventsApplied } }

    /// The last reducer error, if any, with the position it happened at.
    public var lastError: String? { inner.withLock { $0.lastError } }

    public func apply(_ envelopes: [EventEnvelope]) {
        let folded: [EventEnvelope] = inner.withLock { inner in
            var folded: [EventEnvelope] = []
            for envelope in envelopes where envelope.position >= inner.nextPosition {
                do { try reducer(&inner.state, envelope) } catch {
                    inner.lastError = "position \(envelope.position) (\(envelope.eventType)): \(error)"
                }
                inner.nextPosition = envelope.position + 1
                inner.eventsApplied += 1
                folded.append(envelope)
            }
            return folded
        }
        guard !folded.isEmpty else { return }
        // Outside the state lock: listeners read the state themselves.
        for listener in listeners.withLock({ Array($0.all.values) }) { listener(folded) }
    }

    public func snapshotState() throws -> ProjectionSnapshot {
        let (state, position) = inner.withLock { ($0.state, $0.nextPosition) }
        return ProjectionSnapshot(bytes: try encodeState(state), nextPosition: position)
    }

    public func restore(from snapshot: ProjectionSnapshot) throws {
        let state = try decodeState(snapshot.bytes)
        inner.withLock {
            $0.state = state
            $0.nextPosition = snapshot.nextPosition
        }
    }

    /// Registers a listener called after each commit this projection folded, with its events.
    /// It runs in the commit path: keep it short and never block.
    /// - Returns: A token for ``removeListener(_:)``.
    @discardableResult
    public func addListener(_ listener: @escaping @Sendable ([EventEnvelope]) -> Void) -> UInt64 {
        listeners.withLock { l in
            l.next += 1
            l.all[l.next] = listener
            return l.next
        }
    }

    /// Removes a listener.
    public func removeListener(_ token: UInt64) {
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
            encode: { Array(try JSONEncoder().encode($0)) },
            decode: { try JSONDecoder().decode(State.self, from: Data($0)) },
            reducer: reducer)
    }
}
