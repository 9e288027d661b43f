// Synced comparisons run in alternating slices of one process.
//
// The disk's flush latency on a shared machine drifts from 0.1 ms to several ms within minutes,
// and separate benchmarks run minutes apart: their ratio says more about when each ran than
// about the stores. An interleaved benchmark runs EventKernel, the peer and (optionally) a bare
// pwrite+fdatasync loop in turn, a slice each, so each iteration compares them at the same
// moments; scripts/bench_table.py quotes the medians of the three custom metrics.
import Benchmark

public enum Interleaved {
    /// The metric names an interleaved benchmark reports (nanoseconds per operation).
    public static let metricNames = ["ekNanosPerOp", "grdbNanosPerOp", "floorNanosPerOp"]

    private static let ekNanos = BenchmarkMetric.custom("ekNanosPerOp", polarity: .prefersSmaller, useScalingFactor: false)
    private static let grdbNanos = BenchmarkMetric.custom("grdbNanosPerOp", polarity: .prefersSmaller, useScalingFactor: false)
    private static let floorNanos = BenchmarkMetric.custom("floorNanosPerOp", polarity: .prefersSmaller, useScalingFactor: false)

    /// A configuration reporting the three metrics, for up to `maxIterations` iterations.
    public static func configuration(maxIterations: Int = 12) -> Benchmark.Configuration {
        BenchConfig.report(metricNames, maxIterations: maxIterations)
    }

    /// Runs a slice of each side `rounds` times in turn (EventKernel, the peer, then the floor
    /// if given) and records each side's nanoseconds per operation on `benchmark`.
    /// - Parameters:
    ///   - rounds: How many times each side runs its slice.
    ///   - perSlice: The operations in one slice (the same for every side).
    public static func run(
        _ benchmark: Benchmark, rounds: Int, perSlice: Int,
        eventKernel: () async throws -> Void, peer: () async throws -> Void, floor: (() async throws -> Void)?
    ) async throws {
        var ek = 0.0, other = 0.0, bare = 0.0
        for _ in 0..<rounds {
            try await timed(&ek, eventKernel)
            try await timed(&other, peer)
            if let floor { try await timed(&bare, floor) }
        }
        let operations = Double(rounds * perSlice)
        guard !BenchConfig.allocationsOnly else { return }
        benchmark.measurement(ekNanos, Int(ek / operations))
        benchmark.measurement(grdbNanos, Int(other / operations))
        if floor != nil { benchmark.measurement(floorNanos, Int(bare / operations)) }
    }

    /// The single-writer comparison: `rounds` of slices of 100 synced operations (one round of
    /// 10 in the smoke run) on EventKernel, the peer and `floor`'s bare syncs. Each side is
    /// given the slice's size.
    public static func runOneTask(
        _ benchmark: Benchmark, floor: SyncFloor, rounds: Int = 8,
        eventKernel: (Int) async throws -> Void, peer: (Int) async throws -> Void
    ) async throws {
        let slice = BenchConfig.smoke ? 10 : 100
        try await run(benchmark, rounds: BenchConfig.smoke ? 1 : rounds, perSlice: slice,
            eventKernel: { try await eventKernel(slice) }, peer: { try await peer(slice) },
            floor: { for _ in 0..<slice { try floor.append() } })
    }

    /// Times `body` and adds the elapsed nanoseconds to `total`.
    private static func timed(_ total: inout Double, _ body: () async throws -> Void) async rethrows {
        let started = ContinuousClock.now
        try await body()
        let elapsed = ContinuousClock.now - started
        total += Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
    }
}
