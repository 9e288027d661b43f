import Activities
import CoreMetrics
import EventKernel
import EventKernelMetrics
import EventKernelTestSupport
import EventLog
import Foundation
import MetricsTestKit
import Synchronization
import Testing

/// EventKernelMetrics records what the store and its log do, in the factory it is given (a
/// `TestMetrics` here: nothing is bootstrapped globally, so tests do not interfere).
@Suite("EventKernelMetrics")
struct EventKernelMetricsTests {
    struct Counter: Codable, Identifiable, Sendable {
        var id: String
        var value: Int
    }

    @Test func makeReturnsNilWithoutABackend() {
        // No test in this process bootstraps swift-metrics: an unobserved store measures nothing.
        #expect(EventKernelMetrics.make() == nil)
    }

    @Test func appendsBatchesSyncsQueriesObserversAndSnapshots() async throws {
        let metrics = TestMetrics()
        let directory = TemporaryDirectory("ek-metrics")
        var configuration = EventStore.Configuration()
        configuration.snapshots = SnapshotPolicy(everyEvents: nil, onClose: true)
        configuration.instrumentation = EventKernelMetrics(factory: metrics)
        let repository = try EventSourcedActivityRepository.open(at: directory.url, configuration: configuration)

        var feed: AsyncStream<[ActivityModel]>.Iterator? = repository.observe(query: ActivityQuery(limit: 5)).makeAsyncIterator()
        _ = await feed?.next()
        #expect(try metrics.expectMeter("eventkernel_observers").lastValue == 1)
        await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<10 { group.addTask { try await repository.add(crashModel(i)) } }
        }
        for _ in 0..<3 { _ = try repository.activities(matching: ActivityQuery(limit: 5)) }

        let events = try metrics.expectCounter("eventkernel_appended_events_total")
        #expect(events.totalValue == 10)
        let statistics = try #require(repository.store.log as? SegmentedLog).statistics
        #expect(try metrics.expectCounter("eventkernel_appended_bytes_total").totalValue == Int64(statistics.bytesWritten))
        #expect(try roundSizes(metrics).count <= statistics.batchesWritten, "a round writes one batch or more")
        let rounds = try roundSizes(metrics)
        #expect(rounds.reduce(0, +) == 10, "every append call is in exactly one round: \(rounds)")
        let syncs = try metrics.expectTimer("eventkernel_sync_duration_seconds", [("policy", "synced")]).values
        #expect(syncs.count == rounds.count, "one fdatasync per round under the synced policy")
        #expect(syncs.allSatisfy { $0 > 0 })
        #expect(try metrics.expectTimer("eventkernel_query_duration_seconds", [("repository", "activities")]).values.count == 3)

        feed = nil  // the consumer stops: the observation ends
        #expect(try await eventually { (try? metrics.expectMeter("eventkernel_observers").lastValue) == 0 })

        try await repository.close()
        for projection in ["activities", "$entity-versions"] {
            #expect(try metrics.expectTimer("eventkernel_snapshot_write_duration_seconds", [("projection", projection)]).values.count == 1)
            #expect(try metrics.expectRecorder("eventkernel_snapshot_bytes", [("projection", projection)]).lastValue ?? 0 > 0)
        }
        let reopened = try EventSourcedActivityRepository.open(at: directory.url, configuration: configuration)
        #expect(reopened.count == 10)
        #expect(try metrics.expectTimer("eventkernel_snapshot_restore_duration_seconds", [("projection", "activities")]).values.count == 1)
        try await reopened.close()
    }

    @Test func bufferedSyncsAreTimedApart() async throws {
        let metrics = TestMetrics()
        let directory = TemporaryDirectory("ek-metrics")
        var configuration = EventStore.Configuration(log: SegmentedLog.Configuration(durability: .buffered(syncInterval: .seconds(60))))
        configuration.instrumentation = EventKernelMetrics(factory: metrics)
        let store = try EventStore.open(at: directory.url, configuration: configuration)
        let counters = try EventSourcedRepository<Counter>(store: store, typeName: "Counter")
        try await counters.add(Counter(id: "a", value: 1))
        #expect(try metrics.expectTimer("eventkernel_sync_duration_seconds", [("policy", "synced")]).values.isEmpty,
                "a buffered round is not synced")
        #expect(try metrics.expectCounter("eventkernel_appended_events_total").totalValue == 1)
        try await store.close()
        #expect(try metrics.expectTimer("eventkernel_sync_duration_seconds", [("policy", "buffered")]).values.count >= 1)
        #expect(try metrics.expectTimer("eventkernel_query_duration_seconds", [("repository", "repository:Counter")]).values.isEmpty)
    }

    @Test func conflictsAreCountedAsRetriedOrFailed() async throws {
        let metrics = TestMetrics()
        let log = HeldLog()
        let store = try EventStore(log: log, instrumentation: EventKernelMetrics(factory: metrics))
        let counters = try EventSourcedRepository<Counter>(store: store, typeName: "Counter")
        try await counters.add(Counter(id: "a", value: 0))
        // A stale expected version fails at once, without a retry.
        await #expect(throws: RepositoryError.self) { try await counters.update(Counter(id: "a", value: 9), expectedVersion: 0) }
        let failed = try metrics.expectCounter("eventkernel_command_conflicts_total", [("entity_type", "Counter"), ("outcome", "failed")])
        #expect(failed.totalValue == 1)

        // A save whose append is held in flight makes a second save of the entity lose its
        // version check: it waits for the first to commit, then decides again.
        log.hold()
        let first = Task { try await counters.save(Counter(id: "a", value: 1)) }
        #expect(try await eventually { log.isHolding })
        let second = Task { try await counters.save(Counter(id: "a", value: 2)) }
        #expect(try await eventually {
            ((try? metrics.expectCounter("eventkernel_command_conflicts_total", [("entity_type", "Counter"), ("outcome", "retried")]))?.totalValue ?? 0) == 1
        })
        log.release()
        try await first.value
        try await second.value
        #expect(counters.fetch(id: "a")?.value == 2, "the retried save committed after the held one")
        #expect(failed.totalValue == 1, "a retried conflict is not a failure")
        try fetchQueriesAreTimed(counters, metrics)
    }

    @Test func consumersReportLagHandledAndParked() async throws {
        struct Refused: Error {}
        let metrics = TestMetrics()
        let directory = TemporaryDirectory("ek-metrics")
        var configuration = EventStore.Configuration(snapshots: .never)
        configuration.instrumentation = EventKernelMetrics(factory: metrics)
        let store = try EventStore.open(at: directory.url, configuration: configuration)
        for i in 0..<10 {
            try await store.append(PendingEvent(EncodedEvent(eventType: "Counted", schemaVersion: 1, stream: StreamID("Counted", .string("c\(i)")), payload: [1])))
        }
        let consumer = try store.consumer(named: "mailer", options: ConsumerOptions(retry: RetryPolicy(maxAttempts: 2, initialDelay: .microseconds(1))))
        let run = Task {
            try await consumer.run(batchSize: 4) { batch in
                if batch.contains(where: { $0.position == 7 }) { throw Refused() }
            }
        }
        #expect(try await eventually { consumer.committed == 10 })
        let lag = try metrics.expectGauge("eventkernel_consumer_lag", [("consumer", "mailer")])
        #expect(try await eventually { lag.lastValue == 0 })
        #expect(lag.values.contains { $0 > 0 }, "it lagged while catching up: \(lag.values)")
        #expect(try metrics.expectCounter("eventkernel_consumer_handled_events_total", [("consumer", "mailer")]).totalValue == 9)
        #expect(try metrics.expectCounter("eventkernel_consumer_parked_events_total", [("consumer", "mailer")]).totalValue == 1)
        run.cancel()
        try await run.value
        try await store.close()
    }

    func roundSizes(_ metrics: TestMetrics) throws -> [Double] {
        try metrics.expectRecorder("eventkernel_commit_round_appends").values
    }

    func fetchQueriesAreTimed(_ counters: EventSourcedRepository<Counter>, _ metrics: TestMetrics) throws {
        _ = try counters.fetch(EntityQuery<Counter>())
        _ = try counters.count(EntityQuery<Counter>())
        #expect(try metrics.expectTimer("eventkernel_query_duration_seconds", [("repository", "repository:Counter")]).values.count == 2)
    }
}

/// An in-memory log whose next append's completion can be held back (its append stays in
/// flight, its version reserved) until the test releases it.
final class HeldLog: RecordLog {
    private let inner = InMemoryLog()
    private struct State {
        var holding = false
        var held: (@Sendable () -> Void)?
    }
    private let state = Mutex(State())

    /// Holds the completion of the next append.
    func hold() { state.withLock { $0.holding = true } }

    /// Whether an append's completion is held now.
    var isHolding: Bool { state.withLock { $0.held != nil } }

    /// Delivers the held completion.
    func release() {
        let held = state.withLock { state -> (@Sendable () -> Void)? in
            state.holding = false
            defer { state.held = nil }
            return state.held
        }
        held?()
    }

    var bounds: LogBounds { inner.bounds }
    var access: LogAccess { inner.access }
    var fileIO: any LogFileIO { inner.fileIO }
    var historyEpoch: UInt64 { inner.historyEpoch }

    func enqueueAppend(
        _ entries: [LogEntry], committer: AppendCommitter,
        completion: @escaping @Sendable (Result<Range<LogPosition>, LogError>) -> Void
    ) {
        inner.enqueueAppend(entries, committer: committer) { [self] result in
            let deliverNow = state.withLock { state -> Bool in
                guard state.holding, state.held == nil else { return true }
                state.held = { completion(result) }
                return false
            }
            if deliverNow { completion(result) }
        }
    }

    func commitEnqueuedAppends() { inner.commitEnqueuedAppends() }

    func forEachRecord(from start: LogPosition, through end: LogPosition?, _ body: (LogRecordView) throws -> Bool) throws {
        try inner.forEachRecord(from: start, through: end, body)
    }

    func forEachRecord(timestampsIn range: ClosedRange<LogTimestamp>, _ body: (LogRecordView) throws -> Bool) throws {
        try inner.forEachRecord(timestampsIn: range, body)
    }

    func synchronize() async throws { try await inner.synchronize() }
    func close() async throws { try await inner.close() }
}
