public import Foundation
public import EventLog

/// Where a new consumer starts: used once, when the consumer has no committed position yet.
public enum ConsumerStart: Hashable, Sendable {
    /// The log's first event.
    case beginning
    /// The next event appended after the consumer is created (nothing already in the log).
    case end
    /// The event at this position (the store's next position: the next event appended).
    case position(LogPosition)
    /// The first event recorded at or after this date.
    case recordedAt(Date)
    /// The position a handler stored with what it handled (``Consumer/position(after:)``),
    /// checked against the log's history: a position left behind by a cut of the log (a
    /// repair, a torn tail, unsynced events lost in a crash) is refused with
    /// ``ConsumerError/checkpointOffHistory(consumer:committed:reason:)``, and one past the
    /// log's end with ``ConsumerError/checkpointAheadOfLog(consumer:committed:logEnd:)``, even
    /// once the log has grown past it again.
    case checkpoint(ConsumerPosition)
}

/// How a consumer retries a handler that failed.
public struct RetryPolicy: Hashable, Sendable {
    /// Attempts per event or batch, the first included (at least 1).
    public var maxAttempts: Int
    /// The wait before the second attempt.
    public var initialDelay: Duration
    /// The longest wait between attempts.
    public var maxDelay: Duration
    /// Each wait is the previous one times this (at least 1).
    public var multiplier: Double

    /// Creates a policy.
    /// - Parameters:
    ///   - maxAttempts: Attempts, the first included (clamped to at least 1).
    ///   - initialDelay: The wait before the second attempt.
    ///   - maxDelay: The longest wait.
    ///   - multiplier: The growth of the wait per attempt (clamped to at least 1).
    public init(maxAttempts: Int = 5, initialDelay: Duration = .milliseconds(100),
                maxDelay: Duration = .seconds(10), multiplier: Double = 2) {
        self.maxAttempts = max(1, maxAttempts)
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
        self.multiplier = max(1, multiplier)
    }

    /// The wait before attempt `attempt + 1` (`attempt` ≥ 1 attempts made).
    func delay(after attempt: Int) -> Duration {
        var delay = initialDelay
        for _ in 1..<max(1, attempt) {
            delay = delay * multiplier
            if delay >= maxDelay { return maxDelay }
        }
        return min(delay, maxDelay)
    }

    /// Five attempts, waiting 0.1 s, 0.2 s, 0.4 s, 0.8 s between them.
    public static let `default` = RetryPolicy()
}

/// What a consumer does with an event its handler still fails on after every attempt.
public enum FailurePolicy: Hashable, Sendable {
    /// Park it (``Consumer/parked()``) and go on with the next.
    case park
    /// Stop: ``Consumer/run(batchSize:handler:)`` throws ``ConsumerError/handlerFailed(consumer:position:attempts:errorType:error:)``.
    case stop
}

/// Who keeps a consumer's committed position.
public enum CheckpointOwner: Hashable, Sendable {
    /// The store, in `<store>/consumers/<name>.checkpoint` (in memory for an in-memory store).
    case store
    /// The handler's own target, in the transaction that applies the events (exactly-once):
    /// the consumer starts at its `startingAt:` position each time a store opens it and commits only in memory.
    case handler
}

/// How a named consumer reads, retries and commits.
public struct ConsumerOptions: Hashable, Sendable {
    /// Events read from the log at a time: the most a consumer holds in memory, and the
    /// largest batch it hands out. Each read decompresses and checks whole the log batches it
    /// touches, so reads much smaller than the log's batches (a thousand events each for
    /// batches of appends, more when many appends are written together) read each of them again
    /// and again.
    public var readBatchSize: Int
    /// How a failing handler is retried.
    public var retry: RetryPolicy
    /// What happens to an event the handler still fails on.
    public var onFailure: FailurePolicy
    /// Who keeps the committed position.
    public var checkpoint: CheckpointOwner
    /// How often ``Consumer/run(batchSize:handler:)`` commits what it handled: after a batch
    /// once this long has passed since its last commit, and when it has caught up and no new
    /// event comes within it, and when the run ends. A commit syncs the log and writes the
    /// checkpoint (two `fsync`s): committing every small batch of a consumer that keeps up with a
    /// busy writer costs more than handling it. `.zero`: after every batch. Committing less
    /// often never skips an event; after a crash, at most this long of handled events is
    /// handled again (at-least-once).
    public var commitInterval: Duration

    /// Creates options.
    /// - Parameters:
    ///   - readBatchSize: Events read from the log at a time (clamped to at least 1; 4,096 by default).
    ///   - retry: How a failing handler is retried.
    ///   - onFailure: Park the event, or stop.
    ///   - checkpoint: The store keeps the committed position, or the handler's target does.
    ///   - commitInterval: How often a run commits (`.zero`: after every batch; negative
    ///     durations are zero).
    public init(readBatchSize: Int = 4_096, retry: RetryPolicy = .default, onFailure: FailurePolicy = .park,
                checkpoint: CheckpointOwner = .store, commitInterval: Duration = .milliseconds(200)) {
        self.readBatchSize = max(1, readBatchSize)
        self.retry = retry
        self.onFailure = onFailure
        self.checkpoint = checkpoint
        self.commitInterval = max(.zero, commitInterval)
    }
}
