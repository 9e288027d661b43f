#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a `pthread_mutex_t`: the lock of every shared state in EventKernel.
///
/// Used instead of the standard library's `Synchronization.Mutex` because ThreadSanitizer
/// understands pthread mutexes: `Mutex` on Linux synchronizes through futexes inside the
/// (uninstrumented) standard library, which ThreadSanitizer cannot see, so every access it
/// guards was reported as a race and the sanitizer run in CI would be noise. The cost is the
/// same uncontended (one atomic operation each way).
///
/// `@usableFromInline` so that `withLock` reaches the other modules inlined and specialised for
/// their value (see ``Varint``: Swift 6.3.1 does not serialise the inlinable members of a plain
/// `package` type, and every caller outside this module ran the generic `withLock`).
@usableFromInline
package final class Locked<Value>: @unchecked Sendable {
    // The mutex must not move in memory: it lives in its own allocation.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    // Inlinable access, so that callers specialize for their value (no generic metadata or
    // value-witness calls on every lock).
    @usableFromInline var value: Value

    /// Creates a lock around `value`.
    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    /// - Complexity: O(1) plus `body`. Do not call back into the same lock from `body`.
    @inlinable
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        lock()
        defer { unlock() }
        return try modify(body)
    }

    /// Whether some thread, the caller's included, holds the lock at this instant: for checks
    /// that a code path runs outside it (a domain's closure must never run under a store's
    /// lock), not for deciding anything (the answer may be stale at once).
    package var isHeld: Bool {
        guard pthread_mutex_trylock(mutex) == 0 else { return true }
        pthread_mutex_unlock(mutex)
        return false
    }

    @usableFromInline func lock() { pthread_mutex_lock(mutex) }
    @usableFromInline func unlock() { pthread_mutex_unlock(mutex) }
    @inlinable func modify<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R { try body(&value) }
}
