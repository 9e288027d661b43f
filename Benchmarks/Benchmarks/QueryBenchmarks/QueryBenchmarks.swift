// Queries on the seeded history of N activities (EVENTKERNEL_BENCH_N, default 1,000,000):
// EventKernel's projection vs SQLite through GRDB (records and raw rows) vs the naive array.
// Throughput counts queries; allocation counts are per query (scaled).
import Activities
import ActivityWorkload
import Benchmark
import BenchFixtures
import EventKernel
import EventKernelMetrics
import Foundation
import GRDB

private let eventKernel = Once { try EventKernelFixtures.open(try await EventKernelFixtures.store(), durability: .buffered) }
/// The same store with swift-metrics instrumentation and no backend bootstrapped (no-op handlers).
private let eventKernelMetrics = Once {
    try EventKernelFixtures.open(try await EventKernelFixtures.store(), durability: .buffered, instrumentation: EventKernelMetrics())
}
private let grdb = Once { try GRDBActivityStore(path: try GRDBFixtures.database(), synchronous: .normal) }
private let naive = Once { NaiveArrayRepository(Workload.liveActivities(BenchEnv.n)) }

private let twoTypes: Set<ActivityType> = [.sleep, .tummyTime]
private let window = ActivityQuery(afterDate: BenchEnv.weekStart, beforeDate: BenchEnv.historyEnd, limit: 50, sortOrder: .newestFirst)
private let windowTypes = ActivityQuery(afterDate: BenchEnv.weekStart, beforeDate: BenchEnv.historyEnd, types: twoTypes, limit: 50, sortOrder: .newestFirst)
private let range = ActivityRangeQuery(.startingIn, from: BenchEnv.midDayStart, to: BenchEnv.midDayEnd, sortOrder: .oldestFirst)
private let overlap = ActivityRangeQuery(.overlapping, from: BenchEnv.midDayStart, to: BenchEnv.midDayEnd, sortOrder: .oldestFirst)

/// Checks once per process that the peers answer the same (as sets of ids), so the race is fair.
private let agreement = Once {
    let ek = try await eventKernel.get()
    let db = try await grdb.get()
    func same(_ a: [ActivityModel], _ b: [ActivityModel], _ label: String) {
        if Set(a.map(\.id)) != Set(b.map(\.id)) || a.count != b.count {
            FileHandle.standardError.write("WARNING: \(label): EventKernel \(a.count) results, GRDB \(b.count) differ\n".data(using: .utf8)!)
        }
    }
    // Limit-50 windows may differ only at equal start dates on the boundary; compare unlimited.
    var w = window; w.limit = nil
    var wt = windowTypes; wt.limit = nil
    same(try ek.activities(matching: w), try db.records(w), "window")
    same(try ek.activities(matching: wt), try db.records(wt), "window+types")
    same(try ek.activities(in: range), try db.records(range), "range")
    same(try ek.activities(in: overlap), try db.records(overlap), "overlap")
    return true
}

let benchmarks: @Sendable () -> Void = {
    let fast = BenchConfig.configuration(scalingFactor: .kilo)
    let slow = BenchConfig.configuration(scalingFactor: .one, maxDuration: .seconds(5), maxIterations: 50)

    let windowQueries: [(String, ActivityQuery)] = [("Window7d.Limit50", window), ("Window7d.TwoTypes.Limit50", windowTypes)]
    for (label, query) in windowQueries {
        Benchmark("Query.\(label).EventKernel", configuration: fast) { benchmark in
            let repository = try await eventKernel.get()
            _ = try await agreement.get()
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { blackHole(try repository.activities(matching: query)) }
        }
        if label == "Window7d.Limit50" {
            // EventKernelMetrics installed, no metrics backend: every query is timed into a
            // no-op timer (two clock reads), which must not allocate.
            Benchmark("Query.\(label).EventKernel.MetricsNoBackend",
                      configuration: fast) { benchmark in
                let repository = try await eventKernelMetrics.get()
                benchmark.startMeasurement()
                for _ in benchmark.scaledIterations { blackHole(try repository.activities(matching: query)) }
            }
        }
        Benchmark("Query.\(label).GRDBRecords", configuration: fast) { benchmark in
            let store = try await grdb.get()
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { blackHole(try store.records(query)) }
        }
        Benchmark("Query.\(label).GRDBRows", configuration: fast) { benchmark in
            let store = try await grdb.get()
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { blackHole(try store.rows(query)) }
        }
        Benchmark("Query.\(label).NaiveArray", configuration: slow) { benchmark in
            let repository = try await naive.get()
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { blackHole(repository.fetch(query)) }
        }
    }

    let rangeQueries: [(String, ActivityRangeQuery)] = [("Range1d", range), ("Overlap1d", overlap)]
    for (label, query) in rangeQueries {
        Benchmark("Query.\(label).EventKernel", configuration: fast) { benchmark in
            let repository = try await eventKernel.get()
            _ = try await agreement.get()
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { blackHole(try repository.activities(in: query)) }
        }
        Benchmark("Query.\(label).GRDBRecords", configuration: label == "Overlap1d" ? slow : fast) { benchmark in
            let store = try await grdb.get()
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { blackHole(try store.records(query)) }
        }
        Benchmark("Query.\(label).GRDBRows", configuration: label == "Overlap1d" ? slow : fast) { benchmark in
            let store = try await grdb.get()
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { blackHole(try store.rows(query)) }
        }
        Benchmark("Query.\(label).NaiveArray", configuration: slow) { benchmark in
            let repository = try await naive.get()
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { blackHole(repository.fetch(query)) }
        }
    }
}
