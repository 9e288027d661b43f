import Activities
import ActivityWorkload
import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// Every open path must be linear in history (a store of 2.5M activities once took over ten
/// minutes to reopen: its version table was restored into a table too small, in probe order).
/// This is the CI guard: opening from snapshots costs about the same per activity at N and 4N.
/// The figures at 1M...10M are measured by `make bench` / the demo (Docs/Benchmarks.md).
@Suite("Scaling: open from snapshots is linear", .serialized)
struct ScalingTests {
    static func buildStore(_ directory: URL, activities: Int) async throws {
        var configuration = EventSourcedActivityRepository.Configuration()
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

    /// The fastest of `runs` opens (from snapshots), per live activity, in nanoseconds.
    static func openCost(_ directory: URL, runs: Int) async throws -> Double {
        var best = Double.infinity
        var count = 0
        for _ in 0..<runs {
            let clock = ContinuousClock()
            let start = clock.now
            let repository = try EventSourcedActivityRepository.openReadOnly(at: directory)
            let elapsed = clock.now - start
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
        #expect(perActivityLarge <= 2 * perActivitySmall,
                "open cost per activity grew \(perActivityLarge / perActivitySmall)x from \(small) to \(small * 4) activities")
    }
}
