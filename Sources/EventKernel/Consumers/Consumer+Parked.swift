public import EventLog

extension Consumer {
    /// The events this consumer parked, in position order.
    /// - Throws: ``ConsumerError/damagedFile(path:reason:)``, ``ConsumerError/fileFailed(path:reason:)``.
    public func parked() throws -> [ParkedEvent] {
        try store.consumerStorage.parked(named: name)
    }

    /// Runs `handler` once on each parked event (read again from the log): an event it handles
    /// leaves the parked list; one it fails on stays, with its attempt count, error and time
    /// updated. The list is written back after each event.
    /// - Parameter handler: Handles one event, as the consumer's handler does.
    /// - Returns: The events still parked.
    /// - Throws: ``ConsumerError/fileFailed(path:reason:)``, ``ConsumerError/damagedFile(path:reason:)``,
    ///   ``RepositoryError/storage(_:)``; `CancellationError` when the task is cancelled.
    @discardableResult
    nonisolated(nonsending) public func retryParked(_ handler: (_ event: EventEnvelope) async throws -> Void) async throws -> [ParkedEvent] {
        for entry in try parked() {
            try Task.checkCancellation()
            guard let event = try store.read(from: entry.position, limit: 1).first, event.position == entry.position else {
                // Compaction released it: there is nothing left to handle; it stays for a person to skip.
                try update(entry.position) { parked in
                    parked.error = "the event is no longer in the log (released by compaction); skip it"
                    parked.errorType = "EventKernel.ConsumerError"
                }
                continue
            }
            do {
                try await handler(event)
                try changeParked { list in list.removeAll { $0.position == entry.position } }
                store.instrumentation?.consumerHandled(consumer: name, events: 1)
            } catch {
                try Task.checkCancellation()
                try update(entry.position) { parked in
                    parked.attempts += 1
                    parked.error = String(describing: error)
                    parked.errorType = String(reflecting: type(of: error))
                }
            }
        }
        return try parked()
    }

    /// Removes a parked event without handling it.
    /// - Parameter position: The parked event's position.
    /// - Throws: ``ConsumerError/notParked(consumer:position:)`` when none has that position;
    ///   ``ConsumerError/fileFailed(path:reason:)``, ``ConsumerError/damagedFile(path:reason:)``.
    public func skipParked(at position: LogPosition) throws {
        try changeParked { list in
            guard list.contains(where: { $0.position == position }) else {
                throw ConsumerError.notParked(consumer: name, position: position)
            }
            list.removeAll { $0.position == position }
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

    private func update(_ position: LogPosition, _ change: (inout ParkedEvent) -> Void) throws {
        try changeParked { list in
            guard let index = list.firstIndex(where: { $0.position == position }) else { return }
            change(&list[index])
            list[index].parkedAt = .now()
        }
    }

    /// Reads, changes and writes back the parked list, one change at a time.
    private func changeParked(_ change: (inout [ParkedEvent]) throws -> Void) throws {
        try parkedChanges.withLock { (_) throws in
            var list = try store.consumerStorage.parked(named: name)
            let before = list
            try change(&list)
            if list != before { try store.consumerStorage.writeParked(list, named: name, under: lock) }
        }
    }
}
