public import EventLog

/// What an event store reports of its work, for metrics: the log's rounds (it is a
/// `LogInstrumentation`, handed to the log the store opens), command conflicts, query latency
/// per repository, snapshot writes and restores, the number of live observations, and named
/// consumers' lag and handled and parked events.
///
/// The `EventKernelMetrics` product implements it on swift-metrics; the core depends on no
/// metrics library. Set it in ``EventStore/Configuration/instrumentation``; created once at
/// open, held by the log and the store. `nil`, the default, costs one check where a
/// measurement would be taken (no clock is read on the append and query paths; snapshots,
/// which take milliseconds, read it anyway).
///
/// Calls come from the threads doing the work, outside the store's and projections' locks:
/// keep them cheap and never block.
public protocol StoreInstrumentation: LogInstrumentation {
    /// A command lost a version check on `stream`'s entity type: it decides again on the new
    /// state (`retrying`) or fails with `RepositoryError.conflict` (its attempts are spent, or
    /// the caller gave the expected version).
    func commandConflicted(entityType: String, retrying: Bool)

    /// The recorder of query latency for one repository (`"activities"`, `"repository:Thread"`),
    /// asked once when the repository is created; every query it answers is timed into it.
    func queryLatency(repository: String) -> any DurationRecorder

    /// A snapshot of `projection` was written (encoded, compressed, stored atomically).
    func snapshotWritten(projection: String, bytes: Int, duration: Duration)

    /// `projection` was restored from a snapshot at open (read, checked, decoded).
    func snapshotRestored(projection: String, duration: Duration)

    /// An observation started (`+1`) or ended (`-1`).
    func observersChanged(by delta: Int)

    /// Named consumer `consumer` is `lag` events behind the store (its committed position to
    /// the store's next position), measured after each commit and whenever it waits caught up.
    func consumerLag(consumer: String, lag: UInt64)

    /// Named consumer `consumer`'s handler handled `events` events (a batch, committed next).
    func consumerHandled(consumer: String, events: Int)

    /// Named consumer `consumer` parked an event its handler failed on after every attempt.
    func consumerParked(consumer: String)
}

/// Consumers' measurements are optional: an instrumentation written before consumers existed
/// measures none of them.
extension StoreInstrumentation {
    public func consumerLag(consumer: String, lag: UInt64) {}
    public func consumerHandled(consumer: String, events: Int) {}
    public func consumerParked(consumer: String) {}
}

/// Records durations, for one measured operation.
public protocol DurationRecorder: Sendable {
    /// Records one duration.
    func record(_ duration: Duration)
}

extension Optional where Wrapped == any DurationRecorder {
    /// Runs `body`, timing it into the recorder when there is one (no clock read otherwise).
    @inline(__always)
    package func time<R>(_ body: () throws -> R) rethrows -> R {
        guard let recorder = self else { return try body() }
        let started = ContinuousClock.now
        defer { recorder.record(ContinuousClock.now - started) }
        return try body()
    }
}
