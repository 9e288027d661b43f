// swift-tools-version:6.1
//
// EventKernel's benchmark package: its own package so that the library's dependency footprint
// stays small. Run with `make bench` from the repository root (see Docs/Benchmarks.md).
//
// Targets (each an executable run by the BenchmarkPlugin, every benchmark in its own process):
//   LogBenchmarks        EventLog alone: appends and full reads
//   AppendBenchmarks     repository appends: EventKernel vs GRDB/SQLite vs naive peers
//   QueryBenchmarks      window, filtered, range and overlap queries on N activities
//   StartupBenchmarks    open from snapshot, full replay, history grown 5x
//   FootprintBenchmarks  bytes on disk and resident memory per activity, observation fan-out
//   ScalingBenchmarks    open, replay, snapshot write, verify, event scan at 1M...10M activities
//   LedgerBenchmarks     the finance ledger (1M transactions): adds, synced saves, queries, reopen, bytes
//   ScaleOutBenchmarks   the repository on a PostgreSQL log: synced appends from 1 and 64 tasks, 64
//                        tasks over three instances, commit-to-observe latency across instances
//   BenchFixtures        shared library: fixture builders (cached on disk), GRDB peer, naive peers
import PackageDescription

let benchmarkDependencies: [Target.Dependency] = [
    "BenchFixtures",
    .product(name: "Benchmark", package: "benchmark"),
    .product(name: "Activities", package: "EventKernel"),
    .product(name: "ActivityWorkload", package: "EventKernel"),
    .product(name: "EventKernel", package: "EventKernel"),
    .product(name: "EventLog", package: "EventKernel"),
    .product(name: "EventKernelMetrics", package: "EventKernel"),
    .product(name: "GRDB", package: "GRDB.swift"),
]

let package = Package(
    name: "EventKernelBenchmarks",
    platforms: [.macOS(.v15)],
    // ScaleOutBenchmarks needs PostgresLog, hence SwiftNIO and BoringSSL in a release build
    // (about 8 minutes of CPU here): `make bench` turns this trait on; the CI smoke run leaves it
    // off, and the target then compiles to a benchmark executable that registers nothing.
    traits: [
        .trait(name: "ScaleOut", description: "ScaleOutBenchmarks: the repository on a PostgreSQL log."),
    ],
    dependencies: [
        // One trait, named: with two (the defaults, PostgreSQL and Viewer) SwiftPM 6.3 passes
        // their `-D` flags in an order that changes between builds, and the benchmark plugin,
        // which builds each benchmark target on its own, compiled EventKernel's modules again for
        // every one of them (`make bench-thresholds-check`: 80 s became 343 s). The benchmarks
        // need PostgreSQL (ScaleOut), never the viewer.
        .package(name: "EventKernel", path: "..", traits: ["PostgreSQL"]),
        // Its default traits pull a runtime interposer that is not available here.
        .package(url: "https://github.com/ordo-one/benchmark.git", exact: "1.38.1", traits: ["MallocInterposer"]),
        // The peer: SQLite through GRDB (needs libsqlite3-dev: `WITH_SQLITE=1 scripts/setup.sh`).
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
    ],
    targets: [
        .target(name: "CMallocStats", path: "Sources/CMallocStats"),
        .target(
            name: "BenchFixtures",
            dependencies: [
                "CMallocStats",
                .product(name: "Activities", package: "EventKernel"),
                .product(name: "ActivityWorkload", package: "EventKernel"),
                .product(name: "EventKernel", package: "EventKernel"),
                .product(name: "EventLog", package: "EventKernel"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Sources/BenchFixtures"
        ),
        // Not a benchmark: a plain executable to profile one path (perf, callgrind).
        .executableTarget(
            name: "BenchProbe",
            dependencies: [
                "BenchFixtures",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Activities", package: "EventKernel"),
                .product(name: "EventKernel", package: "EventKernel"),
                .product(name: "EventLog", package: "EventKernel"),
            ],
            path: "Sources/BenchProbe"
        ),
        .executableTarget(
            name: "LogBenchmarks",
            dependencies: [
                "BenchFixtures",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "EventLog", package: "EventKernel"),
            ],
            path: "Benchmarks/LogBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "AppendBenchmarks",
            dependencies: benchmarkDependencies,
            path: "Benchmarks/AppendBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "QueryBenchmarks",
            dependencies: benchmarkDependencies,
            path: "Benchmarks/QueryBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "StartupBenchmarks",
            dependencies: benchmarkDependencies,
            path: "Benchmarks/StartupBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "ScalingBenchmarks",
            dependencies: benchmarkDependencies,
            path: "Benchmarks/ScalingBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "FootprintBenchmarks",
            dependencies: benchmarkDependencies,
            path: "Benchmarks/FootprintBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "ScaleOutBenchmarks",
            dependencies: benchmarkDependencies + [
                .product(name: "PostgresLog", package: "EventKernel", condition: .when(traits: ["ScaleOut"])),
            ],
            path: "Benchmarks/ScaleOutBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "LedgerBenchmarks",
            dependencies: benchmarkDependencies,
            path: "Benchmarks/LedgerBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
