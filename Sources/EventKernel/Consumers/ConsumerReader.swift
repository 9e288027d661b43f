import EventLog

/// Reads a consumer's events from the log in bounded batches, waiting on the store's commit
/// signal when it has caught up. It reads up to ``ConsumerOptions/readBatchSize`` events at a
/// time and holds them until they are handed out, and nothing else.
struct ConsumerReader: Sendable {
    let consumer: Consumer
    /// The next position to read from the log.
    private(set) var next: LogPosition
    /// Events read and not handed out yet: `read[handedOut...]`.
    private var read: [EventEnvelope] = []
    private var handedOut = 0
    /// The key a run waits under (``CommitSignal/nudge(_:)``); `nil` for the sequences.
    private let nudgeKey: UInt64?

    init(consumer: Consumer, from position: LogPosition, nudgedAs key: UInt64? = nil) {
        self.consumer = consumer
        self.next = position
        self.nudgeKey = key
    }

    /// Whether every committed event has been handed out: the next ``fetch(limit:)`` waits.
    var isCaughtUp: Bool { handedOut == read.count && next >= consumer.store.commit.withLock { $0.nextPosition } }

    /// The next events, at most `limit`, in position order: at once when some were read and
    /// not handed out yet or the store has committed some past `next`, else once it does.
    /// - Returns: A non-empty batch; an empty one when the reader waited and its nudge key was
    ///   nudged (its run is asked to look at its consumer again); `nil` when the store closed or
    ///   the task was cancelled.
    /// - Throws: ``ConsumerError/checkpointAheadOfLog(consumer:committed:logEnd:)``, ``ConsumerError/checkpointOffHistory(consumer:committed:reason:)``, ``RepositoryError/storage(_:)``.
    mutating func fetch(limit: Int) async throws -> [EventEnvelope]? {
        let store = consumer.store
        while !Task.isCancelled {
            guard try consumer.mayHandOut() else { return nil }
            let end = store.commit.withLock { $0.nextPosition }
            if handedOut < read.count {
                // Another instance may hold the consumer now: stop before it is handled.
                try consumer.confirmLease()
                // The whole read at once when it fits (no copy), else the next `limit` of it.
                if handedOut == 0 && read.count <= limit {
                    defer { read = [] }
                    handedOut = 0
                    return read
                }
                let batch = Array(read[handedOut..<min(read.count, handedOut + limit)])
                handedOut += batch.count
                if handedOut == read.count { (read, handedOut) = ([], 0) }
                return batch
            }
            if next > end {
                throw ConsumerError.checkpointAheadOfLog(consumer: consumer.name, committed: next, logEnd: end)
            }
            if next < end {
                // Up to `readBatchSize` positions (or `limit`, if larger), below `end`: the log
                // may hold records whose commit is not folded yet. Not through `end - 1`: a
                // segmented log reads every adjacent log batch in the range asked, up to 4 MiB,
                // in one go, so a catch-up read 4 MiB per batch handed out. Not just `limit`:
                // each read decompresses and checks the log batches it touches whole, so small
                // reads (a `run` of batches of 10) do that again for every batch handed out.
                let size = UInt64(max(limit, consumer.options.readBatchSize))
                let last = Self.readEnd(from: next, size: size, below: end, log: store.log)
                var fresh: [EventEnvelope] = []
                fresh.reserveCapacity(Int(last - next + 1))
                try store.forEachEnvelope(from: next, through: last) { envelope in
                    fresh.append(consume envelope)
                    return true
                }
                // Fewer than asked when compaction left gaps: every position through `last` was
                // read. (Kept only once the whole read succeeded: a failed one is read again.)
                (read, handedOut, next) = (fresh, 0, last + 1)
                continue
            }
            store.instrumentation?.consumerLag(consumer: consumer.name, lag: consumer.lag)
            switch await store.commitSignal.wait(forCommitOf: next, nudgedAs: nudgeKey) {
            case .committed: continue
            case .nudged: return []
            case .ended: return nil
            }
        }
        return nil
    }
}

extension ConsumerReader {
    /// The last position of a read of at most `size` positions from `next`, below `end`: where
    /// a log batch ends when one does within it. A read decompresses and checks every log batch
    /// it touches whole, so a read ending inside a batch had the next read decode that batch
    /// again (reads of 4,096 over log batches of 1,000: a fifth more decoding than one pass).
    /// A log batch that holds both `next` and the read's last position is read in part, as
    /// before: the reader holds at most `size` events.
    static func readEnd(from next: LogPosition, size: UInt64, below end: LogPosition, log: any RecordLog) -> LogPosition {
        let last = min(end - 1, next + size - 1)
        // `end` starts a batch of its own (a commit takes whole batches), so a read to it ends on a boundary.
        guard last < end - 1, let start = log.batchStart(containing: last + 1), start > next else { return last }
        // Clamped: a log that broke `batchStart`'s "at most the position" could otherwise make
        // a read larger than `size`.
        return min(start - 1, last)
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
