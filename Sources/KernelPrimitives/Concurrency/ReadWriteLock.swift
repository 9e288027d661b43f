#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a readers-writer lock: any number of readers at once, or one writer.
///
/// Projections keep their state here so that queries from many tasks run in parallel; the
/// write lock is held only for the in-memory fold of committed events (microseconds), never
/// across I/O, so a query never waits on a write to disk or an `fsync`.
///
/// Package access, not public API: upper layers share it (and inline it into their public
/// `@inlinable` reads, hence `@usableFromInline`), users never see it.
@usableFromInline
package final class ReadWriteLock<Value: Sendable>: @unchecked Sendable {
    // The lock must not move in memory: it lives in its own allocation.
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>
    // Inlinable access, so that callers specialize for their value: through the generic entry
    // points a read of a projection's state copied (retained) the whole state per call.
    @usableFromInline var value: Value

    /// Creates a lock around `value`.
    @usableFromInline
    package init(_ value: Value) {
        self.value = value
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        precondition(pthread_rwlock_init(lock, nil) == 0, "pthread_rwlock_init failed")
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    /// Runs `body` with shared access; other readers may run at the same time.
    @inlinable
    package func withReadLock<R>(_ body: (borrowing Value) throws -> R) rethrows -> R {
        lockForReading()
        defer { unlock() }
        return try readValue(body)
    }

    /// Runs `body` with exclusive access.
    @inlinable
    package func withWriteLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lockForWriting()
        defer { unlock() }
        return try modifyValue(body)
    }

    @usableFromInline func lockForReading() { pthread_rwlock_rdlock(lock) }
    @usableFromInline func lockForWriting() { pthread_rwlock_wrlock(lock) }
    @usableFromInline func unlock() { pthread_rwlock_unlock(lock) }
    @inlinable func readValue<R>(_ body: (borrowing Value) throws -> R) rethrows -> R { try body(value) }
    @inlinable func modifyValue<R>(_ body: (inout Value) throws -> R) rethrows -> R { try body(&value) }
}
