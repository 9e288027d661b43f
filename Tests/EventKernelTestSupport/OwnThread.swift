import Foundation
import Synchronization

/// Runs `body` on a thread of its own and returns what it returns: for work that blocks (waiting
/// for a child process, scanning files, a call that may deadlock), which on one of Swift's
/// cooperative threads (as many as cores) would starve every other test's tasks meanwhile.
/// - Throws: What `body` throws.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

/// Runs `body` on a thread of its own and waits at most `seconds` for it: `nil` when it has not
/// returned by then, so that a call that loops or deadlocks fails its test instead of hanging
/// the run (the thread is then left behind).
/// - Throws: What `body` throws, or `CancellationError`.
public func finishing<T: Sendable>(within seconds: Int, _ body: @escaping @Sendable () throws -> T) async throws -> T? {
    let outcome = Mutex<Result<T, any Error>?>(nil)
    Thread.detachNewThread { let result = Result { try body() }; outcome.withLock { $0 = result } }
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if let result = outcome.withLock({ $0 }) { return try result.get() }
        try await Task.sleep(for: .milliseconds(5))
    }
    // Once more after the deadline: a busy machine may resume this task only after it, when
    // the call has long returned (a sanitizer run starved the pool for more than 20 s).
    if let result = outcome.withLock({ $0 }) { return try result.get() }
    return nil
}
