// Startup: opening a store of N activities from its snapshot, by full replay of its log, and
// from its snapshot after the history grew to five times the events (same live activities).
// The figure is the wall-clock time of open (until the first query can be answered).
import Activities
import Benchmark
import BenchFixtures
import EventKernel
import Foundation
import GRDB

let benchmarks: @Sendable () -> Void = {
    let config = BenchConfig.configuration(scalingFactor: .one, maxDuration: .seconds(10), maxIterations: 10)
    let firstQuery = ActivityQuery(afterDate: BenchEnv.weekStart, beforeDate: BenchEnv.historyEnd, limit: 50)

    func eventKernel(_ name: String, maxIterations: Int = 10, _ url: @escaping @Sendable () async throws -> URL) {
        Benchmark(name, configuration: BenchConfig.configuration(scalingFactor: .one, maxDuration: .seconds(10), maxIterations: maxIterations)) { benchmark in
            let directory = try await url()
            benchmark.startMeasurement()
            let repository = try EventKernelFixtures.open(directory)
            blackHole(try repository.activities(matching: firstQuery))
            benchmark.stopMeasurement()
            try await repository.close()
        }
    }

    eventKernel("Startup.Snapshot.EventKernel") { try await EventKernelFixtures.store() }
    eventKernel("Startup.FullReplay.EventKernel") { try await EventKernelFixtures.replayOnlyStore() }
    eventKernel("Startup.Snapshot.Grown5x.EventKernel") { try await EventKernelFixtures.store(growth: 5) }
    eventKernel("Startup.FullReplay.Grown5x.EventKernel", maxIterations: 3) { try await EventKernelFixtures.replayOnlyStore(growth: 5) }

    // SQLite opens lazily: open the pool and answer the first query.
    Benchmark("Startup.GRDB", configuration: config) { benchmark in
        let path = try GRDBFixtures.database()
        benchmark.startMeasurement()
        let store = try GRDBActivityStore(path: path, synchronous: .normal)
        blackHole(try store.records(firstQuery))
        benchmark.stopMeasurement()
        try store.pool.close()
    }

    // The JSON file is read and decoded entirely (at the smaller JSON N).
    Benchmark("Startup.JSONFile", configuration: config) { benchmark in
        let url = try JSONFileRepository.fixture()
        benchmark.startMeasurement()
        let repository = try JSONFileRepository(url: url)
        blackHole(repository.memory.fetch(firstQuery))
        benchmark.stopMeasurement()
    }

    consumerBenchmarks()
}
