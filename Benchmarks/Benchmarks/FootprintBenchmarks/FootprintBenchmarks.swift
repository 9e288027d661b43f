// Footprint: bytes on disk and resident memory per live activity (custom metrics, one
// measurement per benchmark process), and observation fan-out (100 observers, one write).
import Activities
import ActivityWorkload
import Benchmark
import BenchFixtures
import EventKernel
import Foundation
import GRDB
import Synchronization

private let bytesPerActivity = BenchmarkMetric.custom("bytesPerActivity", polarity: .prefersSmaller, useScalingFactor: false)
private let logBytesPerActivity = BenchmarkMetric.custom("logBytesPerActivity", polarity: .prefersSmaller, useScalingFactor: false)
private let residentBytesPerActivity = BenchmarkMetric.custom("residentBytesPerActivity", polarity: .prefersSmaller, useScalingFactor: false)

private func metricConfiguration(_ metrics: [BenchmarkMetric]) -> Benchmark.Configuration {
    .init(metrics: BenchConfig.allocationsOnly ? [.mallocCountTotal] : metrics, timeUnits: .microseconds,
          warmupIterations: 0, scalingFactor: .one, maxDuration: .seconds(60), maxIterations: 1)
}

/// Counts observer deliveries and wakes the writer when the expected number arrived.
private final class Countdown: Sendable {
    private struct State { var count = 0; var target = Int.max; var waiter: CheckedContinuation<Void, Never>? }
    private let state = Mutex(State())

    func arrive() {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { s in
            s.count += 1
            if s.count >= s.target, let w = s.waiter { s.waiter = nil; return w }
            return nil
        }
        waiter?.resume()
    }

    /// Waits until `target` deliveries have arrived in total.
    func wait(for target: Int) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { s in
                if s.count >= target { return true }
                s.target = target; s.waiter = c; return false
            }
            if ready { c.resume() }
        }
    }
}

let benchmarks: @Sendable () -> Void = {
    // MARK: Bytes on disk per live activity

    Benchmark("Footprint.Disk.EventKernel", configuration: metricConfiguration([bytesPerActivity, logBytesPerActivity])) { benchmark in
        let url = try await EventKernelFixtures.store()
        let repository = try EventKernelFixtures.open(url)
        let live = repository.count
        try await repository.close()
        try? FileManager.default.removeItem(at: url.appending(path: ".lock"))
        let total = diskBytes(url)
        benchmark.measurement(bytesPerActivity, total / max(1, live))
        benchmark.measurement(logBytesPerActivity, EventKernelFixtures.logBytes(url) / max(1, live))
        FileHandle.standardError.write("EventKernel store: \(total) bytes, log \(EventKernelFixtures.logBytes(url)), \(live) live activities\n".data(using: .utf8)!)
    }

    Benchmark("Footprint.Disk.GRDB", configuration: metricConfiguration([bytesPerActivity])) { benchmark in
        let path = try GRDBFixtures.database()
        let store = try GRDBActivityStore(path: path, synchronous: .normal)
        let live = try store.count()
        try store.pool.close()
        let total = diskBytes(URL(filePath: path)) + diskBytes(URL(filePath: path + "-wal"))
        benchmark.measurement(bytesPerActivity, total / max(1, live))
        FileHandle.standardError.write("SQLite file: \(total) bytes, \(live) activities\n".data(using: .utf8)!)
    }

    Benchmark("Footprint.Disk.JSONFile", configuration: metricConfiguration([bytesPerActivity])) { benchmark in
        let url = try JSONFileRepository.fixture()
        let live = try JSONFileRepository(url: url).memory.activities.count
        benchmark.measurement(bytesPerActivity, diskBytes(url) / max(1, live))
    }

    // MARK: Memory per live activity (each benchmark runs in a fresh process)

    Benchmark("Footprint.Memory.EventKernel", configuration: metricConfiguration([residentBytesPerActivity])) { benchmark in
        let url = try await EventKernelFixtures.store()
        Memory.trim()
        let heap0 = Memory.heapBytes(), rss0 = Memory.residentBytes()
        let repository = try EventKernelFixtures.open(url)
        Memory.trim()
        let heap1 = Memory.heapBytes(), rss1 = Memory.residentBytes()
        let live = repository.count
        benchmark.measurement(residentBytesPerActivity, (rss1 - rss0) / max(1, live))
        try await repository.close()
    }

    Benchmark("Footprint.Memory.NaiveArray", configuration: metricConfiguration([residentBytesPerActivity])) { benchmark in
        Memory.trim()
        let heap0 = Memory.heapBytes(), rss0 = Memory.residentBytes()
        let repository = NaiveArrayRepository(Workload.liveActivities(BenchEnv.n))
        Memory.trim()
        let heap1 = Memory.heapBytes(), rss1 = Memory.residentBytes()
        let live = repository.activities.count
        benchmark.measurement(residentBytesPerActivity, (rss1 - rss0) / max(1, live))
    }

    // SQLite keeps a bounded page cache: its memory does not grow with the data.
    Benchmark("Footprint.Memory.GRDB", configuration: metricConfiguration([residentBytesPerActivity])) { benchmark in
        let path = try GRDBFixtures.database()
        Memory.trim()
        let heap0 = Memory.heapBytes(), rss0 = Memory.residentBytes()
        let store = try GRDBActivityStore(path: path, synchronous: .normal)
        let live = try store.count()
        blackHole(try store.records(ActivityQuery(afterDate: BenchEnv.weekStart, beforeDate: BenchEnv.historyEnd, limit: 50)))
        Memory.trim()
        let heap1 = Memory.heapBytes(), rss1 = Memory.residentBytes()
        benchmark.measurement(residentBytesPerActivity, (rss1 - rss0) / max(1, live))
        try store.pool.close()
    }

    // MARK: Observation fan-out: 100 observers of the 7-day window, one write into it

    let fanOut = BenchConfig.configuration(scalingFactor: .one, maxDuration: .seconds(5), maxIterations: 200)
    Benchmark("Observation.FanOut100.EventKernel", configuration: fanOut) { benchmark in
        let source = try await EventKernelFixtures.store()
        let copy = BenchEnv.scratch("fanout")
        defer { try? FileManager.default.removeItem(at: copy) }
        try copyTree(source, to: copy)
        let repository = try EventKernelFixtures.open(copy)
        let query = ActivityQuery(afterDate: BenchEnv.weekStart, beforeDate: BenchEnv.historyEnd.addingTimeInterval(86_400 * 365), limit: 50)
        let countdown = Countdown()
        var consumers: [Task<Void, Never>] = []
        for _ in 0..<100 {
            let stream = repository.observe(query: query)
            consumers.append(Task { for await _ in stream { countdown.arrive() } })
        }
        await countdown.wait(for: 100)  // the initial results
        let models = AddStream(seed: 99).next(1).map { m in
            var m = m
            m.startDate = BenchEnv.historyEnd.addingTimeInterval(Double.random(in: 1...86_000))
            m.endDate = m.startDate.addingTimeInterval(60)
            return m
        }
        // A first write outside the observed window, so that first-write costs after open are
        // not counted as fan-out (it matches no observer's query: nobody is poked).
        var outside = AddStream(seed: 98).next(1)[0]
        outside.startDate = BenchEnv.weekStart.addingTimeInterval(-30 * 86_400)
        outside.endDate = outside.startDate.addingTimeInterval(60)
        try await repository.add(outside)
        benchmark.startMeasurement()
        try await repository.add(models[0])
        await countdown.wait(for: 200)
        benchmark.stopMeasurement()
        for c in consumers { c.cancel() }
        try await repository.close()
    }

    Benchmark("Observation.FanOut100.GRDB", configuration: fanOut) { benchmark in
        let source = try GRDBFixtures.database()
        let copy = BenchEnv.scratch("fanout-grdb")
        defer { try? FileManager.default.removeItem(at: copy) }
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        let path = copy.appending(path: "db.sqlite").path
        try FileManager.default.copyItem(atPath: source, toPath: path)
        try flushToDisk(copy)  // as copyTree does for the EventKernel side
        let store = try GRDBActivityStore(path: path, synchronous: .normal)
        let query = ActivityQuery(afterDate: BenchEnv.weekStart, beforeDate: BenchEnv.historyEnd.addingTimeInterval(86_400 * 365), limit: 50)
        let countdown = Countdown()
        let queue = DispatchQueue(label: "observers", attributes: .concurrent)
        var cancellables: [AnyDatabaseCancellable] = []
        for _ in 0..<100 {
            let observation = ValueObservation.tracking { db in
                try ActivityRecord.fetchAll(db.cachedStatement(sql: GRDBActivityStore.windowSQL), arguments: GRDBActivityStore.arguments(query)).map(\.model)
            }
            cancellables.append(observation.start(in: store.pool, scheduling: .async(onQueue: queue),
                                                  onError: { _ in }, onChange: { _ in countdown.arrive() }))
        }
        await countdown.wait(for: 100)
        let model = AddStream(seed: 99).next(1).map { m in
            var m = m
            m.startDate = BenchEnv.historyEnd.addingTimeInterval(Double.random(in: 1...86_000))
            m.endDate = m.startDate.addingTimeInterval(60)
            return m
        }[0]
        var outside = AddStream(seed: 98).next(1)[0]
        outside.startDate = BenchEnv.weekStart.addingTimeInterval(-30 * 86_400)
        outside.endDate = outside.startDate.addingTimeInterval(60)
        try await store.insert([outside])  // GRDB re-runs every observation on any write to the table
        await countdown.wait(for: 200)
        benchmark.startMeasurement()
        try await store.insert([model])
        await countdown.wait(for: 300)
        benchmark.stopMeasurement()
        cancellables.removeAll()
        try store.pool.close()
    }
}
