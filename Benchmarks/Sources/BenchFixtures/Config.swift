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

    /// Allocation-count thresholds: a run fails `thresholds check` when the p90 allocation count
    /// is more than 5% (and more than 20 allocations) above the recorded one.
    public static var allocationThresholds: [BenchmarkMetric: BenchmarkThresholds] { [
        .mallocCountTotal: .init(relative: [.p90: 5.0], absolute: [.p90: 20]),
    ] }

    /// For the `*.MetricsNoBackend` benchmarks, whose thresholds are copies of their plain
    /// twin's: at most 20 allocations more than the store without instrumentation, so a cost of
    /// swift-metrics' no-op handlers (an allocation per append or query) fails the check.
    public static var noExtraAllocations: [BenchmarkMetric: BenchmarkThresholds] { [
        .mallocCountTotal: .init(relative: [.p90: 0], absolute: [.p90: 20]),
    ] }

    public static func configuration(
        scalingFactor: BenchmarkScalingFactor = .one, maxDuration: Duration = .seconds(3),
        maxIterations: Int = 1_000, warmupIterations: Int = 1, metrics extra: [BenchmarkMetric] = [],
        thresholds: [BenchmarkMetric: BenchmarkThresholds]? = nil
    ) -> Benchmark.Configuration {
        .init(
            metrics: metrics(extra),
            timeUnits: .microseconds,
            warmupIterations: smoke ? 0 : warmupIterations,
            scalingFactor: scalingFactor,
            maxDuration: smoke ? .milliseconds(200) : maxDuration,
            maxIterations: smoke ? 1 : maxIterations,
            thresholds: thresholds ?? allocationThresholds
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
