public import EventLog

extension Consumer {
    /// The events this consumer parked, in position order.
    /// - Throws: ``ConsumerError/damagedFile(path:reason:)``, ``ConsumerError/fileFailed(path:reason:)``.
    public func parked() throws -> [ParkedEvent] {
        try store.consumerStorage.parked(named: name)
    }

    /// Runs `handler` once on each parked event (read again from the log): an event it handles
    /// leaves the parked list; one it fails on stays, with its attempt count, error and time
    /// updated (and its retry request, if any, cleared). The list is written back after each event.
    ///
    /// This retries now, with a handler of the caller's choosing; ``requestRetry(ofParkedAt:)``
    /// instead leaves the retry to the consumer's next ``run(batchSize:handler:)``.
    /// - Parameter handler: Handles one event, as the consumer's handler does.
    /// - Returns: The events still parked.
    /// - Throws: ``ConsumerError/fileFailed(path:reason:)``, ``ConsumerError/damagedFile(path:reason:)``,
    ///   ``RepositoryError/storage(_:)``; `CancellationError` when the task is cancelled.
    @discardableResult
    nonisolated(nonsending) public func retryParked(_ handler: (_ event: EventEnvelope) async throws -> Void) async throws -> [ParkedEvent] {
        for entry in try parked() {
            try Task.checkCancellation()
            guard let event = try event(parkedAs: entry) else { continue }
            do {
                try await handler(event)
                try handledParked(at: entry.position)
            } catch {
                try Task.checkCancellation()
                try failedParked(at: entry.position, error: error, attempts: 1)
            }
        }
        return try parked()
    }

    /// Asks the consumer's next ``run(batchSize:handler:)`` to hand the parked event at
    /// `position` to its handler again (KurrentDB's "replay parked"): a run looks for requests
    /// when it starts and, for requests made in this process while it runs, before each batch
    /// it handles. A retry the handler takes leaves the parked list; one it fails on (after the
    /// consumer's ``ConsumerOptions/retry`` attempts) stays parked with its attempts, error and
    /// time updated and its request cleared, and the run goes on, whatever its
    /// ``ConsumerOptions/onFailure``. The request is kept durably with the list, so a request
    /// made by `eventkernel consumers parked NAME --retry` while no application held the
    /// consumer is served by the application's next run.
    ///
    /// Retried events come after the events the consumer handled since they were parked: a
    /// handler must not assume position order across a retry. Requests coalesce: one made for
    /// an event while a retry of it is under way is served by that retry. A run of this
    /// consumer in this process serves a request at once if it waits for new events, else
    /// before its next batch; a run in another process (the request made by the CLI) serves it
    /// when it starts.
    /// - Parameter position: The parked event's position.
    /// - Throws: ``ConsumerError/notParked(consumer:position:)`` when none has that position;
    ///   ``ConsumerError/fileFailed(path:reason:)``, ``ConsumerError/damagedFile(path:reason:)``.
    public func requestRetry(ofParkedAt position: LogPosition) throws {
        try changeParked { (list) throws(ConsumerError) in try list.requestRetry(at: position, consumer: name) }
        state.withLock { $0.retryRequested = true }
        nudgeRuns()
    }

    /// Asks the consumer's next run to retry every parked event, as ``requestRetry(ofParkedAt:)`` does one.
    /// - Returns: How many events were not marked for a retry before.
    /// - Throws: ``ConsumerError/fileFailed(path:reason:)``, ``ConsumerError/damagedFile(path:reason:)``.
    @discardableResult
    public func requestRetryOfAllParked() throws -> Int {
        var marked = 0
        try changeParked { (list) throws(ConsumerError) in marked = try list.requestRetry(at: nil, consumer: name) }
        state.withLock { $0.retryRequested = true }
        nudgeRuns()
        return marked
    }

    /// Removes a parked event without handling it.
    /// - Parameter position: The parked event's position.
    /// - Throws: ``ConsumerError/notParked(consumer:position:)`` when none has that position;
    ///   ``ConsumerError/fileFailed(path:reason:)``, ``ConsumerError/damagedFile(path:reason:)``.
    public func skipParked(at position: LogPosition) throws {
        try changeParked { (list) throws(ConsumerError) in try list.skip(at: position, consumer: name) }
    }

    /// Hands each parked event with a retry request to `handler` (as a batch of one, with the
    /// retry policy's attempts): what a run does when it starts and when a request came in.
    /// Checks what a run's reader checks before it hands out a batch (``mayHandOut()``, then
    /// the lease).
    nonisolated(nonsending) func retryRequested(_ handler: ([EventEnvelope]) async throws -> Void) async throws {
        // Cleared before the list is read: a request made while this runs is seen next time.
        state.withLock { $0.retryRequested = false }
        for entry in try parked() where entry.retryRequested {
            try Task.checkCancellation()
            guard try mayHandOut() else { return }
            try confirmLease()
            guard let event = try event(parkedAs: entry) else { continue }
            if let failure = try await attempt([event], handler) {
                try failedParked(at: entry.position, error: failure.error, attempts: failure.attempts)
            } else {
                try handledParked(at: entry.position)
            }
        }
    }

    /// Adds events to the parked list (replacing entries at the same positions), in one write.
    func park(_ events: [ParkedEvent]) throws {
        let positions = Set(events.map(\.position))
        try changeParked { list in
            list.removeAll { positions.contains($0.position) }
            list.append(contentsOf: events)
            list.sort { $0.position < $1.position }
        }
    }

    /// The event `entry` parked, read again from the log; `nil` when the log no longer holds
    /// it: compaction released it, the log ends before it, or the log holds another event there
    /// (a log of another history). The entry then says so and stays, for a person to skip:
    /// there is nothing to hand to the handler.
    private func event(parkedAs entry: ParkedEvent) throws -> EventEnvelope? {
        let reason: String
        if let event = try store.read(from: entry.position, limit: 1).first, event.position == entry.position {
            if event.stream.description == entry.stream && event.eventType == entry.eventType { return event }
            reason = "the log holds another event at this position (\(event.eventType) of \(event.stream)): the log is of another history; skip it"
        } else if entry.position >= store.nextPosition {
            reason = "the log ends before this position (its next position is \(store.nextPosition)); skip it"
        } else {
            reason = "the event is no longer in the log (released by compaction); skip it"
        }
        try update(entry.position) { parked in
            parked.error = reason
            parked.errorType = "EventKernel.ConsumerError"
        }
        return nil
    }

    /// A retried parked event was handled: it leaves the list.
    private func handledParked(at position: LogPosition) throws {
        try changeParked { list in list.removeAll { $0.position == position } }
        store.instrumentation?.consumerHandled(consumer: name, events: 1)
    }

    /// A retry of a parked event failed `attempts` more times, the last with `error`.
    private func failedParked(at position: LogPosition, error: any Error, attempts: Int) throws {
        try update(position) { parked in
            parked.attempts += attempts
            parked.error = String(describing: error)
            parked.errorType = String(reflecting: type(of: error))
        }
    }

    /// Changes the entry at `position` after a retry (if it is still parked): its time is now,
    /// and its retry request is served.
    private func update(_ position: LogPosition, _ change: (inout ParkedEvent) -> Void) throws {
        try changeParked { list in
            guard let index = list.firstIndex(where: { $0.position == position }) else { return }
            change(&list[index])
            list[index].parkedAt = .now()
            list[index].retryRequested = false
        }
    }

    /// Reads, changes and writes back the parked list, one change at a time.
    private func changeParked(_ change: (inout [ParkedEvent]) throws(ConsumerError) -> Void) throws {
        try parkedChanges.withLock { (_) throws in
            _ = try store.consumerStorage.changeParked(named: name, under: lock, change)
        }
    }
}
