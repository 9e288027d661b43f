// The shared workload: ActivityHistoryGenerator's operations, as events and as models.
import Activities
import ActivityWorkload
import Foundation
import Synchronization

extension ActivityOperation {
    /// The ActivityEvent that records this operation.
    public var event: ActivityEvent {
        switch self {
        case .add(let m): .added(m)
        case .update(let m): .updated(m)
        case .end(let id, let at): .ended(id: id, at: at)
        case .delete(let id): .deleted(id: id)
        }
    }
}

public enum Workload {
    /// The seeded history of `count` activities (2 years ending 2026-01-01).
    public static func history(_ count: Int, seed: UInt64 = BenchEnv.seed) -> ActivityHistoryGenerator {
        ActivityHistoryGenerator(seed: seed, activityCount: count)
    }

    /// The live activities after folding the history, in generation order (dictionary fold).
    public static func liveActivities(_ count: Int, seed: UInt64 = BenchEnv.seed) -> [ActivityModel] {
        var order: [UUID] = []
        order.reserveCapacity(count)
        var byID: [UUID: ActivityModel] = [:]
        byID.reserveCapacity(count)
        for op in history(count, seed: seed) {
            switch op {
            case .add(let m): byID[m.id] = m; order.append(m.id)
            case .update(let m): byID[m.id] = m
            case .end(let id, let at): byID[id]?.endDate = at
            case .delete(let id): byID[id] = nil
            }
        }
        return order.compactMap { byID[$0] }
    }
}

/// An endless, thread-safe stream of freshly added activities from the seeded generator,
/// so that appends across iterations never repeat an id. Equal seeds give equal streams.
public final class AddStream: Sendable {
    private let state: Mutex<ActivityHistoryGenerator.Iterator>

    public init(seed: UInt64 = 7) {
        state = Mutex(ActivityHistoryGenerator(seed: seed, activityCount: 100_000_000).makeIterator())
    }

    /// The next `k` added activities (corrections, ends and deletes are skipped).
    public func next(_ k: Int) -> [ActivityModel] {
        state.withLock { it in
            var out: [ActivityModel] = []
            out.reserveCapacity(k)
            while out.count < k, let op = it.next() {
                if case .add(var m) = op {
                    if m.endDate == nil { m.endDate = m.startDate.addingTimeInterval(600) }
                    out.append(m)
                }
            }
            return out
        }
    }
}
