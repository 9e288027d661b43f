// Named consumers (issue 29's bars), beside the startup rows because they read the same log:
//
//   Consumer.FullReplay.EventKernel   every event of the full-replay fixture (N activities) read
//                                     as EventEnvelope through the store (`forEachEnvelope`): the
//                                     store's full replay rate
//   Consumer.Throughput.EventKernel   the same events through a named consumer's `run` (default
//                                     options: reads and batches of 4,096, commits every 200 ms and
//                                     at the end, fsynced), from the beginning to the end
//   Consumer.Lag.64Writers.EventKernel 64 tasks append 16 synced events each (1,024 per iteration)
//                                     while a consumer follows; each event's lag, from its append
//                                     call to its handler, is one sample of `lagMicroseconds`
//                                     (the table reports its p99)
//
// Both reading rows record `eventsPerSecond` too; an iteration reads every event once (the
// table's ratio is of the two rows' wall clocks over the same events).
import Benchmark
import BenchFixtures
import EventKernel
import EventLog
import Foundation
import Synchronization

/// The full-replay fixture's log, opened read-only (it stays as cached), with the consumers'
/// files in a scratch directory (one name: benchmark processes run one at a time, and each
/// starts by removing what the previous one left).
private let replayStore = Once<EventStore> {
    let url = try await EventKernelFixtures.replayOnlyStore()
    let scratch = FileManager.default.temporaryDirectory.appending(path: "ek-bench-consumers")
    try? FileManager.default.removeItem(at: scratch)
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    return try EventStore(log: try SegmentedLog.openReadOnly(at: url), directory: scratch, snapshotPolicy: .never)
}

private let eventsPerSecond = BenchmarkMetric.custom("eventsPerSecond", polarity: .prefersLarger, useScalingFactor: false)
private let lagMicroseconds = BenchmarkMetric.custom("lagMicroseconds", polarity: .prefersSmaller, useScalingFactor: false)

/// CLOCK_MONOTONIC in nanoseconds: the lag row's stamps, comparable across tasks of the process.
private func monotonicNanoseconds() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}

/// What the lag row's consumer saw: each event's lag, and how many it handled.
private final class LagRecorder: Sendable {
    private let state = Mutex<(handled: Int, lags: [UInt64])>((0, []))

    func record(_ batch: [EventEnvelope]) {
        let now = monotonicNanoseconds()
        state.withLock { state in
            for event in batch {
                let stamp = event.payload.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                state.lags.append(now > stamp ? now - stamp : 0)
            }
            state.handled += batch.count
        }
    }

    var handled: Int { state.withLock { $0.handled } }

    /// The lags recorded since the last call, emptied.
    func take() -> [UInt64] { state.withLock { state in defer { state.lags = [] }; return state.lags } }
}

/// A synced store in a scratch directory with a consumer following it from its end.
private let lagStore = Once<(store: EventStore, recorder: LagRecorder)> {
    let scratch = FileManager.default.temporaryDirectory.appending(path: "ek-bench-consumer-lag")
    try? FileManager.default.removeItem(at: scratch)
    let store = try EventStore.open(at: scratch, snapshotPolicy: .never)
    let consumer = try store.consumer(named: "lag", startingAt: .end)
    let recorder = LagRecorder()
    Task { try await consumer.run { recorder.record($0) } }
    return (store, recorder)
}

func consumerBenchmarks() {
    let reading = BenchConfig.configuration(scalingFactor: .one, maxDuration: .seconds(20), maxIterations: 10, metrics: [eventsPerSecond])

    Benchmark("Consumer.FullReplay.EventKernel", configuration: reading) { benchmark in
        let store = try await replayStore.get()
        let end = store.nextPosition
        var count = 0
        let started = ContinuousClock.now
        benchmark.startMeasurement()
        try store.forEachEnvelope(from: 0, through: end - 1) { envelope in
            blackHole(envelope)
            count += 1
            return true
        }
        benchmark.stopMeasurement()
        benchmark.measurement(eventsPerSecond, Int(Double(count) / (ContinuousClock.now - started).seconds))
    }

    Benchmark("Consumer.Throughput.EventKernel", configuration: reading) { benchmark in
        let store = try await replayStore.get()
        let end = store.nextPosition
        // A new consumer each iteration: it starts at the beginning.
        let consumer = try store.consumer(named: "throughput-\(UUID().uuidString.prefix(8))", startingAt: .beginning)
        let started = ContinuousClock.now
        benchmark.startMeasurement()
        let count = try await Task {
            var count = 0
            try await consumer.run { batch in
                for envelope in batch { blackHole(envelope) }
                count += batch.count
                // The whole log handled: end the run, which commits it.
                if batch[batch.count - 1].position + 1 >= end { withUnsafeCurrentTask { $0?.cancel() } }
            }
            return count
        }.value
        benchmark.stopMeasurement()
        benchmark.measurement(eventsPerSecond, Int(Double(count) / (ContinuousClock.now - started).seconds))
        precondition(consumer.committed == end, "the consumer committed \(consumer.committed) of \(end)")
    }

    Benchmark("Consumer.Lag.64Writers.EventKernel",
              configuration: BenchConfig.configuration(scalingFactor: .one, maxDuration: .seconds(10), maxIterations: 50,
                                                       metrics: [lagMicroseconds])) { benchmark in
        let (store, recorder) = try await lagStore.get()
        let target = recorder.handled + 64 * 16
        benchmark.startMeasurement()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<64 {
                group.addTask {
                    for i in 0..<16 {
                        let stamp = withUnsafeBytes(of: monotonicNanoseconds()) { Array($0) }
                        try await store.append(PendingEvent(EncodedEvent(
                            eventType: "Stamped", schemaVersion: 1, stream: StreamID("Writer", .string("w\(writer)-\(i % 4)")), payload: stamp)))
                    }
                }
            }
            try await group.waitForAll()
        }
        while recorder.handled < target { try await Task.sleep(for: .microseconds(200)) }
        benchmark.stopMeasurement()
        for lag in recorder.take() { benchmark.measurement(lagMicroseconds, Int(lag / 1_000)) }
    }
}

extension Duration {
    fileprivate var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
