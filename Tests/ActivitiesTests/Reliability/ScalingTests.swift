import Activities
import ActivityWorkload
import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// Every open path must be linear in history (a store of 2.5M activities once took over ten
/// minutes to reopen: its version table was restored into a table too small, in probe order).
/// This is the CI guard: opening from snapshots costs about the same per activity at N and 4N
/// (at most 3x, where a quadratic open would cost 4x).
/// The figures at 1M...10M are measured by `make bench` / the demo (Docs/Benchmarks.md).
@Suite("Scaling: open from snapshots is linear", .serialized)
struct ScalingTests {
    static func buildStore(_ directory: URL, activities: Int) async throws {
        var configuration = EventStore.Configuration()
        configuration.log.durability = .buffered
        let repository = try EventSourcedActivityRepository.open(at: directory, configuration: configuration)
        var batch: [ActivityEvent] = []
        batch.reserveCapacity(1_000)
        for operation in ActivityHistoryGenerator(seed: 7, activityCount: activities) {
            switch operation {
            case .add(let model): batch.append(.added(model))
            case .update(let model): batch.append(.updated(model))
            case .end(let id, let at): batch.append(.ended(id: id, at: at))
            case .delete(let id): batch.append(.deleted(id: id))
            }
            if batch.count == 1_000 {
                try await repository.apply(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { try await repository.apply(batch) }
        try await repository.close()  // snapshots on close
    }

    /// The cheapest of `runs` opens (from snapshots), per live activity, in nanoseconds of CPU
    /// time (every thread of the process): far steadier than wall time on a shared machine,
    /// where other processes' load came and went within one test.
    static func openCost(_ directory: URL, runs: Int) async throws -> Double {
        var best = Double.infinity
        var count = 0
        for _ in 0..<runs {
            let start = processCPUTime()
            let repository = try EventSourcedActivityRepository.openReadOnly(at: directory)
            let elapsed = processCPUTime() - start
            count = repository.count
            try await repository.close()
            best = min(best, Double(elapsed.components.attoseconds) / 1e9 + Double(elapsed.components.seconds) * 1e9)
        }
        return best / Double(max(1, count))
    }

    @Test func openFromSnapshotsCostsTheSamePerActivityAtFourTimesTheSize() async throws {
        let small = testScale.pick(25_000, small: 5_000)
        let directory = TemporaryDirectory("ek-scaling")
        let a = directory.file("a"), b = directory.file("b")
        try await Self.buildStore(a, activities: small)
        try await Self.buildStore(b, activities: small * 4)
        let perActivitySmall = try await Self.openCost(a, runs: 3)
        let perActivityLarge = try await Self.openCost(b, runs: 3)
        print("open from snapshots: \(Int(perActivitySmall)) ns/activity at \(small), \(Int(perActivityLarge)) ns/activity at \(small * 4)")
        // A quadratic open costs 4x per activity at 4x the size; linear costs 1x. The bound
        // sits between, with room for a shared machine's noise (best of three opens each).
        #expect(perActivityLarge <= 3 * perActivitySmall,
                "open cost per activity grew \(perActivityLarge / perActivitySmall)x from \(small) to \(small * 4) activities")
    }
}
