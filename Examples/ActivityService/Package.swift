// swift-tools-version:6.1
//
// ActivityService: EventKernel inside an HTTP service (Hummingbird 2), its own package so that
// the library's dependency footprint stays small (as Benchmarks/ is). See Docs/Services.md.
//
//   ActivityServiceApp   the service: routes over ActivityBackend (ActivityRepositoryProtocol,
//                        plus versions and history), the EventKernel and GRDB backends, the
//                        server-sent-events feed, Prometheus metrics
//   ActivityService      the executable: `serve` (default) and `seed`
//   ActivityReadModel    a read model in SQLite (GRDB) fed by a consumer whose checkpoint is in
//                        the same transaction: exactly once (Docs/Consumers.md)
//   ActivityReadModelConsumer  its executable: catch up (or `--follow`), killable at any instant
//
//   swift run ActivityService                         EventKernel in ./activity-service-data
//   swift run ActivityService serve --backend grdb    the same service on SQLite (GRDB)
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "ActivityService",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ActivityService", targets: ["ActivityService"]),
        .executable(name: "ActivityReadModelConsumer", targets: ["ActivityReadModelConsumer"]),
    ],
    dependencies: [
        // One trait, named (as Benchmarks/Package.swift says why): not the viewer's.
        .package(name: "EventKernel", path: "../..", traits: ["PostgreSQL"]),
        // Without its swift-configuration support (unused here).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", exact: "2.28.1", traits: ["FullFoundation"]),
        // The peer backend: SQLite through GRDB (needs libsqlite3-dev: `WITH_SQLITE=1 scripts/setup.sh`).
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", exact: "2.4.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", exact: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", exact: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", exact: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", exact: "1.8.2"),
        // The tests' HTTP client (Tests/ActivityServiceTests/LiveService.swift), on the SwiftNIO
        // that Hummingbird brings: HummingbirdTesting and AsyncHTTPClient would add a TLS stack.
        .package(url: "https://github.com/apple/swift-nio.git", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", exact: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", exact: "1.8.0"),
    ],
    targets: [
        .target(
            name: "ActivityServiceApp",
            dependencies: [
                .product(name: "Activities", package: "EventKernel"),
                .product(name: "ActivityWorkload", package: "EventKernel"),
                .product(name: "EventKernel", package: "EventKernel"),
                .product(name: "EventLog", package: "EventKernel"),
                .product(name: "EventKernelLifecycle", package: "EventKernel"),
                .product(name: "EventKernelMetrics", package: "EventKernel"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "ActivityService",
            dependencies: [
                "ActivityServiceApp",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "ActivityReadModel",
            dependencies: [
                .product(name: "Activities", package: "EventKernel"),
                .product(name: "EventKernel", package: "EventKernel"),
                .product(name: "EventLog", package: "EventKernel"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "ActivityReadModelConsumer",
            dependencies: [
                "ActivityReadModel",
                .product(name: "EventKernel", package: "EventKernel"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ActivityReadModelTests",
            dependencies: [
                "ActivityReadModel",
                // Built before the tests, which run it and kill it.
                "ActivityReadModelConsumer",
                .product(name: "Activities", package: "EventKernel"),
                .product(name: "ActivityWorkload", package: "EventKernel"),
                .product(name: "EventKernel", package: "EventKernel"),
                .product(name: "EventLog", package: "EventKernel"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ActivityServiceTests",
            dependencies: [
                "ActivityServiceApp",
                .product(name: "Activities", package: "EventKernel"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
