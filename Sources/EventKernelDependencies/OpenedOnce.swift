import Synchronization

/// A value made on first use by an async, throwing function, then shared: the repositories
/// and stores behind dependency values open when a feature first calls them, not when the
/// dependency is declared (a `liveValue` cannot throw or await).
///
/// Concurrent first callers share one attempt. A failed attempt is forgotten, so a later call
/// tries again (the store was locked by another process that has since exited) and reports its
/// own error.
package final class OpenedOnce<Value: Sendable>: Sendable {
    private let attempt = Mutex<Task<Value, any Error>?>(nil)
    private let make: @Sendable () async throws -> Value

    /// - Parameter make: Makes the value; runs at most once at a time.
    package init(_ make: @escaping @Sendable () async throws -> Value) {
        self.make = make
    }

    /// The value, made now if no attempt succeeded yet.
    /// - Throws: What `make` threw, for the attempt this call waited on.
    package func value() async throws -> Value {
        let task = attempt.withLock { attempt in
            if let attempt { return attempt }
            let make = self.make
            let started = Task { try await make() }
            attempt = started
            return started
        }
        do {
            return try await task.value
        } catch {
            attempt.withLock { if $0 == task { $0 = nil } }
            throw error
        }
    }

    /// The value if an attempt has succeeded, without starting one.
    package func valueIfMade() async -> Value? {
        guard let task = attempt.withLock({ $0 }) else { return nil }
        return try? await task.value
    }
}
