// Benchmark configuration shared by the targets.
import Benchmark
import Foundation

public enum BenchConfig {
    static let environment = ProcessInfo.processInfo.environment

    /// `EVENTKERNEL_BENCH_ALLOCS_ONLY=1` measures allocation counts only: that is the mode for
    /// `swift package benchmark thresholds update/check`, so that thresholds hold allocation
    /// counts (deterministic) and not times (noisy on shared machines).
    public static let allocationsOnly = environment["EVENTKERNEL_BENCH_ALLOCS_ONLY"] == "1"

    /// `EVENTKERNEL_BENCH_SMOKE=1`: one iteration per benchmark, no warm-up (CI smoke pass).
    public static let smoke = environment["EVENTKERNEL_BENCH_SMOKE"] == "1"

    /// The metrics of throughput-style benchmarks.
    public static func metrics(_ extra: [BenchmarkMetric] = []) -> [BenchmarkMetric] {
        allocationsOnly ? [.mallocCountTotal] : [.throughput, .wallClock, .mallocCountTotal] + extra
    }

    /// Allocation-count thresholds: a run fails `thresholds check` when its p90 allocation count
    /// is more than 200 away from the recorded one, either way (package-benchmark fails an
    /// improvement beyond the threshold too, so that the files get updated). Absolute, because
    /// the benchmarks count per 1,000 operations: one allocation more per operation is 1,000
    /// more, while group commit's timing moves a synced run (which of the appends lead a round
    /// and which hand off to the writer thread): 21,013 to 21,023 in four quiet runs, more than
    /// 50 above once under load. A relative threshold of 0 fails on that jitter; one of 5% would
    /// miss a whole allocation per operation on the 21-allocation synced add.
    ///
    /// The `*.MetricsNoBackend` benchmarks use it against a copy of their plain twin's file
    /// (`make bench-thresholds-update` copies it), so that a cost of swift-metrics' no-op
    /// handlers (an allocation per append or query) fails the check.
    public static var allocationThresholds: [BenchmarkMetric: BenchmarkThresholds] { [
        .mallocCountTotal: .init(absolute: [.p90: 200]),
    ] }

    public static func configuration(
        scalingFactor: BenchmarkScalingFactor = .one, maxDuration: Duration = .seconds(3),
        maxIterations: Int = 1_000, warmupIterations: Int = 1, metrics extra: [BenchmarkMetric] = []
    ) -> Benchmark.Configuration {
        .init(
            metrics: metrics(extra),
            timeUnits: .microseconds,
            warmupIterations: smoke ? 0 : warmupIterations,
            scalingFactor: scalingFactor,
            maxDuration: smoke ? .milliseconds(200) : maxDuration,
            maxIterations: smoke ? 1 : maxIterations,
            thresholds: allocationThresholds
        )
    }

    /// For one-shot measurements reported as custom metrics (sizes, startup times).
    public static func report(_ names: [String], maxIterations: Int = 1) -> Benchmark.Configuration {
        .init(
            metrics: allocationsOnly ? [] : names.map { BenchmarkMetric.custom($0, polarity: .prefersSmaller, useScalingFactor: false) },
            timeUnits: .microseconds,
            warmupIterations: 0,
            scalingFactor: .one,
            maxDuration: .seconds(60),
            maxIterations: smoke ? 1 : maxIterations
        )
    }
}
