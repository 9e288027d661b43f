import KernelPrimitives

extension EventStore {
    /// A named consumer of this store's events: where it starts, how far it got, what it parked.
    ///
    /// ```swift
    /// let mailer = try store.consumer(named: "welcome-mail", startingAt: .end)
    /// try await mailer.run { batch in
    ///     for event in batch where event.eventType == "AccountOpened" { try await send(event) }
    /// }
    /// ```
    /// - Parameters:
    ///   - name: A file-name-safe token (1 to 128 of `A-Z a-z 0-9 . _ -`, not starting with `.`).
    ///   - start: Where a consumer with no committed position starts (ignored once it has one;
    ///     used each time a store opens it with ``CheckpointOwner/handler``, typically as
    ///     ``ConsumerStart/checkpoint(_:)`` with the position the handler stored: one that does
    ///     not fit the log makes reading throw, as a stored checkpoint that does not fit).
    ///   - options: Batch size, retries, failure policy, checkpoint owner.
    /// - Returns: The consumer, at its committed position (a new one's is written at once). A
    ///   name already open on this store returns the same instance (its `start` is not used
    ///   again), so two handles never keep two committed positions or parked lists.
    /// - Throws: ``ConsumerError/openWithOtherOptions(consumer:)`` when the name is open with
    ///   other options; ``ConsumerError/inUse(consumer:path:)`` when another process holds the
    ///   consumer's lock (or, over a shared log, another instance its lease: wait for it with
    ///   ``consumer(named:startingAt:options:waitingForLease:)``);
    ///   ``ConsumerError/databaseFailed(location:cause:)`` when a shared log's database fails, ``ConsumerError/damagedRow(location:consumer:reason:)`` for a row no EventKernel writes;
    ///   ``RepositoryError/closed`` once the store is closed; ``ConsumerError/invalidName(_:reason:)``, ``ConsumerError/damagedFile(path:reason:)``,
    ///   ``ConsumerError/fileFailed(path:reason:)``, ``ConsumerError/positionOutOfRange(consumer:position:logEnd:)``,
    ///   ``RepositoryError/storage(_:)`` (a start date, or the check of a
    ///   stored checkpoint against the log, needs the log read).
    public func consumer(named name: String, startingAt start: ConsumerStart = .beginning,
                         options: ConsumerOptions = ConsumerOptions()) throws -> Consumer {
        try openConsumer(named: name, startingAt: start, options: options).consumer
    }

    /// The consumer, and whether this call opened it (rather than finding it open).
    private func openConsumer(named name: String, startingAt start: ConsumerStart,
                              options: ConsumerOptions) throws -> (consumer: Consumer, opened: Bool) {
        if commit.withLock({ $0.closed }) { throw RepositoryError.closed }
        let gate = consumerGates.withLock { gates -> Locked<Void> in
            if let gate = gates[name] { return gate }
            let gate = Locked(())
            gates[name] = gate
            return gate
        }
        return try gate.withLock { (_) throws -> (consumer: Consumer, opened: Bool) in
            // One that lost its lease (a log shared by instances) is opened anew: it takes the
            // lease again, or finds another instance holding it. The old handle keeps its own
            // (lost) lease, so it writes nothing through the new one.
            let found = try openConsumers.withLock { (open) throws -> Consumer? in
                if commit.withLock({ $0.closed }) { throw RepositoryError.closed }
                guard let consumer = open[name], consumer.lock?.isHeld != false else { return nil }
                guard consumer.options == options else { throw ConsumerError.openWithOtherOptions(consumer: name) }
                return consumer
            }
            if let found { return (found, false) }
            let consumer = try Consumer(store: self, name: name, start: start, options: options)
            // Checked under the lock the close takes after marking the store closed: a consumer
            // opened here is either released by the close or by this, never kept by a closed
            // store (its lock is a lease other instances wait for).
            try openConsumers.withLock { (open) throws in
                if commit.withLock({ $0.closed }) {
                    consumer.state.withLock { $0.closed = true }
                    consumer.lock?.release()
                    throw RepositoryError.closed
                }
                open[name] = consumer
            }
            return (consumer, true)
        }
    }

    /// A named consumer, waiting until this store can take it: until no other instance holds
    /// its lease (a store over a log several instances share, as PostgreSQL: Docs/Consumers.md,
    /// "On PostgreSQL") or, for a store directory, its lock file. An instance that stands by
    /// this way takes the consumer over within about `pollInterval` of its holder closing the
    /// store, dying, or losing its connection.
    ///
    /// ```swift
    /// let indexer = try await store.consumer(named: "search-index", waitingForLease: .milliseconds(500))
    /// try await indexer.run { batch in try await index(batch) }
    /// ```
    /// - Parameters:
    ///   - name: The consumer's name (as ``consumer(named:startingAt:options:)``).
    ///   - start: Where a consumer with no committed position starts.
    ///   - options: Batch size, retries, failure policy, checkpoint owner.
    ///   - pollInterval: How often to try again while another holder has it (at least 100 ms:
    ///     each try may open a connection to a shared log's database).
    /// - Returns: The consumer, held by this store, at its committed position.
    /// - Throws: What ``consumer(named:startingAt:options:)`` throws, except
    ///   ``ConsumerError/inUse(consumer:path:)``, on which it waits, and a shared log's database
    ///   being unreachable (``ConsumerError/databaseFailed(location:cause:)`` with
    ///   ``ConsumerDatabaseFailure/isUnavailable``: a restart, no free connection), on which it
    ///   waits longer each time (up to 30 s) and tries again; `CancellationError` when the
    ///   task is cancelled while waiting; ``RepositoryError/closed`` when the store closes meanwhile.
    public func consumer(named name: String, startingAt start: ConsumerStart = .beginning,
                         options: ConsumerOptions = ConsumerOptions(), waitingForLease pollInterval: Duration) async throws -> Consumer {
        let interval = max(pollInterval, .milliseconds(100))
        var backoff = interval
        while true {
            try Task.checkCancellation()
            do {
                let (consumer, opened) = try openConsumer(named: name, startingAt: start, options: options)
                // Cancelled while it was being opened (a blocking connect): the cancelled task
                // would keep a lease others wait for, so the one this call took is given back.
                if Task.isCancelled {
                    if opened { consumer.close() }
                    throw CancellationError()
                }
                return consumer
            } catch ConsumerError.inUse {
                backoff = interval
                try await Task.sleep(for: interval)
            } catch ConsumerError.databaseFailed(_, let cause) where cause.isUnavailable {
                // A standby outlives a database restart: it keeps waiting, less often.
                backoff = min(backoff * 2, .seconds(30))
                try await Task.sleep(for: backoff)
            }
        }
    }

    /// Forgets the open consumers and releases their locks (at close; one consumer alone:
    /// ``Consumer/close()``).
    func closeConsumers() {
        let consumers = openConsumers.withLock { open in
            defer { open.removeAll() }
            return Array(open.values)
        }
        // Closed under each consumer's lock before its file lock goes: a commit racing the close
        // either wrote already or writes nothing (see ``Consumer/commit(through:ifGeneration:)``).
        for consumer in consumers {
            consumer.state.withLock { $0.closed = true }
            consumer.lock?.release()
        }
    }

    /// The names of the consumers that have a committed position or parked events in this store, sorted.
    /// - Throws: ``ConsumerError/fileFailed(path:reason:)`` when the directory cannot be listed.
    public func consumerNames() throws -> [String] {
        try consumerStorage.names()
    }
}
