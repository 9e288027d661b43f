// swift-tools-version:6.1
//
// EventKernel's benchmark package: its own package so that the library's dependency footprint
// stays small. Run with `make bench` from the repository root (see Docs/Benchmarks.md).
import PackageDescription

let package = Package(
    name: "EventKernelBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "EventKernel", path: ".."),
        // Its default traits pull a runtime interposer that is not available here.
        .package(url: "https://github.com/ordo-one/benchmark.git", exact: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "LogBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "EventLog", package: "EventKernel"),
            ],
            path: "Benchmarks/LogBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
