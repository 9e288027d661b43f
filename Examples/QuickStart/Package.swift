// swift-tools-version:6.1
//
// The README's quick start, compiled and run by `make test` (scripts/quickstart.sh), so that the
// README can never quote code that does not build. Its main.swift is quoted verbatim in README.md;
// scripts/check_readme.py fails when the two differ.
import PackageDescription

let package = Package(
    name: "QuickStart",
    platforms: [.macOS(.v15)],
    dependencies: [
        // An app names EventKernel by URL and version (README, "Add it to a package"); the example
        // builds against this checkout instead.
        // One trait, named (as Benchmarks/Package.swift says why): not the viewer's.
        .package(name: "EventKernel", path: "../..", traits: ["PostgreSQL"]),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        .executableTarget(
            name: "QuickStart",
            dependencies: [.product(name: "EventKernel", package: "EventKernel")]
        ),
        // Every other Swift block of README.md, each a whole program: built by
        // scripts/quickstart.sh, which runs all but ReadmeService (it serves until a signal);
        // compared with the README by scripts/check_readme.py.
        .executableTarget(name: "ReadmeLog", dependencies: [.product(name: "EventLog", package: "EventKernel")]),
        .executableTarget(name: "ReadmeActivities", dependencies: [.product(name: "Activities", package: "EventKernel")]),
        .executableTarget(name: "ReadmeForum", dependencies: [.product(name: "EventKernel", package: "EventKernel")]),
        .executableTarget(
            name: "ReadmeService",
            dependencies: [
                .product(name: "EventKernel", package: "EventKernel"),
                .product(name: "EventKernelLifecycle", package: "EventKernel"),
                .product(name: "EventKernelMetrics", package: "EventKernel"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
