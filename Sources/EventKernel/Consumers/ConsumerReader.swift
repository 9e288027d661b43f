import EventLog

/// Reads a consumer's events from the log in bounded batches, waiting on the store's commit
/// signal when it has caught up. It holds the batch it returns and nothing else.
struct ConsumerReader: Sendable {
    let consumer: Consumer
    /// The next position to read.
    private(set) var next: LogPosition

    init(consumer: Consumer, from position: LogPosition) {
        self.consumer = consumer
        self.next = position
    }

    /// Whether every committed event has been read: the next ``fetch(limit:)`` waits.
    var isCaughtUp: Bool { next >= consumer.store.commit.withLock { $0.nextPosition } }

    /// The next events, at most `limit`, in position order: at once when the store has
    /// committed some past `next`, else once it does.
    /// - Returns: A non-empty batch, or `nil` when the store closed or the task was cancelled.
    /// - Throws: ``ConsumerError/checkpointAheadOfLog(consumer:committed:logEnd:)``, ``ConsumerError/checkpointOffHistory(consumer:committed:reason:)``, ``RepositoryError/storage(_:)``.
    mutating func fetch(limit: Int) async throws -> [EventEnvelope]? {
        let store = consumer.store
        while !Task.isCancelled {
            if let problem = consumer.state.withLock({ $0.problem }) { throw problem }
            let (end, closed) = store.commit.withLock { ($0.nextPosition, $0.closed) }
            if closed || consumer.state.withLock({ $0.closed }) { return nil }
            if next > end {
                throw ConsumerError.checkpointAheadOfLog(consumer: consumer.name, committed: next, logEnd: end)
            }
            if next < end {
                var batch: [EventEnvelope] = []
                batch.reserveCapacity(min(limit, Int(clamping: end - next)))
                // Through `end - 1`: the log may hold records whose commit is not folded yet.
                try store.forEachEnvelope(from: next, through: end - 1) { envelope in
                    batch.append(envelope)
                    return batch.count < limit
                }
                // Fewer than asked: everything up to `end` was read (compaction leaves gaps).
                next = batch.count < limit ? end : batch[batch.count - 1].position + 1
                if !batch.isEmpty {
                    // Another instance may hold the consumer now: stop before it is handled.
                    try consumer.confirmLease()
                    return batch
                }
                continue
            }
            store.instrumentation?.consumerLag(consumer: consumer.name, lag: consumer.lag)
            guard await store.commitSignal.wait(forCommitOf: next) else { return nil }
        }
        return nil
    }
}

/// A consumer's events, one at a time: see ``Consumer/events()``.
public struct ConsumerEvents: AsyncSequence, Sendable {
    public typealias Element = EventEnvelope
    let reader: ConsumerReader

    /// An iterator that reads from the log one batch at a time.
    public func makeAsyncIterator() -> Iterator { Iterator(reader: reader) }

    /// Reads the consumer's events one batch at a time and yields them one by one.
    public struct Iterator: AsyncIteratorProtocol {
        var reader: ConsumerReader
        var buffer: [EventEnvelope] = []
        var index = 0

        /// The next event, waiting for a commit when caught up; `nil` when the store closed or
        /// the task was cancelled.
        /// - Throws: ``ConsumerError/checkpointAheadOfLog(consumer:committed:logEnd:)``, ``ConsumerError/checkpointOffHistory(consumer:committed:reason:)``, ``RepositoryError/storage(_:)``.
        public mutating func next() async throws -> EventEnvelope? {
            if index == buffer.count {
                buffer = []
                guard let batch = try await reader.fetch(limit: reader.consumer.options.readBatchSize) else { return nil }
                buffer = batch
                index = 0
            }
            defer { index += 1 }
            return buffer[index]
        }
    }
}

/// A consumer's events in batches: see ``Consumer/batches(maxCount:)``.
public struct ConsumerBatches: AsyncSequence, Sendable {
    public typealias Element = [EventEnvelope]
    let reader: ConsumerReader
    let maxCount: Int

    /// An iterator that reads one batch from the log per step.
    public func makeAsyncIterator() -> Iterator { Iterator(reader: reader, maxCount: maxCount) }

    /// Reads the consumer's events one batch at a time.
    public struct Iterator: AsyncIteratorProtocol {
        var reader: ConsumerReader
        let maxCount: Int

        /// The next batch (1 to `maxCount` events), waiting for a commit when caught up; `nil`
        /// when the store closed or the task was cancelled.
        /// - Throws: ``ConsumerError/checkpointAheadOfLog(consumer:committed:logEnd:)``, ``ConsumerError/checkpointOffHistory(consumer:committed:reason:)``, ``RepositoryError/storage(_:)``.
        public mutating func next() async throws -> [EventEnvelope]? {
            try await reader.fetch(limit: maxCount)
        }
    }
}

extension Consumer {
    /// The events from the committed position on, in batches of at most `maxCount` (default, and
    /// at most, ``ConsumerOptions/readBatchSize``): what is in the log at once, then each new commit.
    /// Ends when the store closes or the task is cancelled; commit with ``commit(through:)``.
    /// - Parameter maxCount: The most events per batch (clamped to at least 1).
    public func batches(maxCount: Int? = nil) -> ConsumerBatches {
        ConsumerBatches(reader: ConsumerReader(consumer: self, from: committed), maxCount: min(max(1, maxCount ?? options.readBatchSize), options.readBatchSize))
    }
}
