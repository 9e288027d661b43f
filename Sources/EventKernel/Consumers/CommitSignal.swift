import EventLog
import KernelPrimitives

/// Wakes consumers when the store commits: it holds the store's folded position (advanced
/// where the store advances its own, under the commit lock) and the tasks waiting for it to
/// pass a position. It carries no events: a consumer reads them from the log, so a slow
/// consumer costs the store one waiter, never a buffer. A consumer's run is also woken by its
/// own key (``nudge(_:)``) when something no commit announces asks it to look again: a reset,
/// a retry request.
final class CommitSignal: Sendable {
    /// How a ``wait(forCommitOf:timeout:nudgedAs:)`` ended.
    enum Outcome: Equatable {
        /// An event at the position is committed.
        case committed
        /// The waiter's own key was nudged (``nudge(_:)``): its consumer has something to look
        /// at (a reset, a retry request) that no commit would announce.
        case nudged
        /// The time passed first, the store closed or the task was cancelled.
        case ended
    }
    private struct Waiter {
        var past: LogPosition
        var key: UInt64?
        var continuation: CheckedContinuation<Outcome, Never>
    }
    private struct State {
        var position: LogPosition = 0
        var closed = false
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiter: UInt64 = 0
        /// Keys nudged while none of their waiters waited: the next wait under the key ends at
        /// once, so a nudge that comes just before its run waits is not lost.
        var nudged: Set<UInt64> = []
        /// Keys made and not forgotten: a nudge of another (its run ended meanwhile) is dropped.
        var live: Set<UInt64> = []
    }
    private let state = Locked(State())

    /// A key no other waiter has, for ``wait(forCommitOf:timeout:nudgedAs:)`` and ``nudge(_:)``,
    /// live until ``forget(_:)``.
    func makeKey() -> UInt64 {
        state.withLock { state in
            state.nextWaiter += 1
            state.live.insert(state.nextWaiter)
            return state.nextWaiter
        }
    }

    /// Records that everything below `position` is committed, and wakes the waiters it satisfies.
    func advance(to position: LogPosition) {
        let ready = state.withLock { state -> [CheckedContinuation<Outcome, Never>] in
            guard position > state.position else { return [] }
            state.position = position
            // Every commit comes here: with no consumer waiting it allocates nothing.
            guard !state.waiters.isEmpty else { return [] }
            let due = state.waiters.filter { $0.value.past < position }
            for key in due.keys { state.waiters.removeValue(forKey: key) }
            return due.values.map(\.continuation)
        }
        for continuation in ready { continuation.resume(returning: .committed) }
    }

    /// Wakes the waiters under `key` with ``Outcome/nudged``, or, when none waits, the next wait
    /// under it. Nothing else is woken: a run waiting out its commit interval keeps its timing.
    func nudge(_ key: UInt64) {
        let woken = state.withLock { state -> [CheckedContinuation<Outcome, Never>] in
            let waiting = state.waiters.filter { $0.value.key == key }
            guard !waiting.isEmpty else {
                if !state.closed, state.live.contains(key) { state.nudged.insert(key) }
                return []
            }
            for id in waiting.keys { state.waiters.removeValue(forKey: id) }
            return waiting.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume(returning: .nudged) }
    }

    /// Ends `key`: a nudge no wait took is dropped, and later ones are (its consumer is gone).
    func forget(_ key: UInt64) {
        state.withLock { state in
            state.nudged.remove(key)
            state.live.remove(key)
        }
    }

    /// The store closed: every waiter, present and future, is told so.
    func close() {
        let all = state.withLock { state -> [CheckedContinuation<Outcome, Never>] in
            state.closed = true
            state.nudged.removeAll()
            defer { state.waiters.removeAll() }
            return state.waiters.values.map(\.continuation)
        }
        for continuation in all { continuation.resume(returning: .ended) }
    }

    /// Waits until an event at `position` is committed, for at most `timeout` (`nil`: no limit),
    /// or until `key` is nudged.
    /// - Parameters:
    ///   - position: The position whose commit ends the wait.
    ///   - timeout: The longest wait; `nil` for none.
    ///   - key: A key from ``makeKey()`` that ``nudge(_:)`` wakes this wait by; `nil` for none.
    /// - Returns: ``Outcome/committed`` when the event is committed (also when it was before the
    ///   call; a nudge pending then is kept for the next wait), ``Outcome/nudged``, or
    ///   ``Outcome/ended`` when the time passed first, the store closed or the task was cancelled.
    func wait(forCommitOf position: LogPosition, timeout: Duration? = nil, nudgedAs key: UInt64? = nil) async -> Outcome {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        // One sleeping task per timed wait, which gives the waiter up when it wakes; it is
        // cancelled as soon as the wait ends some other way.
        var timer: Task<Void, Never>?
        let answer = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let answer: Outcome? = state.withLock { state in
                    if state.closed { return .ended }
                    if state.position > position { return .committed }
                    if let key, state.nudged.remove(key) != nil { return .nudged }
                    if Task.isCancelled { return .ended }
                    state.waiters[id] = Waiter(past: position, key: key, continuation: continuation)
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

    /// Ends waiter `id`'s wait with ``Outcome/ended``, if it still waits.
    private func giveUp(_ id: UInt64) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.continuation.resume(returning: .ended)
    }

    /// Tasks waiting now (for tests).
    var waiterCount: Int { state.withLock { $0.waiters.count } }

    /// Nudges no wait has taken yet (for tests).
    var pendingNudgeCount: Int { state.withLock { $0.nudged.count } }
}
