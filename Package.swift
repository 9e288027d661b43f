// swift-tools-version:6.1
//
// EventKernel: an embedded, event-sourced storage kernel.
//
// Layers (lower never imports higher), see Docs/Architecture.md:
//   EventKernelTool (the `eventkernel` CLI), over EventKernelViewer (the web part of `serve`:
//     Hummingbird, swift-mustache; trait Viewer)
//   EventKernelDependencies, ActivitiesDependencies, EventKernelLifecycle, EventKernelMetrics
//     (service integration: swift-dependencies, swift-service-lifecycle, swift-metrics; the core
//     never imports them)
//   Activities, ActivityWorkload (the reference domain and its seeded generator)
//   EventKernel (typed events, projections, snapshots, repositories)
//   EventLog (the segmented, compressed, checksummed log)
//   KernelPrimitives (what every layer shares, `package` access but for BinaryDecodingError: locks, CRC32C, the LZ4
//     block wrapper, varints and little-endian integers, BinaryReader/BinaryWriter, the one
//     system-call wrapper)
//   CLZ4 (system library over liblz4), CCRC32C (CRC-32C on the processor's instruction)
// Beside them, never depended on by the core: PostgresLog (a RecordLog on PostgreSQL through
// postgres-nio, for several instances sharing one log; Docs/ScaleOut.md).
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    // The in-memory structures' invariant checks (Type+Invariants.swift), run after every
    // mutation, as swift-collections' COLLECTIONS_INTERNAL_CHECKS: `make unit` turns the trait on;
    // an app's build, debug or release, never pays for them (Docs/Reliability.md).
    .define("EVENTKERNEL_INTERNAL_CHECKS", .when(traits: ["InternalChecks"])),
]

let package = Package(
    name: "EventKernel",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "EventLog", targets: ["EventLog"]),
        .library(name: "EventKernel", targets: ["EventKernel"]),
        .library(name: "Activities", targets: ["Activities"]),
        .library(name: "ActivityWorkload", targets: ["ActivityWorkload"]),
        .library(name: "PostgresLog", targets: ["PostgresLog"]),
        .executable(name: "eventkernel", targets: ["EventKernelTool"]),
        // Service integration (Docs/Services.md), each its own product so that the core's
        // dependency footprint stays swift-log and liblz4.
        .library(name: "EventKernelDependencies", targets: ["EventKernelDependencies"]),
        .library(name: "ActivitiesDependencies", targets: ["ActivitiesDependencies"]),
        .library(name: "EventKernelLifecycle", targets: ["EventKernelLifecycle"]),
        .library(name: "EventKernelMetrics", targets: ["EventKernelMetrics"]),
    ],
    // PostgresLog and everything that uses it (the CLI's --postgres and copy, the PostgreSQL
    // suites) build only with this trait. It is on by default; scripts/sanitizers.sh turns it
    // off: ThreadSanitizer and AddressSanitizer builds of SwiftNIO and its two copies of
    // BoringSSL would cost CI about 10 minutes for code the sanitizers do not test here.
    traits: [
        .trait(name: "PostgreSQL", description: "PostgresLog (postgres-nio, SwiftNIO): a RecordLog several service instances share."),
        .trait(name: "InternalChecks", description: "Checks the invariants of the ordered indexes and hash tables after every mutation (tests only)."),
        .trait(name: "Viewer", description: "`eventkernel serve`: a read-only web viewer of a store (Hummingbird, swift-mustache)."),
        .default(enabledTraits: ["PostgreSQL", "Viewer"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        // Only its `Dependencies` product (no macros, so swift-syntax is resolved but never
        // built) and only its Foundation trait (no swift-clocks, no combine-schedulers).
        .package(url: "https://github.com/pointfreeco/swift-dependencies.git", from: "1.17.1", traits: ["Foundation"]),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        // PostgresLog only (SwiftNIO comes with it): the core products never import it.
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        // EventKernelViewer only (`eventkernel serve`, the Viewer trait): the library products never import them.
        // Its FullFoundation trait only, as Examples/ActivityService asks: with ConfigurationSupport
        // too (a default), the example's graph failed to build (HummingbirdTLS wants a product of
        // swift-configuration that its trait-less dependency does not offer).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: ["FullFoundation"]),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"]), .brew(["lz4"])]
        ),
        // CRC-32C with the processor's instruction (SSE 4.2, the AArch64 CRC extension), chosen
        // at run time; KernelPrimitives.CRC32C falls back to its tables without it.
        .target(name: "CCRC32C"),
        // Not a product: everything in it is `package` access (as NIOConcurrencyHelpers keeps
        // NIO's locks apart), so apps see only what EventLog and EventKernel make public.
        .target(
            name: "KernelPrimitives",
            dependencies: ["CLZ4", "CCRC32C"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "EventLog",
            dependencies: ["KernelPrimitives"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "EventKernel",
            dependencies: [
                "KernelPrimitives", "EventLog",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "Activities",
            dependencies: ["KernelPrimitives", "EventKernel", "EventLog"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "ActivityWorkload",
            dependencies: ["Activities"],
            swiftSettings: strictSettings
        ),
        // A RecordLog on PostgreSQL: the shared log of several service instances. It stores the
        // event envelope's fields as columns, so it sits above EventKernel (whose encoder is the
        // one definition of the envelope), and it is the only target that depends on NIO.
        .target(
            name: "PostgresLog",
            dependencies: [
                "KernelPrimitives", "EventLog", "EventKernel",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // The web part of `eventkernel serve` (Docs/Auditing.md): HTTP, pages and access, over
        // what the tool reads from a store (`StoreBrowsing`). Empty without the Viewer trait,
        // so that builds without it (the sanitizer runs) compile no Hummingbird.
        .target(
            name: "EventKernelViewer",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Viewer"])),
                .product(name: "Mustache", package: "swift-mustache", condition: .when(traits: ["Viewer"])),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Viewer"])),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "EventKernelTool",
            dependencies: [
                "EventLog", "EventKernel", "Activities", "ActivityWorkload", "PostgresLog", "KernelPrimitives", "EventKernelViewer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // To send library log messages to stderr, keeping stdout clean for --json.
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "EventKernelDependencies",
            dependencies: [
                "EventKernel", "EventLog",
                .product(name: "Dependencies", package: "swift-dependencies"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "ActivitiesDependencies",
            dependencies: [
                "Activities", "EventKernel", "EventKernelDependencies",
                .product(name: "Dependencies", package: "swift-dependencies"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "EventKernelLifecycle",
            dependencies: [
                "EventKernel",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // The core reports through StoreInstrumentation / LogInstrumentation (no metrics library);
        // this target implements them on swift-metrics' CoreMetrics.
        .target(
            name: "EventKernelMetrics",
            dependencies: [
                "EventKernel",
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings
        ),
        // What the test targets and helper executables share: temporary directories, the
        // SIGKILL harness, a seeded generator, test scale, a recording logger, fixtures.
        .target(
            name: "EventKernelTestSupport",
            dependencies: [
                "Activities", "ActivityWorkload", "KernelPrimitives", "EventLog", "EventKernel", "PostgresLog",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/EventKernelTestSupport",
            swiftSettings: strictSettings
        ),
        // Spawned by the tests to hold or contend for a store's lock from a second process.
        .executableTarget(
            name: "EventLogTestHelper",
            dependencies: ["EventLog", "EventKernelTestSupport"],
            path: "Tests/EventLogTestHelper",
            swiftSettings: strictSettings
        ),
        // Spawned by the Activities reliability tests: a repository writer that is killed
        // mid-write (crash tests) or holds a store's lock from a second process; and by the
        // PostgresLog suites: a service instance on a shared PostgreSQL log.
        .executableTarget(
            name: "ActivitiesTestHelper",
            dependencies: ["Activities", "EventKernel", "EventLog", "EventKernelTestSupport", "PostgresLog"],
            path: "Tests/ActivitiesTestHelper",
            swiftSettings: strictSettings
        ),
        // Spawned by the lifecycle tests: a service group writing activities until a real
        // SIGTERM shuts it down.
        .executableTarget(
            name: "LifecycleTestHelper",
            dependencies: [
                "Activities", "EventKernel", "EventKernelLifecycle", "EventKernelTestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/LifecycleTestHelper",
            swiftSettings: strictSettings
        ),
        // Direct tests of the primitives: varints at every length, zigzag extremes, CRC32C
        // vectors, LZ4, the EINTR retry.
        .testTarget(
            name: "KernelPrimitivesTests",
            dependencies: ["KernelPrimitives", "CCRC32C", "EventKernelTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "EventLogTests",
            dependencies: ["KernelPrimitives", "EventLog", "EventLogTestHelper", "EventKernelTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "EventKernelTests",
            dependencies: ["KernelPrimitives", "EventKernel", "EventLog", "EventKernelTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ActivitiesTests",
            dependencies: [
                "Activities", "ActivityWorkload", "KernelPrimitives", "EventKernel", "EventLog", "ActivitiesTestHelper",
                "EventKernelTestSupport", "PostgresLog",
                // To record the warnings logged for ignored snapshots.
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "PostgresLogTests",
            dependencies: [
                "PostgresLog", "EventKernel", "EventLog", "Activities", "EventKernelTestSupport", "ActivitiesTestHelper",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "EventKernelToolTests",
            dependencies: [
                "EventKernelTool", "Activities", "EventKernel", "EventLog", "ActivitiesTestHelper", "EventKernelTestSupport", "PostgresLog",
                "EventKernelViewer",
                .product(name: "HummingbirdTesting", package: "hummingbird", condition: .when(traits: ["Viewer"])),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DependenciesTests",
            dependencies: [
                "EventKernelDependencies", "ActivitiesDependencies", "Activities", "EventKernel", "EventKernelTestSupport",
                .product(name: "Dependencies", package: "swift-dependencies"),
                // Reports unimplemented endpoints as Swift Testing issues (withKnownIssue sees them).
                .product(name: "DependenciesTestSupport", package: "swift-dependencies"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "EventKernelMetricsTests",
            dependencies: [
                "EventKernelMetrics", "Activities", "EventKernel", "EventLog", "EventKernelTestSupport",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "EventKernelLifecycleTests",
            dependencies: [
                "EventKernelLifecycle", "LifecycleTestHelper", "Activities", "EventKernel", "EventKernelTestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // Examples/: the five repository designs of ../shared/seeds, each as domain code on the
        // public API with its own tests (built and run by `make test`).
        .target(name: "ActivityTrackerExample", dependencies: ["Activities"], path: "Examples/ActivityTracker/Sources", swiftSettings: strictSettings),
        .testTarget(name: "ActivityTrackerExampleTests", dependencies: ["ActivityTrackerExample", "Activities"], path: "Examples/ActivityTracker/Tests", swiftSettings: strictSettings),
        .target(name: "ForumsExample", dependencies: ["EventKernel"], path: "Examples/Forums/Sources", swiftSettings: strictSettings),
        .testTarget(name: "ForumsExampleTests", dependencies: ["ForumsExample", "EventKernel", "EventKernelTestSupport"], path: "Examples/Forums/Tests", swiftSettings: strictSettings),
        .target(name: "FinanceExample", dependencies: ["EventKernel"], path: "Examples/Finance/Sources", swiftSettings: strictSettings),
        .testTarget(name: "FinanceExampleTests", dependencies: ["FinanceExample", "EventKernel", "EventKernelTestSupport"], path: "Examples/Finance/Tests", swiftSettings: strictSettings),
        .target(name: "RestaurantsExample", dependencies: ["EventKernel"], path: "Examples/Restaurants/Sources", swiftSettings: strictSettings),
        .testTarget(name: "RestaurantsExampleTests", dependencies: ["RestaurantsExample", "EventKernel", "EventKernelTestSupport"], path: "Examples/Restaurants/Tests", swiftSettings: strictSettings),
        .target(name: "ShiftsExample", dependencies: ["EventKernel"], path: "Examples/Shifts/Sources", swiftSettings: strictSettings),
        .testTarget(name: "ShiftsExampleTests", dependencies: ["ShiftsExample", "EventKernel", "EventKernelTestSupport"], path: "Examples/Shifts/Tests", swiftSettings: strictSettings),
    ],
    swiftLanguageModes: [.v6]
)

// The documentation build (`make docs`, scripts/docs.sh) uses swift-docc-plugin. It is added only
// when that script asks for it, so that an app depending on EventKernel never resolves a package
// it does not build.
if Context.environment["EVENTKERNEL_DOCC"] != nil {
    package.dependencies.append(.package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"))
}
