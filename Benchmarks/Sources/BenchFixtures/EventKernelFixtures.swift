// EventKernel stores for the benchmarks, built once and cached on disk.
import Activities
import ActivityWorkload
import EventKernel
import EventLog
import Foundation

public enum EventKernelFixtures {
    /// Opens (or creates) a repository; snapshots are never written, so cached fixtures stay as built.
    /// `instrumentation`: the `*.MetricsNoBackend` benchmarks' `EventKernelMetrics`.
    public static func open(_ url: URL, durability: DurabilityPolicy = .buffered, preallocate: Bool = false,
                            snapshots: SnapshotPolicy = .never,
                            instrumentation: (any StoreInstrumentation)? = nil) throws -> EventSourcedActivityRepository {
        var log = SegmentedLog.Configuration(durability: durability, preallocate: preallocate)
        // EVENTKERNEL_PROBE_PREALLOCATION_STEP (bytes) sets the reservation step, to measure it.
        if let step = ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_PREALLOCATION_STEP"].flatMap(Int.init) {
            log.preallocationStep = step
        }
        var configuration = EventStore.Configuration(log: log, snapshots: snapshots)
        configuration.instrumentation = instrumentation
        return try EventSourcedActivityRepository.open(at: url, configuration: configuration)
    }

    /// The store holding the seeded history of `n` activities, then `growth - 1` rounds of one
    /// update per live activity (so `growth: 5` has the same live activities and about five
    /// times the events), with a snapshot written at the end. Built once, cached on disk.
    /// Built without segment preallocation so that its size on disk is its data.
    public static func store(n: Int = BenchEnv.n, growth: Int = 1) async throws -> URL {
        let url = BenchEnv.cacheDirectory.appending(path: "ek-v\(BenchEnv.fixtureVersion)-n\(n)-g\(growth)")
        if FileManager.default.fileExists(atPath: url.path) { return url }
        let building = BenchEnv.cacheDirectory.appending(path: "building-\(getpid())-\(url.lastPathComponent)")
        try? FileManager.default.removeItem(at: building)
        let started = ContinuousClock.now
        let repository = try open(building, durability: .buffered, preallocate: false)
        var batch: [ActivityEvent] = []
        batch.reserveCapacity(1_000)
        for op in Workload.history(n) {
            batch.append(op.event)
            if batch.count == 1_000 { try await repository.apply(batch); batch.removeAll(keepingCapacity: true) }
        }
        if !batch.isEmpty { try await repository.apply(batch); batch.removeAll(keepingCapacity: true) }
        if growth > 1 {
            let live = try repository.activities(matching: ActivityQuery(sortOrder: .oldestFirst))
            for round in 1..<growth {
                for var model in live {
                    if let end = model.endDate { model.endDate = end.addingTimeInterval(round % 2 == 1 ? 1 : 0) }
                    batch.append(.updated(model))
                    if batch.count == 1_000 { try await repository.apply(batch); batch.removeAll(keepingCapacity: true) }
                }
            }
            if !batch.isEmpty { try await repository.apply(batch) }
        }
        try await repository.store.writeSnapshots()
        try await repository.close()
        try FileManager.default.moveItem(at: building, to: url)
        FileHandle.standardError.write("fixture \(url.lastPathComponent) built in \(ContinuousClock.now - started)\n".data(using: .utf8)!)
        return url
    }

    /// The same log as ``store(n:growth:)`` without its snapshots: opening it replays everything.
    public static func replayOnlyStore(n: Int = BenchEnv.n, growth: Int = 1) async throws -> URL {
        let source = try await store(n: n, growth: growth)
        let url = BenchEnv.cacheDirectory.appending(path: "\(source.lastPathComponent)-nosnap")
        if FileManager.default.fileExists(atPath: url.path) { return url }
        let building = BenchEnv.cacheDirectory.appending(path: "building-\(getpid())-\(url.lastPathComponent)")
        try copyTree(source, to: building, skipping: ["snapshots"])
        try FileManager.default.moveItem(at: building, to: url)
        return url
    }

    /// Bytes of the store's log files only (segments and their index side files), without snapshots
    /// and the lock file.
    public static func logBytes(_ url: URL) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return names.filter { $0 != "snapshots" }.reduce(0) { $0 + diskBytes(url.appending(path: $1)) }
    }
}
