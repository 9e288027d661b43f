public import CoreMetrics
public import EventKernel
import Synchronization

/// EventKernel's measurements as swift-metrics metrics: a `StoreInstrumentation` to put in the
/// store's configuration.
///
/// ```swift
/// MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))   // first
/// var configuration = EventStore.Configuration()
/// configuration.instrumentation = EventKernelMetrics.make()
/// let store = try EventStore.open(at: directory, configuration: configuration)
/// ```
///
/// | metric (`label`) | kind | dimensions | what |
/// | --- | --- | --- | --- |
/// | `eventkernel_appended_events_total` | counter | | events written to the log |
/// | `eventkernel_appended_bytes_total` | counter | | bytes written (batch headers and stored payloads) |
/// | `eventkernel_commit_round_appends` | recorder (histogram) | | append calls sharing one write and sync (group commit) |
/// | `eventkernel_sync_duration_seconds` | timer | `policy`: synced, buffered | `fdatasync` latency (synced: with the round's `pwrite`) |
/// | `eventkernel_command_conflicts_total` | counter | `entity_type`, `outcome`: retried, failed | lost version checks |
/// | `eventkernel_query_duration_seconds` | timer | `repository` | query latency per repository |
/// | `eventkernel_snapshot_write_duration_seconds` | timer | `projection` | encode and store a snapshot |
/// | `eventkernel_snapshot_bytes` | recorder | `projection` | a snapshot's body size |
/// | `eventkernel_snapshot_restore_duration_seconds` | timer | `projection` | read, check and decode one at open |
/// | `eventkernel_observers` | meter | | live observations |
/// | `eventkernel_consumer_lag` | gauge | `consumer` | events committed to the store and not yet by the consumer |
/// | `eventkernel_consumer_handled_events_total` | counter | `consumer` | events its handler handled |
/// | `eventkernel_consumer_parked_events_total` | counter | `consumer` | events it parked after every attempt failed |
///
/// Metrics are created once, here: as with every swift-metrics library, bootstrap the backend
/// before calling ``make(prefix:)``. When no backend is bootstrapped, ``make(prefix:)`` returns
/// `nil`, so an unobserved store measures nothing (no calls, and no clock read on the append
/// and query paths).
public final class EventKernelMetrics: StoreInstrumentation {
    private let events: Counter
    private let bytes: Counter
    private let roundAppends: Recorder
    private let syncedLatency: CoreMetrics.Timer
    private let bufferedSyncLatency: CoreMetrics.Timer
    private let observers: Meter
    private let prefix: String
    private let factory: any MetricsFactory
    /// Conflict counters by entity type and outcome, made on first use (conflicts are rare).
    private let conflicts = Mutex<[String: Counter]>([:])
    /// Each named consumer's metrics, made on its first measurement.
    private let consumers = Mutex<[String: ConsumerMetrics]>([:])

    /// One consumer's metrics.
    private struct ConsumerMetrics: Sendable {
        let lag: Gauge
        let handled: Counter
        let parked: Counter
    }

    /// The instrumentation, or `nil` when no metrics backend is bootstrapped (swift-metrics'
    /// no-op factory): an unobserved store then pays nothing.
    /// - Parameter prefix: Prepended to every label; `eventkernel` by default.
    public static func make(prefix: String = "eventkernel") -> EventKernelMetrics? {
        MetricsSystem.factory is NOOPMetricsHandler ? nil : EventKernelMetrics(prefix: prefix)
    }

    /// Creates the metrics in `factory`, whatever it is.
    /// - Parameters:
    ///   - prefix: Prepended to every label.
    ///   - factory: Where the metrics are made: the bootstrapped system's by default, or one
    ///     of the caller's (a test's `TestMetrics`, a registry of its own).
    public init(prefix: String = "eventkernel", factory: any MetricsFactory = MetricsSystem.factory) {
        self.prefix = prefix
        self.factory = factory
        events = Counter(label: "\(prefix)_appended_events_total", factory: factory)
        bytes = Counter(label: "\(prefix)_appended_bytes_total", factory: factory)
        roundAppends = Recorder(label: "\(prefix)_commit_round_appends", factory: factory)
        syncedLatency = CoreMetrics.Timer(label: "\(prefix)_sync_duration_seconds", dimensions: [("policy", "synced")], factory: factory)
        bufferedSyncLatency = CoreMetrics.Timer(label: "\(prefix)_sync_duration_seconds", dimensions: [("policy", "buffered")], factory: factory)
        observers = Meter(label: "\(prefix)_observers", factory: factory)
    }

    public func logWroteRound(appends: Int, records: Int, bytes: Int, sync: Duration?) {
        events.increment(by: Int64(records))
        self.bytes.increment(by: Int64(bytes))
        roundAppends.record(appends)
        if let sync { syncedLatency.recordNanoseconds(sync.nanoseconds) }
    }

    public func logSynced(duration: Duration) {
        bufferedSyncLatency.recordNanoseconds(duration.nanoseconds)
    }

    public func commandConflicted(entityType: String, retrying: Bool) {
        let outcome = retrying ? "retried" : "failed"
        let counter = conflicts.withLock { counters in
            let key = entityType + "\u{0}" + outcome
            if let counter = counters[key] { return counter }
            let counter = Counter(label: "\(prefix)_command_conflicts_total",
                                  dimensions: [("entity_type", entityType), ("outcome", outcome)], factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment()
    }

    public func queryLatency(repository: String) -> any DurationRecorder {
        TimerRecorder(timer: CoreMetrics.Timer(label: "\(prefix)_query_duration_seconds", dimensions: [("repository", repository)], factory: factory))
    }

    public func snapshotWritten(projection: String, bytes: Int, duration: Duration) {
        CoreMetrics.Timer(label: "\(prefix)_snapshot_write_duration_seconds", dimensions: [("projection", projection)], factory: factory)
            .recordNanoseconds(duration.nanoseconds)
        Recorder(label: "\(prefix)_snapshot_bytes", dimensions: [("projection", projection)], factory: factory).record(bytes)
    }

    public func snapshotRestored(projection: String, duration: Duration) {
        CoreMetrics.Timer(label: "\(prefix)_snapshot_restore_duration_seconds", dimensions: [("projection", projection)], factory: factory)
            .recordNanoseconds(duration.nanoseconds)
    }

    public func observersChanged(by delta: Int) {
        if delta >= 0 { observers.increment(by: Double(delta)) } else { observers.decrement(by: Double(-delta)) }
    }

    public func consumerLag(consumer: String, lag: UInt64) {
        metrics(of: consumer).lag.record(Int64(clamping: lag))
    }

    public func consumerHandled(consumer: String, events: Int) {
        metrics(of: consumer).handled.increment(by: Int64(events))
    }

    public func consumerParked(consumer: String) {
        metrics(of: consumer).parked.increment()
    }

    private func metrics(of consumer: String) -> ConsumerMetrics {
        consumers.withLock { all in
            if let metrics = all[consumer] { return metrics }
            let dimensions = [("consumer", consumer)]
            let metrics = ConsumerMetrics(
                lag: Gauge(label: "\(prefix)_consumer_lag", dimensions: dimensions, factory: factory),
                handled: Counter(label: "\(prefix)_consumer_handled_events_total", dimensions: dimensions, factory: factory),
                parked: Counter(label: "\(prefix)_consumer_parked_events_total", dimensions: dimensions, factory: factory))
            all[consumer] = metrics
            return metrics
        }
    }
}

/// A repository's query timer.
struct TimerRecorder: DurationRecorder {
    let timer: CoreMetrics.Timer

    func record(_ duration: Duration) { timer.recordNanoseconds(duration.nanoseconds) }
}

extension Duration {
    /// The duration in whole nanoseconds (saturating), as swift-metrics' timers take it.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? (seconds < 0 ? .min : .max) : scaled &+ attoseconds / 1_000_000_000
    }
}
