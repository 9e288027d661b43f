public import ActivityServiceApp
import ActivityWorkload
public import ArgumentParser
import Foundation
import Hummingbird
public import Logging
import Metrics
import Prometheus

@main
struct ActivityServiceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ActivityService",
        abstract: "An HTTP service for activities on EventKernel (or, for comparison, on SQLite through GRDB).",
        subcommands: [Serve.self, Seed.self],
        defaultSubcommand: Serve.self)
}

struct BackendOptions: ParsableArguments {
    @Option(help: "The storage: eventkernel (default) or grdb.")
    var backend: BackendKind = .eventkernel

    @Option(help: "The data directory (default: ./activity-service-data/<backend>).")
    var dir: String?

    @Flag(help: "Acknowledge writes before they are on disk (both backends sync by default).")
    var buffered = false

    var directory: URL {
        URL(filePath: dir ?? "activity-service-data/\(backend.rawValue)", directoryHint: .isDirectory).standardizedFileURL
    }
}

extension BackendKind: ExpressibleByArgument {}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the service until SIGTERM or SIGINT (then close the store: final sync, snapshot).")

    @OptionGroup var options: BackendOptions

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on.")
    var port = 8080

    @Option(help: "The log level (trace, debug, info, notice, warning, error, critical).")
    var logLevel: Logger.Level = .info

    func run() async throws {
        var logger = Logger(label: "ActivityService")
        logger.logLevel = logLevel
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let backend = try options.backend.open(in: options.directory, synced: !options.buffered, logger: logger)
        logger.notice("serving", metadata: ["backend": "\(backend.name)", "directory": "\(options.directory.path)", "port": "\(port)"])
        let app = buildApplication(
            backend: backend, configuration: ApplicationConfiguration(address: .hostname(host, port: port)),
            registry: registry, logger: logger)
        try await app.runService()
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

struct Seed: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fill a backend with a generated history (the load test's data; the same for both backends).")

    @OptionGroup var options: BackendOptions

    @Option(help: "How many activities to generate (two years of them).")
    var activities = 100_000

    @Option(help: "The generator's seed.")
    var seed: UInt64 = 1

    func run() async throws {
        let logger = Logger(label: "ActivityService.seed")
        let backend = try options.backend.open(in: options.directory, synced: true, logger: logger)
        let started = ContinuousClock.now
        var chunk: [ActivityOperation] = []
        chunk.reserveCapacity(10_000)
        for operation in ActivityHistoryGenerator(seed: seed, activityCount: activities) {
            chunk.append(operation)
            if chunk.count == 10_000 {
                try await backend.apply(chunk)
                chunk.removeAll(keepingCapacity: true)
            }
        }
        if !chunk.isEmpty { try await backend.apply(chunk) }
        print("seeded \(activities) activities into \(options.directory.path) (\(backend.name)) in \(ContinuousClock.now - started)")
        try await backend.close()
    }
}
