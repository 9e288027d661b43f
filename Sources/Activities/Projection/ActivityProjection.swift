public import EventKernel
package import Foundation
public import EventLog
public import KernelPrimitives

/// The read model of the Activities domain: folds ``ActivityEvent``s into an ``ActivityIndex``.
///
/// Queries take a shared lock, so any number run at once; applying a commit takes the exclusive
/// lock only for the in-memory fold. The store applies commits after they are durable, so a
/// query never sees an event a crash could still take away.
///
/// Snapshots hold the serialized index (``ActivityIndex/serialize(into:)``), so startup from a
/// snapshot bulk-loads the index instead of re-inserting every activity.
public final class ActivityProjection: Projection, RebuildableProjection, StreamVersionSource {
    /// A change to one activity, as observers are told of it.
    public struct Change: Sendable {
        /// The activity before the event (nil for an add).
        public var old: ActivityModel?
        /// The activity after the event (nil for a delete).
        public var new: ActivityModel?
    }

    /// An event that decoded but could not be folded (an add of an id that exists, written by a
    /// buggy or foreign writer): recorded, never silently skipped. `eventkernel verify` reports
    /// these. An event that does not *decode* is worse, and fails the projection (``failure``).
    public struct IntegrityIssue: Hashable, Sendable, CustomStringConvertible {
        /// The event's position.
        public var position: LogPosition
        /// What was wrong.
        public var message: String
        public var description: String { "position \(position): \(message)" }
    }

    @usableFromInline
    struct State: Sendable {
        @usableFromInline var index = ActivityIndex()
        var nextPosition: LogPosition = 0
        var issues: [IntegrityIssue] = []
        var failure: UndecodableEvent?
        /// The type names the fold decoded last (see `StringInterner`).
        var strings = StringInterner()
        init() {}
    }

    /// `"activities"`.
    public let name = "activities"
    /// Bumped whenever the snapshot layout or the fold changes; older snapshots are ignored.
    /// 2: the index keeps each activity's stream version (snapshot format 2).
    public let schemaVersion: UInt16 = 2

    @usableFromInline let state = ReadWriteLock(State())
    private let observers = Locked<(next: UInt64, callbacks: [UInt64: @Sendable ([Change]) -> Void])>((0, [:]))
    private let codec = ActivityEventCodec()

    /// Creates an empty projection.
    public init() {}

    public var nextPosition: LogPosition { state.withReadLock { $0.nextPosition } }

    /// Runs `body` on the current index under the shared lock.
    /// - Complexity: O(1) plus `body`; never waits on I/O.
    @inlinable
    public func read<R>(_ body: (borrowing ActivityIndex) throws -> R) rethrows -> R {
        try withState { try body($0.index) }
    }

    @usableFromInline
    func withState<R>(_ body: (borrowing State) throws -> R) rethrows -> R {
        try state.withReadLock { try body($0) }
    }

    /// Activity streams' versions are kept in the index's rows (and a deleted activity's beside
    /// them): the store reads them here instead of keeping them a second time.
    package var versionedEntityType: String? { ActivityEventCodec.entityType }

    package func committedVersion(of stream: StreamID) -> UInt64 {
        guard case .uuid(let id) = stream.entityID else { return 0 }
        return state.withReadLock { $0.index.version(of: id) }
    }

    package func containsEntity(of stream: StreamID) -> Bool? {
        guard case .uuid(let id) = stream.entityID else { return false }
        return state.withReadLock { $0.index[id: id] != nil }
    }

    package func forgetVersions(of streams: [StreamID]) {
        state.withWriteLock { state in
            for stream in streams { if case .uuid(let id) = stream.entityID { state.index.forgetDeletedVersion(of: id) } }
        }
    }

    /// The activity with `id` and its stream's committed version, read at once (a command's
    /// read: see ``EventSourcedActivityRepository``).
    package func activityAndVersion(id: UUID) -> (ActivityModel?, UInt64) {
        state.withReadLock { $0.index.modelAndVersion(id: id) }
    }

    /// Events that could not be folded, in position order.
    public var integrityIssues: [IntegrityIssue] { state.withReadLock { $0.issues } }

    /// The activity event this build could not decode (an unknown event type or schema
    /// version): nothing after it is folded, and the store does not open.
    public var failure: UndecodableEvent? { state.withReadLock { $0.failure } }

    public func apply(_ envelopes: [EventEnvelope]) {
        apply(envelopes, prepared: nil)
    }

    /// The events of one commit (or replay chunk), decoded outside the projection's lock: a
    /// decoded activity event, `nil` for another domain's event, or the decoding error.
    public struct PreparedEvents: Sendable {
        fileprivate var first: LogPosition?
        fileprivate var events: [Result<ActivityEvent, any Error>?]
    }

    /// Decodes the activity events of `envelopes` (the part of folding that needs no state), so
    /// that the store runs it before taking its commit lock and a replay on its reading thread.
    public func prepare(_ envelopes: [EventEnvelope]) -> PreparedEvents? {
        var strings = StringInterner()
        return PreparedEvents(first: envelopes.first?.position, events: envelopes.map { envelope in
            guard ActivityEventCodec.isActivityEvent(envelope) else { return nil }
            return Result { try codec.decode(envelope, strings: &strings) }
        })
    }

    public func apply(_ envelopes: [EventEnvelope], prepared: PreparedEvents?) {
        let observing = observers.withLock { !$0.callbacks.isEmpty }
        let prepared = prepared.flatMap { $0.first == envelopes.first?.position && $0.events.count == envelopes.count ? $0 : nil }
        var changes: [Change] = []
        state.withWriteLock { state in
            guard state.failure == nil else { return }
            for (index, envelope) in envelopes.enumerated() where envelope.position >= state.nextPosition {
                guard ActivityEventCodec.isActivityEvent(envelope) else {
                    state.nextPosition = envelope.position + 1
                    continue
                }
                // The id table is the fold's one random memory access: fetch a later event's
                // bucket now, so that its cache miss overlaps this event's work.
                if index + Self.prefetchDistance < envelopes.count, case .uuid(let ahead) = envelopes[index + Self.prefetchDistance].entityID {
                    state.index.prefetch(id: ahead)
                }
                let event: ActivityEvent
                do {
                    if let decoded = prepared?.events[index] {
                        event = try decoded.get()
                    } else {
                        event = try codec.decode(envelope, strings: &state.strings)
                    }
                } catch {
                    state.failure = UndecodableEvent(projection: name, envelope: envelope, cause: error)
                    return
                }
                state.nextPosition = envelope.position + 1
                do {
                    let change = try Self.fold(event, version: envelope.entityVersion, into: &state.index)
                    if observing { changes.append(change) }
                } catch {
                    state.issues.append(IntegrityIssue(position: envelope.position, message: "\(error)"))
                    // Committed all the same: the stream is at this version.
                    state.index.recordVersion(envelope.entityVersion, of: event.activityID)
                }
            }
        }
        guard !changes.isEmpty else { return }
        let callbacks = observers.withLock { Array($0.callbacks.values) }
        for callback in callbacks { callback(changes) }
    }

    /// How many events ahead the fold prefetches the id table.
    private static let prefetchDistance = 8

    /// Applies one event to an index: the single definition of the domain's semantics, used
    /// for the live state, snapshots and time travel alike.
    /// - Parameter version: The event's stream version, which the index records.
    static func fold(_ event: ActivityEvent, version: UInt64, into index: inout ActivityIndex) throws -> Change {
        switch event {
        case .added(let model):
            try index.insert(model, version: version)
            return Change(old: nil, new: model)
        case .updated(let model):
            let old = index[id: model.id]
            try index.update(model, version: version)
            return Change(old: old, new: model)
        case .ended(let id, let date):
            let old = index[id: id]
            try index.end(id: id, at: date, version: version)
            return Change(old: old, new: index[id: id])
        case .deleted(let id):
            return Change(old: index.remove(id: id, version: version), new: nil)
        }
    }

    public func snapshotState() throws -> ProjectionSnapshot {
        state.withReadLock { state in
            var bytes: [UInt8] = []
            state.index.serialize(into: &bytes)
            return ProjectionSnapshot(bytes: bytes, nextPosition: state.nextPosition)
        }
    }

    public func restore(from snapshot: ProjectionSnapshot) throws {
        let index = try ActivityIndex(deserializing: snapshot.bytes)
        state.withWriteLock { state in
            state.index = index
            state.nextPosition = snapshot.nextPosition
        }
    }

    /// Takes over `rebuilt`'s index, position and integrity issues in one step, then tells the
    /// observers (with no changes: everything may have changed). See
    /// `RebuildableProjection.replaceState(with:)` and ``EventSourcedActivityRepository/rebuild(progress:)``.
    public func replaceState(with rebuilt: ActivityProjection) {
        // Moved, not copied: were `rebuilt` to keep sharing the index's storage, the first
        // commit after the switch would copy the whole index under the commit lock.
        var taken = State()
        rebuilt.state.withWriteLock { swap(&$0, &taken) }
        state.withWriteLock { swap(&$0, &taken) }
        let callbacks = observers.withLock { Array($0.callbacks.values) }
        for callback in callbacks { callback([]) }
    }

    /// Calls `callback` after each commit that changed activities, with the changes, on the
    /// committing thread under the store's commit lock: only the kernel's observation uses it
    /// (public observation is ``EventSourcedActivityRepository/observe(query:)``).
    /// - Returns: A token for ``removeListener(_:)``.
    package func addListener(_ callback: @escaping @Sendable ([Change]) -> Void) -> UInt64 {
        observers.withLock { observers in
            let token = observers.next
            observers.next += 1
            observers.callbacks[token] = callback
            return token
        }
    }

    /// Stops calling an observer.
    package func removeListener(_ token: UInt64) {
        _ = observers.withLock { $0.callbacks.removeValue(forKey: token) }
    }
}
