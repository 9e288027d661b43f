import EventLog
import KernelPrimitives

/// Wakes consumers when the store commits: it holds the store's folded position (advanced
/// where the store advances its own, under the commit lock) and the tasks waiting for it to
/// pass a position. It carries no events: a consumer reads them from the log, so a slow
/// consumer costs the store one waiter, never a buffer.
final class CommitSignal: Sendable {
    private struct Waiter {
        var past: LogPosition
        var continuation: CheckedContinuation<Bool, Never>
    }
    private struct State {
        var position: LogPosition = 0
        var closed = false
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiter: UInt64 = 0
    }
    private let state = Locked(State())

    /// Records that everything below `position` is committed, and wakes the waiters it satisfies.
    func advance(to position: LogPosition) {
        let ready = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            guard position > state.position else { return [] }
            state.position = position
            // Every commit comes here: with no consumer waiting it allocates nothing.
            guard !state.waiters.isEmpty else { return [] }
            let due = state.waiters.filter { $0.value.past < position }
            for key in due.keys { state.waiters.removeValue(forKey: key) }
            return due.values.map(\.continuation)
        }
        for continuation in ready { continuation.resume(returning: true) }
    }

    /// The store closed: every waiter, present and future, is told so.
    func close() {
        let all = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.closed = true
            defer { state.waiters.removeAll() }
            return state.waiters.values.map(\.continuation)
        }
        for continuation in all { continuation.resume(returning: false) }
    }

    /// Waits until an event at `position` is committed, for at most `timeout` (`nil`: no limit).
    /// - Returns: `true` when it is; `false` when the time passed first, the store closed or the
    ///   task was cancelled.
    func wait(forCommitOf position: LogPosition, timeout: Duration? = nil) async -> Bool {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        // One sleeping task per timed wait, which gives the waiter up when it wakes; it is
        // cancelled as soon as the wait ends some other way.
        var timer: Task<Void, Never>?
        let answer = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let answer: Bool? = state.withLock { state in
                    if state.closed { return false }
                    if state.position > position { return true }
                    if Task.isCancelled { return false }
                    state.waiters[id] = Waiter(past: position, continuation: continuation)
                    return nil
                }
                if let answer {
                    continuation.resume(returning: answer)
                } else if let timeout {
                    timer = Task { [self] in
                        guard (try? await Task.sleep(for: timeout)) != nil else { return }
                        giveUp(id)
                    }
                }
            }
        } onCancel: {
            giveUp(id)
        }
        timer?.cancel()
        return answer
    }

    /// Ends waiter `id`'s wait with `false`, if it still waits.
    private func giveUp(_ id: UInt64) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.continuation.resume(returning: false)
    }

    /// Tasks waiting now (for tests).
    var waiterCount: Int { state.withLock { $0.waiters.count } }
}
