// Scale-out: the event-sourced repository on a PostgreSQL log shared by instances
// (Docs/ScaleOut.md). Synced appends from 1 and 64 tasks on one instance and 64 tasks spread
// over three instances (three stores, each with its own log and connections, in this process),
// compared in `make bench` with the local log and GRDB FULL (AppendBenchmarks, same run); and
// the latency from a commit on one instance to `observe` yielding it on another.
//
// Needs EVENTKERNEL_POSTGRES_URL (`make bench` starts a private server through
// scripts/postgres.sh); without it no benchmark is registered and a notice says so. Each
// benchmark process appends into a fresh schema, dropped at teardown.
#if ScaleOut
import Activities
import Benchmark
import BenchFixtures
import EventKernel
import EventLog
import Foundation
import PostgresLog

private let url = ProcessInfo.processInfo.environment["EVENTKERNEL_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
private let schema = "ek_bench_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
private let stream = AddStream()

private func configuration() throws -> PostgresLog.Configuration {
    var configuration = try PostgresLog.Configuration(url: url!)
    configuration.schema = schema
    return configuration
}

/// `count` instances on the schema: each a store over its own PostgresLog.
private func instances(_ count: Int) async throws -> [EventSourcedActivityRepository] {
    var out: [EventSourcedActivityRepository] = []
    for _ in 0..<count {
        out.append(try EventSourcedActivityRepository(store: try await EventStore.open(postgres: try configuration(), snapshotPolicy: .never)))
    }
    return out
}

private let one = Once { try await instances(1)[0] }
private let three = Once { try await instances(3) }
private let pair = Once { try await instances(2) }
// The observation on instance B, iterated by one benchmark's iterations, one at a time.
nonisolated(unsafe) private var observed: AsyncStream<[ActivityModel]>.AsyncIterator?
nonisolated(unsafe) private var next = 0

/// Adds `models` from 64 tasks, spread round-robin over `repositories`.
private func add(_ models: [ActivityModel], from repositories: [EventSourcedActivityRepository]) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for t in 0..<64 {
            let repository = repositories[t % repositories.count]
            group.addTask {
                for i in stride(from: t, to: models.count, by: 64) { try await repository.add(models[i]) }
            }
        }
        try await group.waitForAll()
    }
}

let benchmarks: @Sendable () -> Void = {
    guard url != nil else {
        FileHandle.standardError.write(Data("ScaleOutBenchmarks: EVENTKERNEL_POSTGRES_URL is not set; no scale-out benchmark runs (make bench starts a private PostgreSQL server)\n".utf8))
        return
    }
    Benchmark.teardown = {
        guard let configuration = try? configuration() else { return }
        // How large the rounds of group commit were: the figure behind the appends' rows.
        if let log = try? await PostgresLog.open(configuration), let statistics = try? log.statistics(), statistics.transactions > 0 {
            FileHandle.standardError.write(Data("ScaleOutBenchmarks: \(statistics.events) events in \(statistics.transactions) append transactions (\(statistics.events / statistics.transactions) per transaction)\n".utf8))
            try? await log.close()
        }
        try? await PostgresLog.dropSchema(configuration)
    }
    let perIteration = 1_000
    let config = BenchConfig.configuration(scalingFactor: .kilo)

    Benchmark("ScaleOut.Synced.OneTask.Postgres", configuration: config) { benchmark in
        let repository = try await one.get()
        let models = stream.next(perIteration)
        benchmark.startMeasurement()
        for model in models { try await repository.add(model) }
        benchmark.stopMeasurement()
    }

    Benchmark("ScaleOut.Synced.64Tasks.Postgres", configuration: config) { benchmark in
        let repository = try await one.get()
        let models = stream.next(perIteration)
        benchmark.startMeasurement()
        try await add(models, from: [repository])
        benchmark.stopMeasurement()
    }

    Benchmark("ScaleOut.Synced.64Tasks.ThreeInstances.Postgres", configuration: config) { benchmark in
        let repositories = try await three.get()
        let models = stream.next(perIteration)
        benchmark.startMeasurement()
        try await add(models, from: repositories)
        benchmark.stopMeasurement()
    }

    // One iteration: an add on instance A, until B's observation of the newest activity yields
    // it. The time includes A's append (its commit): the latency from the commit alone is
    // at most this.
    Benchmark("ScaleOut.ObserveLatency.Postgres",
              configuration: BenchConfig.configuration(maxDuration: .seconds(10), maxIterations: 2_000, warmupIterations: 10)) { benchmark in
        let instances = try await pair.get()
        if observed == nil {
            observed = instances[1].observe(query: ActivityQuery(limit: 1, sortOrder: .newestFirst)).makeAsyncIterator()
            _ = await observed!.next()
        }
        next += 1
        let model = ActivityModel(startDate: Date(timeIntervalSince1970: 1_800_000_000 + Double(next)), type: .sleep)
        benchmark.startMeasurement()
        try await instances[0].add(model)
        while let result = await observed!.next(), result.first?.id != model.id {}
        benchmark.stopMeasurement()
    }
}
#else
import Benchmark
import Foundation

// Built without the ScaleOut trait (the CI smoke run): nothing to measure.
let benchmarks: @Sendable () -> Void = {
    FileHandle.standardError.write(Data("ScaleOutBenchmarks: built without the ScaleOut trait (make bench turns it on); no scale-out benchmark runs\n".utf8))
}
#endif
