import Foundation
public import EventLog
import KernelPrimitives

/// A named, durable reader of a store's events: it delivers every event from its committed
/// position on, catching up from the log and then following new commits, and remembers how
/// far it got (``commit(through:)``, or after each handled batch in ``run(batchSize:handler:)``).
///
/// Delivery is at-least-once: the committed position is never ahead of what was handled, so a
/// consumer that crashes replays from its last commit and never skips; what it handled after
/// that commit it sees again. Events are read from the log in batches of at most
/// ``ConsumerOptions/readBatchSize``: a slow consumer holds one read's events, never slows appends and
/// never makes the store buffer for it. Handlers run on the caller's task, outside every lock.
///
/// Created by ``EventStore/consumer(named:startingAt:options:)``, which returns one instance
/// per name per store: every handle shares its committed position and parked list. A store
/// with a directory also holds the consumer's lock file (`consumers/<name>.lock`) until it
/// closes, so another process (a second application, `eventkernel tail --consumer`,
/// `consumers reset`) cannot use the same consumer meanwhile. A store over a log several
/// instances share (PostgreSQL) keeps the position and parked list in the shared database and
/// holds the consumer's lease instead: one instance at a time processes it, and another can
/// stand by for it (``EventStore/consumer(named:startingAt:options:waitingForLease:)``;
/// Docs/Consumers.md, "On PostgreSQL"). Within the process, iterate it
/// from one task at a time (one ``run(batchSize:handler:)`` or one ``events()`` loop): two
/// would each handle every event.
public final class Consumer: Sendable {
    /// The consumer's name: a file-name-safe token.
    public let name: String
    /// How it reads, retries and commits.
    public let options: ConsumerOptions
    /// The store it reads.
    public let store: EventStore
    /// Held while the store has the consumer open (`nil` for an in-memory store).
    let lock: ConsumerLock?

    struct State {
        var committed: LogPosition
        /// Bumped by ``reset(to:)``: a running ``run(batchSize:handler:)`` starts reading again
        /// from the new position rather than commit over it.
        var generation: UInt64 = 0
        /// Why the stored checkpoint does not fit the log (past its end, or of another history):
        /// reading and committing throw it until ``reset(to:)``.
        var problem: ConsumerError?
        /// The store closed and gave up the consumer's lock: a commit still on its way writes
        /// nothing (another process may hold the consumer now; what was handled is handled again).
        var closed = false
        /// A retry of parked events was asked for in this process since the running
        /// ``run(batchSize:handler:)`` last looked (it looks before each batch, and when nudged).
        var retryRequested = false
    }
    let state: Locked<State>

    /// The key this consumer's ``run(batchSize:handler:)`` calls wait under, which a reset, a
    /// retry request and closing nudge (``CommitSignal/nudge(_:)``): a run caught up with the
    /// log would otherwise see them only at the next commit. One for the consumer's life, made
    /// when it opens and forgotten when it goes: a nudge sent while no run waits is kept for the
    /// next wait under it, which then looks once more and finds nothing new.
    let nudgeKey: UInt64

    /// Wakes the running ``run(batchSize:handler:)`` calls, if they wait, to look at the
    /// consumer again. Called after the change they are to see is made, outside the lock.
    func nudgeRuns() {
        store.commitSignal.nudge(nudgeKey)
    }
    /// Serializes changes to the parked list (read, change, write back).
    let parkedChanges = Locked(())

    init(store: EventStore, name: String, start: ConsumerStart, options: ConsumerOptions) throws {
        if let problem = ConsumerFiles.problem(withName: name) { throw ConsumerError.invalidName(name, reason: problem) }
        self.store = store
        self.name = name
        self.options = options
        // Locked before the checkpoint is read: nobody else writes it while this one is open.
        lock = try store.consumerStorage.lock(consumer: name)
        switch options.checkpoint {
        case .handler:
            if case .checkpoint(let position) = start {
                try Self.catchUp(store, toHold: position.next)
                // As a stored checkpoint that does not fit: reading and committing throw its problem until a reset.
                let problem = try position.checkpoint(consumer: name).bindingProblem(in: store.log, end: store.nextPosition)
                state = Locked(State(committed: position.next, problem: problem))
            } else {
                state = Locked(State(committed: try Self.resolve(start, in: store, consumer: name)))
            }
        case .store:
            if let checkpoint = try store.consumerStorage.checkpoint(named: name) {
                try Self.catchUp(store, toHold: checkpoint.committed)
                let problem = try checkpoint.bindingProblem(in: store.log, end: store.nextPosition)
                state = Locked(State(committed: checkpoint.committed, problem: problem))
            } else {
                if let files = store.consumerFilesBeside, try files.checkpoint(named: name) != nil || !files.parked(named: name).isEmpty {
                    throw ConsumerError.checkpointElsewhere(consumer: name, path: files.url.path, location: store.consumerStorage.location)
                }
                // Written now: a consumer created at `.end` and killed before its first commit
                // must resume where it was created, not at a later end.
                let committed = try Self.resolve(start, in: store, consumer: name)
                try store.consumerStorage.write(try ConsumerCheckpoint.bound(name: name, committed: committed, in: store.log), under: lock)
                state = Locked(State(committed: committed))
            }
        }
        // Last: an init that throws leaves no key behind.
        nudgeKey = store.commitSignal.makeKey()
    }

    deinit {
        store.commitSignal.forget(nudgeKey)
    }

    /// The next position to handle: every event below it is handled and committed.
    public var committed: LogPosition { state.withLock { $0.committed } }

    /// Events committed to the store that this consumer has not committed yet (0 when its
    /// checkpoint is past the log's end: see ``ConsumerError/checkpointAheadOfLog(consumer:committed:logEnd:)``).
    public var lag: UInt64 {
        let end = store.nextPosition
        let committed = self.committed
        return end > committed ? end - committed : 0
    }

    /// The events from the committed position on: those in the log, then each new commit as it
    /// happens, in position order; it ends when the store closes or the task is cancelled.
    /// Commit what was handled with ``commit(through:)``.
    ///
    /// Iterating throws ``ConsumerError/checkpointAheadOfLog(consumer:committed:logEnd:)`` or
    /// ``ConsumerError/checkpointOffHistory(consumer:committed:reason:)`` when the stored
    /// checkpoint does not fit the log (until ``reset(to:)``), ``RepositoryError/storage(_:)``
    /// when the log cannot be read, and, on a log several instances share,
    /// ``ConsumerError/leaseLost(consumer:reason:)`` when this store no longer holds the
    /// consumer's lease (confirmed with the database before each batch is read, at most about
    /// once a second), or ``ConsumerError/databaseFailed(location:cause:)`` when that check fails.
    /// A ``reset(to:)`` made while the sequence is iterated does not move it: a new sequence (or
    /// a ``run(batchSize:handler:)``) starts from the new position.
    public func events() -> ConsumerEvents { ConsumerEvents(reader: ConsumerReader(consumer: self, from: committed)) }

    /// Marks every event through `position` as handled, durably before it returns: under
    /// buffered durability the log is synced first, so the checkpoint never covers an event a
    /// crash could still take away; then the store's file is replaced and fsynced. A position
    /// below the committed one changes nothing: a commit never goes backwards (``reset(to:)`` does).
    /// - Parameter position: The last handled event's position.
    /// - Throws: ``ConsumerError/positionOutOfRange(consumer:position:logEnd:)`` for a position
    ///   the store has not committed; ``ConsumerError/fileFailed(path:reason:)`` when the write
    ///   fails; ``ConsumerError/leaseLost(consumer:reason:)`` when this store no longer holds
    ///   the consumer (a log several instances share); the checkpoint's problem (``ConsumerError/checkpointOffHistory(consumer:committed:reason:)``)
    ///   until a reset; ``RepositoryError/storage(_:)`` when the log's sync or read fails.
    public func commit(through position: LogPosition) async throws {
        try await commit(through: position, ifGeneration: nil)
    }

    /// Commits through `position` if no reset happened since `generation` was read (checked
    /// under the same lock as the write, so a reset is never committed over).
    /// - Returns: Whether it committed (or had nothing to commit) in that generation; `false`
    ///   after a reset, or once the store closed (nothing is written then).
    @discardableResult
    func commit(through position: LogPosition, ifGeneration generation: UInt64?) async throws -> Bool {
        try Self.catchUp(store, toHold: position + 1)
        let end = store.nextPosition
        guard position < end else { throw ConsumerError.positionOutOfRange(consumer: name, position: position, logEnd: end) }
        if options.checkpoint == .store { try await store.log.synchronize() }
        let checkpoint = options.checkpoint == .store ? try ConsumerCheckpoint.bound(name: name, committed: position + 1, in: store.log) : nil
        let done = try state.withLock { (state) throws -> Bool in
            if state.closed { return false }
            if let lost = leaseLost(closed: state.closed) { throw lost }
            if let generation, generation != state.generation { return false }
            if let problem = state.problem { throw problem }
            guard position + 1 > state.committed else { return true }
            if let checkpoint { try store.consumerStorage.write(checkpoint, under: lock) }
            state.committed = position + 1
            return true
        }
        store.instrumentation?.consumerLag(consumer: name, lag: lag)
        return done
    }

    /// Whether events may still be handed to a handler: `false` once the consumer or its store
    /// closed; the checkpoint's problem (ahead of the log, off its history) is thrown until a
    /// reset. The one rule ``ConsumerReader`` and a run's retries follow before handing out
    /// anything (each confirms the lease, ``confirmLease()``, just before it does).
    /// - Throws: The checkpoint's problem.
    func mayHandOut() throws(ConsumerError) -> Bool {
        if let problem = state.withLock({ $0.problem }) { throw problem }
        return !(store.commit.withLock { $0.closed } || state.withLock { $0.closed })
    }

    /// The fencing token of this store's lease on the consumer (a log several instances share):
    /// each instance that takes the lease gets a greater one than every holder before it.
    /// With ``CheckpointOwner/handler``, store it with the position in the target's own
    /// transaction and make that transaction compare and set it (`... WHERE stored_epoch <= $epoch`):
    /// a write from an instance that lost the lease, still running before it learns so, is
    /// then refused by the target. `nil` when the store needs no lease (a directory or memory).
    public var leaseEpoch: Int64? { lock?.lease?.epoch }

    /// Confirms with the database that this store still holds the consumer's lease (rate-limited:
    /// ``ConsumerLease/confirm()``); nothing to confirm once the store closed the consumer.
    /// - Throws: ``ConsumerError/leaseLost(consumer:reason:)``, ``ConsumerError/databaseFailed(location:cause:)``.
    func confirmLease() throws {
        guard let lock, !state.withLock({ $0.closed }) else { return }
        do {
            try lock.confirm()
        } catch {
            // Released by a close meanwhile: the reader ends at its next look.
            if state.withLock({ $0.closed }) { return }
            throw error
        }
    }

    /// Gives the consumer up without closing the store: its lease (or lock file) is released,
    /// so another instance standing by takes it, and the store forgets it (a later
    /// ``EventStore/consumer(named:startingAt:options:)`` opens it anew). A run on it ends at
    /// its next batch, or at once if it waits for new events; an ``events()`` loop ends at its
    /// next batch; a commit still on its way writes nothing. Closing twice does nothing.
    public func close() {
        store.openConsumers.withLock { open in
            if open[name] === self { open[name] = nil }
        }
        state.withLock { $0.closed = true }
        lock?.release()
        nudgeRuns()
    }

    /// ``ConsumerError/leaseLost(consumer:reason:)`` when the store is open but no longer
    /// holds the consumer's lock (a lease whose database session ended), else `nil`.
    /// - Parameter closed: Whether the consumer is closed, read by the caller under its lock.
    func leaseLost(closed: Bool) -> ConsumerError? {
        guard let lock, !lock.isHeld, !closed else { return nil }
        return .leaseLost(consumer: name, reason: "its session with the database that holds the lease ended")
    }

    /// Moves the committed position to `start`, backwards or forwards: the next events
    /// delivered are from there (a running ``run(batchSize:handler:)`` reads again from there
    /// after its current batch, and does not commit that batch; one waiting for new events is
    /// woken and reads from there at once). It clears a checkpoint's
    /// problem (``ConsumerError/checkpointOffHistory(consumer:committed:reason:)``).
    /// - Parameter start: The new position (``ConsumerStart/end``: skip everything committed so far).
    /// - Throws: ``ConsumerError/positionOutOfRange(consumer:position:logEnd:)``,
    ///   ``ConsumerError/fileFailed(path:reason:)``, ``RepositoryError/storage(_:)``,
    ///   ``ConsumerError/leaseLost(consumer:reason:)`` when this store no longer holds the
    ///   consumer's lease (a log several instances share); for a
    ///   ``ConsumerStart/checkpoint(_:)`` that does not fit the log,
    ///   ``ConsumerError/checkpointOffHistory(consumer:committed:reason:)`` or
    ///   ``ConsumerError/checkpointAheadOfLog(consumer:committed:logEnd:)``.
    public func reset(to start: ConsumerStart) throws {
        // With a handler-owned checkpoint nothing is written here: asked, so an instance that
        // lost the lease does not move a consumer another holds.
        try confirmLease()
        let position = try Self.resolve(start, in: store, consumer: name)
        let checkpoint = options.checkpoint == .store ? try ConsumerCheckpoint.bound(name: name, committed: position, in: store.log) : nil
        try state.withLock { (state) throws in
            if let checkpoint { try store.consumerStorage.write(checkpoint, under: lock) }
            state.committed = position
            state.generation += 1
            state.problem = nil
        }
        nudgeRuns()
    }

    /// The position a start names in `store`'s log.
    static func resolve(_ start: ConsumerStart, in store: EventStore, consumer: String) throws -> LogPosition {
        switch start {
        case .position(let position): try catchUp(store, toHold: position)
        case .checkpoint(let position): try catchUp(store, toHold: position.next)
        case .beginning, .end, .recordedAt: break
        }
        return try resolve(start, in: store.log, end: store.nextPosition, consumer: consumer)
    }

    /// Folds what others appended when `position` lies past what `store` has folded and others
    /// append to its log (a log several instances share): a position committed by another
    /// instance may be ahead of this one's view, which is no sign of a cut log, and must not
    /// be judged against a stale end (``ConsumerError/checkpointAheadOfLog(consumer:committed:logEnd:)``).
    static func catchUp(_ store: EventStore, toHold position: LogPosition) throws {
        guard position > store.nextPosition, store.log.access.othersMayAppend else { return }
        try store.refresh()
    }

    /// The position a start names in a log whose next position is `end`: the one rule for the
    /// store's consumers and for `eventkernel consumers reset` and `tail --consumer`.
    /// - Parameters:
    ///   - start: The starting point.
    ///   - log: The log (read for ``ConsumerStart/recordedAt(_:)``).
    ///   - end: The log's next position (the store's, as far as it has folded).
    ///   - consumer: The consumer's name, for errors.
    /// - Throws: ``ConsumerError/positionOutOfRange(consumer:position:logEnd:)``, ``RepositoryError/storage(_:)``,
    ///   ``RepositoryError/invalidQuery(_:)`` for a date a log timestamp cannot hold;
    ///   ``ConsumerError/checkpointOffHistory(consumer:committed:reason:)`` or
    ///   ``ConsumerError/checkpointAheadOfLog(consumer:committed:logEnd:)`` for a
    ///   ``ConsumerStart/checkpoint(_:)`` that does not fit the log.
    package static func resolve(_ start: ConsumerStart, in log: any RecordLog, end: LogPosition, consumer: String) throws -> LogPosition {
        switch start {
        case .beginning: return min(log.bounds.firstPosition, end)
        case .end: return end
        case .position(let position):
            guard position <= end else { throw ConsumerError.positionOutOfRange(consumer: consumer, position: position, logEnd: end) }
            return position
        case .checkpoint(let position):
            if let problem = try position.checkpoint(consumer: consumer).bindingProblem(in: log, end: end) { throw problem }
            return position.next
        case .recordedAt(let date):
            let limit: LogTimestamp
            do { limit = try LogTimestamp(date) } catch { throw RepositoryError.invalidQuery("\(error)") }
            var found = end
            guard end > 0 else { return end }
            try EventStore.readingRecords {
                try log.forEachRecord(from: 0, through: end - 1) { view in
                    guard view.timestamp >= limit else { return true }
                    found = view.position
                    return false
                }
            }
            return found
        }
    }
}
