import EventLog

extension Consumer {
    /// Handles every event from the committed position on, one batch at a time, committing
    /// what it handled every ``ConsumerOptions/commitInterval`` (and when caught up and idle
    /// that long, and when it ends): the catch-up, then each new commit, until the store closes
    /// or the task is cancelled (then it returns).
    ///
    /// A batch the handler throws on is retried with ``ConsumerOptions/retry``'s backoff; if it
    /// still fails, its events are handled one at a time (each with its own attempts), so that
    /// only the events the handler keeps failing on are set aside: parked (``parked()``) and
    /// passed, or, with ``FailurePolicy/stop``, the run stops there. Events of a failed batch
    /// before the failing one may be handled twice: delivery is at-least-once.
    ///
    /// Parked events a retry was requested for (``requestRetry(ofParkedAt:)``, `eventkernel
    /// consumers parked NAME --retry`) are handed to the handler again, one at a time, when the
    /// run starts and, for requests made in this process while it runs, before its next batch
    /// is handled, or at once when it waits for new events. A ``reset(to:)`` while it waits
    /// makes it read from the new position at once, as one between batches does.
    ///
    /// The handler runs in the caller's isolation (the method is `nonisolated(nonsending)`), so
    /// it may use the caller's non-`Sendable` state.
    ///
    /// - Parameters:
    ///   - batchSize: The most events per handler call (default, and at most,
    ///     ``ConsumerOptions/readBatchSize``: the most a consumer holds).
    ///   - handler: Handles a batch (1 to `batchSize` events, in position order); it returns once
    ///     their effects are done. It runs on this task, outside every lock of the store.
    /// - Throws: ``ConsumerError/handlerFailed(consumer:position:attempts:errorType:error:)`` (stop
    ///   on failure), ``ConsumerError/checkpointAheadOfLog(consumer:committed:logEnd:)``,
    ///   ``ConsumerError/checkpointOffHistory(consumer:committed:reason:)`` (until a reset),
    ///   ``ConsumerError/fileFailed(path:reason:)`` (a commit or park could not be written),
    ///   ``ConsumerError/damagedFile(path:reason:)`` (the parked list, read when the run starts
    ///   and when a retry was requested, does not decode),
    ///   ``ConsumerError/leaseLost(consumer:reason:)`` (a store over a shared log no longer
    ///   holds the consumer: confirmed with the database before each batch, at most about once a
    ///   second, and by each commit),
    ///   ``RepositoryError/storage(_:)`` (the log cannot be read), `CancellationError` when the
    ///   task is cancelled while retrying.
    nonisolated(nonsending) public func run(batchSize: Int? = nil, handler: (_ events: [EventEnvelope]) async throws -> Void) async throws {
        let limit = min(max(1, batchSize ?? options.readBatchSize), options.readBatchSize)
        let interval = options.commitInterval
        // The generation the run reads in (a reset bumps it), its reader, the last handled
        // position not committed yet, and when the run last committed.
        var generation: UInt64 = 0
        // The consumer's key, which a reset, a retry request and closing nudge (`nudgeRuns`).
        let key = nudgeKey
        var reader = ConsumerReader(consumer: self, from: 0, nudgedAs: key)
        var pending: LogPosition?
        var lastCommit = ContinuousClock.now
        // At the start and after a reset: read from the committed position; what was handled
        // since the reset's generation began is never committed over it.
        func readFromCommitted() {
            let start: LogPosition
            (generation, start) = state.withLock { ($0.generation, $0.committed) }
            reader = ConsumerReader(consumer: self, from: start, nudgedAs: key)
            pending = nil
        }
        // Commits what was handled, checked in the commit's own lock against a reset since.
        // - Returns: `false` when the run ends (the store closed or the task was cancelled).
        func commitPending() async throws -> Bool {
            guard let position = pending else { return true }
            guard let committed = try await commitHandled(through: position, generation: generation) else { return false }
            if committed {
                pending = nil
                lastCommit = ContinuousClock.now
            } else {
                readFromCommitted()
            }
            return true
        }
        // Ending (cancelled, or the store closed): what was handled is committed if it still
        // can be; if not, it is handled again next time (at-least-once).
        func commitEnding() async {
            if let position = pending { _ = try? await commit(through: position, ifGeneration: generation) }
        }
        readFromCommitted()
        // Requests kept with the parked list (made by the CLI, or before this run) are served first.
        try await retryRequested(handler)
        while true {
            // What to handle next; none when the run was nudged (a reset, a retry request) and
            // only looks at the consumer again.
            var batch: [EventEnvelope] = []
            var nudged = false
            // Caught up with handled events not committed: commit them unless new events come
            // within what is left of the interval (they are then committed with their batch).
            if pending != nil, reader.isCaughtUp {
                // The lag counts from the committed position: what a crash would hand again.
                store.instrumentation?.consumerLag(consumer: name, lag: lag)
                let left = interval - (ContinuousClock.now - lastCommit)
                switch left > .zero ? await store.commitSignal.wait(forCommitOf: reader.next, timeout: left, nudgedAs: key) : .ended {
                case .committed: break
                // Not on to the reader's wait, which has no timeout: what is pending would then
                // wait for the next commit instead of the interval.
                case .nudged: nudged = true
                case .ended: if !(try await commitPending()) { return }
                }
            }
            if !nudged {
                guard let fetched = try await reader.fetch(limit: limit) else {
                    await commitEnding()
                    return
                }
                batch = fetched
            }
            guard state.withLock({ $0.generation }) == generation else {
                readFromCommitted()
                continue
            }
            // Asked for in this process since the run last looked: served before this batch.
            if state.withLock({ $0.retryRequested }) {
                do {
                    try await retryRequested(handler)
                } catch let error as CancellationError {
                    await commitEnding()
                    throw error
                }
            }
            if batch.isEmpty { continue }
            do {
                try await handle(batch, handler, generation: generation)
            } catch let error as CancellationError {
                // Cancelled while retrying this batch: the batches before it were handled.
                await commitEnding()
                throw error
            }
            pending = batch[batch.count - 1].position
            if ContinuousClock.now - lastCommit < interval {
                store.instrumentation?.consumerLag(consumer: name, lag: lag)
                continue
            }
            guard try await commitPending() else { return }
        }
    }

    /// Commits what a run handled, or says the run is ending (`nil`): the store closed or the
    /// task was cancelled, so a commit that fails is no error (what was handled is handled
    /// again next time); a run returns then, as it does when its reader ends.
    private func commitHandled(through position: LogPosition, generation: UInt64) async throws -> Bool? {
        do {
            return try await commit(through: position, ifGeneration: generation)
        } catch {
            if Task.isCancelled || store.commit.withLock({ $0.closed }) { return nil }
            throw error
        }
    }

    nonisolated(nonsending) private func handle(_ batch: [EventEnvelope], _ handler: ([EventEnvelope]) async throws -> Void,
                                                generation: UInt64) async throws {
        guard let failure = try await attempt(batch, handler) else {
            store.instrumentation?.consumerHandled(consumer: name, events: batch.count)
            return
        }
        var parking: [ParkedEvent] = []
        if batch.count == 1 {
            if let parked = try await failed(batch[0], failure, generation: generation) { parking.append(parked) }
        } else {
            for event in batch {
                if let failure = try await attempt([event], handler) {
                    if let parked = try await failed(event, failure, generation: generation) { parking.append(parked) }
                } else {
                    store.instrumentation?.consumerHandled(consumer: name, events: 1)
                }
            }
        }
        // One write of the parked list per batch, before the batch is committed.
        guard !parking.isEmpty else { return }
        try park(parking)
        for _ in parking { store.instrumentation?.consumerParked(consumer: name) }
    }

    /// Runs the handler up to the retry policy's attempts, waiting between them.
    /// - Returns: `nil` when an attempt succeeded, else the last error and the attempts made.
    /// - Throws: `CancellationError` when the task is cancelled (nothing is parked then).
    nonisolated(nonsending) func attempt(_ batch: [EventEnvelope], _ handler: ([EventEnvelope]) async throws -> Void) async throws -> (error: any Error, attempts: Int)? {
        let retry = options.retry
        var last: any Error = CancellationError()
        for attempt in 1...retry.maxAttempts {
            do {
                try await handler(batch)
                return nil
            } catch {
                try Task.checkCancellation()
                last = error
                if attempt < retry.maxAttempts { try await Task.sleep(for: retry.delay(after: attempt)) }
            }
        }
        return (last, retry.maxAttempts)
    }

    /// The handler gave up on `event`: the entry to park, or (``FailurePolicy/stop``) stop with
    /// everything before it committed. A reset since `generation` wins: the stop commits nothing over it.
    private func failed(_ event: EventEnvelope, _ failure: (error: any Error, attempts: Int), generation: UInt64) async throws -> ParkedEvent? {
        let errorType = String(reflecting: type(of: failure.error))
        switch options.onFailure {
        case .park:
            return ParkedEvent(position: event.position, stream: event.stream.description, eventType: event.eventType,
                               errorType: errorType, error: String(describing: failure.error),
                               attempts: failure.attempts, parkedAt: .now())
        case .stop:
            if event.position > 0 { try await commit(through: event.position - 1, ifGeneration: generation) }
            throw ConsumerError.handlerFailed(consumer: name, position: event.position, attempts: failure.attempts,
                                              errorType: errorType, error: String(describing: failure.error))
        }
    }
}
