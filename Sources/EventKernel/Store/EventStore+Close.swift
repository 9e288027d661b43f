/// Closing the store, and what ends with it: subscriptions and observations.
extension EventStore {
    /// Closes the store: refuses new appends, writes snapshots if the policy says so, ends
    /// subscriptions and observations, and closes the log. Idempotent.
    /// - Throws: ``RepositoryError/storage(_:)`` when the log's final sync fails.
    public func close() async throws {
        let wasClosed = admission.withLock { admission in
            defer { admission.closed = true }
            return admission.closed
        }
        guard !wasClosed else { return }
        // A compaction renames files in the store's directory until it ends: the lock the log
        // releases at close must not be taken by another writer before then.
        while compaction.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(5)) }
        stopFollowingSharedLog()
        var syncFailure: (any Error)?
        do { try await log.synchronize() } catch { syncFailure = error }
        if syncFailure == nil, snapshotPolicy.onClose, snapshots != nil {
            do { try await writeSnapshots() } catch { logger.error("snapshot on close failed", metadata: ["error": "\(error)"]) }
        }
        let (subscribers, handlers) = commit.withLock { state in
            state.closed = true
            defer {
                state.subscribers.removeAll()
                state.closeHandlers.removeAll()
            }
            return (Array(state.subscribers.values), Array(state.closeHandlers.values))
        }
        // Outside the lock: finishing runs onTermination, which takes the commit lock.
        for subscriber in subscribers { subscriber.finish() }
        commitSignal.close()
        for handler in handlers { handler() }
        closeConsumers()
        // Only now: a failed sync must still end what waits on the store (consumers, subscribers).
        if let syncFailure { throw RepositoryError.storage(StorageFailure("the final sync at close failed", cause: syncFailure)) }
        do { try await log.close() } catch { throw RepositoryError.storage(StorageFailure("closing the log failed", cause: error)) }
    }

    // MARK: Observation lifetime

    /// Registers `handler` to run once when the store closes (at once if it is closed already).
    /// Observation streams use it to finish with the store.
    /// - Returns: A token for ``removeCloseHandler(_:)``, or `nil` if the store was closed and
    ///   `handler` already ran.
    package func addCloseHandler(_ handler: @escaping @Sendable () -> Void) -> UInt64? {
        let token: UInt64? = commit.withLock { state in
            guard !state.closed else { return nil }
            state.nextSubscriber += 1
            state.closeHandlers[state.nextSubscriber] = handler
            return state.nextSubscriber
        }
        if token == nil { handler() }
        return token
    }

    /// Removes a close handler (an observation whose consumer stopped first).
    package func removeCloseHandler(_ token: UInt64) {
        _ = commit.withLock { $0.closeHandlers.removeValue(forKey: token) }
    }
}
