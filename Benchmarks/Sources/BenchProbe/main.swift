// A plain executable for profiling one EventKernel path outside the benchmark harness
// (perf record / valgrind --tool=callgrind). Usage:
//   BenchProbe append-buffered [count]   apply() in batches of 1,000, buffered
//   BenchProbe append-synced [count]     add() one per call, synced, one task
//   BenchProbe open <directory>          open a store (snapshot + tail replay) and close it
//   BenchProbe first-write <directory>   open a copy of a store and time its first adds
import Activities
import BenchFixtures
import EventKernel
import EventLog
import Foundation

let arguments = CommandLine.arguments
let mode = arguments.count > 1 ? arguments[1] : "append-buffered"
let count = arguments.count > 2 ? Int(arguments[2]) ?? 100_000 : 100_000
/// EVENTKERNEL_PROBE_PREALLOCATE=0 turns segment preallocation off (default on, as the library).
let preallocate = ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_PREALLOCATE"] != "0"

func run() async throws {
    switch mode {
    case "append-buffered", "append-synced":
        let synced = mode == "append-synced"
        let url = BenchEnv.scratch("probe")
        defer { try? FileManager.default.removeItem(at: url) }
        let repository = try EventKernelFixtures.open(url, durability: synced ? .synced : .buffered, preallocate: preallocate)
        let models = AddStream().next(count)
        let started = ContinuousClock.now
        if synced {
            for m in models { try await repository.add(m) }
        } else {
            for start in stride(from: 0, to: models.count, by: 1_000) {
                try await repository.apply(models[start..<min(start + 1_000, models.count)].map(ActivityEvent.added))
            }
        }
        let elapsed = ContinuousClock.now - started
        print("\(mode): \(count) activities in \(elapsed), \(Double(elapsed.components.attoseconds / 1_000_000_000 + elapsed.components.seconds * 1_000_000_000) / Double(count)) ns per activity")
        try await repository.close()
    case "open":
        let url = URL(filePath: arguments[2])
        let started = ContinuousClock.now
        let repository = try EventKernelFixtures.open(url)
        print("open: \(repository.count) activities in \(ContinuousClock.now - started)")
        try await repository.close()
    case "first-write":
        // Copies the store, opens it, and times the first few single adds (buffered).
        let copy = BenchEnv.scratch("probe-first-write")
        defer { try? FileManager.default.removeItem(at: copy) }
        try copyTree(URL(filePath: arguments[2]), to: copy)
        let repository = try EventKernelFixtures.open(copy)
        for model in AddStream(seed: 5).next(4) {
            let started = ContinuousClock.now
            try await repository.add(model)
            print("add: \(ContinuousClock.now - started)")
        }
        try await repository.close()
    default:
        print("unknown mode \(mode)")
    }
}

try await run()
