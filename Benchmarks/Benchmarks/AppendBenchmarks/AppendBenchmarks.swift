// Appends: EventKernel's event-sourced repository against SQLite (GRDB, WAL) and the naive peers.
// Every iteration appends 1,000 activities (throughput counts activities; allocation counts are
// per 1,000 appended activities). Stores start empty and grow over the iterations.
import Activities
import Benchmark
import BenchFixtures
import EventKernel
import EventKernelMetrics
import EventLog
import Foundation

nonisolated(unsafe) private var scratchDirectories: [URL] = []

private func scratch(_ label: String) -> URL {
    let url = BenchEnv.scratch(label)
    scratchDirectories.append(url)
    return url
}

private let stream = AddStream()

private let ekBuffered = Once { try EventKernelFixtures.open(scratch("append-buffered"), durability: .buffered, preallocate: true) }
private let ekSynced = Once { try EventKernelFixtures.open(scratch("append-synced"), durability: .synced, preallocate: true) }
/// The store with swift-metrics instrumentation and no backend bootstrapped (no-op handlers).
private let ekSyncedMetrics = Once {
    try EventKernelFixtures.open(scratch("append-synced-metrics"), durability: .synced, preallocate: true,
                                 instrumentation: EventKernelMetrics())
}
private let grdbNormal = Once {
    let dir = scratch("append-grdb-normal")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return try GRDBActivityStore(path: dir.appending(path: "db.sqlite").path, synchronous: .normal)
}
private let grdbFull = Once {
    let dir = scratch("append-grdb-full")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return try GRDBActivityStore(path: dir.appending(path: "db.sqlite").path, synchronous: .full)
}
private let jsonRepository = Once {
    let dir = scratch("append-json")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let url = dir.appending(path: "activities.json")
    try FileManager.default.copyItem(at: try JSONFileRepository.fixture(), to: url)
    return try JSONFileRepository(url: url)
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.teardown = {
        for url in scratchDirectories { try? FileManager.default.removeItem(at: url) }
    }
    interleavedBenchmarks()
    let perIteration = 1_000
    let config = BenchConfig.configuration(scalingFactor: .kilo)

    // MARK: Buffered, in batches (EventKernel: one apply per batch, GRDB: one transaction per batch)

    for batch in [100, 1_000] {
        Benchmark("Append.Buffered.Batch\(batch).EventKernel", configuration: config) { benchmark in
            let repository = try await ekBuffered.get()
            let models = stream.next(perIteration)
            let batches = stride(from: 0, to: models.count, by: batch).map { models[$0..<min($0 + batch, models.count)].map(ActivityEvent.added) }
            benchmark.startMeasurement()
            for events in batches { try await repository.apply(events) }
            benchmark.stopMeasurement()
        }

        Benchmark("Append.Buffered.Batch\(batch).GRDB", configuration: config) { benchmark in
            let store = try await grdbNormal.get()
            let models = stream.next(perIteration)
            let batches = stride(from: 0, to: models.count, by: batch).map { Array(models[$0..<min($0 + batch, models.count)]) }
            benchmark.startMeasurement()
            for rows in batches { try await store.insert(rows) }
            benchmark.stopMeasurement()
        }

        Benchmark("Append.Buffered.Batch\(batch).NaiveArray", configuration: config) { benchmark in
            let repository = NaiveArrayRepository()
            let models = stream.next(perIteration)
            let batches = stride(from: 0, to: models.count, by: batch).map { Array(models[$0..<min($0 + batch, models.count)]) }
            benchmark.startMeasurement()
            for rows in batches { repository.add(contentsOf: rows) }
            benchmark.stopMeasurement()
            blackHole(repository.activities.count)
        }

        Benchmark("Append.Buffered.Batch\(batch).JSONFile",
                  configuration: BenchConfig.configuration(scalingFactor: .kilo, maxIterations: 5)) { benchmark in
            let repository = try await jsonRepository.get()
            let models = stream.next(perIteration)
            let batches = stride(from: 0, to: models.count, by: batch).map { Array(models[$0..<min($0 + batch, models.count)]) }
            benchmark.startMeasurement()
            for rows in batches { try repository.add(contentsOf: rows) }
            benchmark.stopMeasurement()
        }
    }

    // MARK: Synced, one activity per call

    Benchmark("Append.Synced.OneTask.EventKernel", configuration: config) { benchmark in
        let repository = try await ekSynced.get()
        let models = stream.next(perIteration)
        benchmark.startMeasurement()
        for model in models { try await repository.add(model) }
        benchmark.stopMeasurement()
    }

    // EventKernelMetrics installed, no metrics backend: what an unobserved service pays.
    Benchmark("Append.Synced.OneTask.EventKernel.MetricsNoBackend",
              configuration: config) { benchmark in
        let repository = try await ekSyncedMetrics.get()
        let models = stream.next(perIteration)
        benchmark.startMeasurement()
        for model in models { try await repository.add(model) }
        benchmark.stopMeasurement()
    }

    Benchmark("Append.Synced.OneTask.GRDB", configuration: config) { benchmark in
        let store = try await grdbFull.get()
        let models = stream.next(perIteration)
        benchmark.startMeasurement()
        for model in models { try await store.insert(model) }
        benchmark.stopMeasurement()
    }

    Benchmark("Append.Synced.64Tasks.EventKernel", configuration: config) { benchmark in
        let repository = try await ekSynced.get()
        let models = stream.next(perIteration)
        benchmark.startMeasurement()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<64 {
                group.addTask {
                    for i in stride(from: t, to: models.count, by: 64) { try await repository.add(models[i]) }
                }
            }
            try await group.waitForAll()
        }
        benchmark.stopMeasurement()
    }

    Benchmark("Append.Synced.64Tasks.GRDB", configuration: config) { benchmark in
        let store = try await grdbFull.get()
        let models = stream.next(perIteration)
        benchmark.startMeasurement()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<64 {
                group.addTask {
                    for i in stride(from: t, to: models.count, by: 64) { try await store.insert(models[i]) }
                }
            }
            try await group.waitForAll()
        }
        benchmark.stopMeasurement()
    }
}

// MARK: Synced, interleaved with the peer and the floor (see BenchFixtures' Interleaved)

private let ekInterleaved = Once { try EventKernelFixtures.open(scratch("append-synced-interleaved"), durability: .synced, preallocate: true) }
private let grdbInterleaved = Once {
    let dir = scratch("append-grdb-interleaved")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return try GRDBActivityStore(path: dir.appending(path: "db.sqlite").path, synchronous: .full)
}
private let floorFile = Once { try SyncFloor(directory: scratch("append-floor-interleaved")) }

let interleavedBenchmarks: @Sendable () -> Void = {
    let configuration = Interleaved.configuration()

    Benchmark("Append.Synced.Interleaved.OneTask", configuration: configuration) { benchmark in
        let repository = try await ekInterleaved.get()
        let store = try await grdbInterleaved.get()
        try await Interleaved.runOneTask(benchmark, floor: try await floorFile.get(),
            eventKernel: { slice in for model in stream.next(slice) { try await repository.add(model) } },
            peer: { slice in for model in stream.next(slice) { try await store.insert(model) } })
    }

    Benchmark("Append.Synced.Interleaved.64Tasks", configuration: configuration) { benchmark in
        let repository = try await ekInterleaved.get()
        let store = try await grdbInterleaved.get()
        let slice = 1_000
        func fanOut(_ insert: @escaping @Sendable (ActivityModel) async throws -> Void) async throws {
            let models = stream.next(slice)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for t in 0..<64 {
                    group.addTask { for i in stride(from: t, to: models.count, by: 64) { try await insert(models[i]) } }
                }
                try await group.waitForAll()
            }
        }
        try await Interleaved.run(benchmark, rounds: BenchConfig.smoke ? 1 : 4, perSlice: slice,
            eventKernel: { try await fanOut { try await repository.add($0) } },
            peer: { try await fanOut { try await store.insert($0) } },
            floor: nil)
    }
}
