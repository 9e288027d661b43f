#if PostgreSQL
import EventLog
import KernelPrimitives

/// Wakes one waiting task: rings coalesce (one ring or many before the wait, one wake-up),
/// and a ring with no one waiting is kept for the next wait. The log's committer and follower
/// each wait on one, so an appender or a notification never blocks to hand over work.
final class Doorbell: Sendable {
    private struct State {
        var rung = false
        var closed = false
        var waiter: CheckedContinuation<Bool, Never>?
    }

    private let state = Locked(State())

    /// Wakes the waiter, or the next one to wait.
    func ring() {
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard let waiter = state.waiter else {
                state.rung = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: true)
    }

    /// Ends waiting: the waiter, and every later wait, returns `false`.
    func close() {
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            state.closed = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: false)
    }

    /// Waits for a ring. One waiter at a time.
    /// - Returns: `true` when rung, `false` once closed (a ring before the close still
    ///   returns `true` once).
    func wait() async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let now = state.withLock { state -> Bool? in
                if state.rung {
                    state.rung = false
                    return true
                }
                if state.closed { return false }
                precondition(state.waiter == nil, "a Doorbell has one waiter")
                state.waiter = continuation
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }
}
#endif
