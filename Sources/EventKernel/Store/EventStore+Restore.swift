import Foundation
import EventLog
import KernelPrimitives

/// Bringing projections up to the log: restoring each from its newest usable snapshot and
/// replaying the tail, at open and when a projection registers later, and the order commits
/// are folded in.
extension EventStore {
    /// Restores `projection` from its newest usable snapshot, then folds the log up to `next`.
    /// Called with the commit lock held, so no commit interleaves.
    func catchUp(_ projections: [any Projection], through next: LogPosition) throws {
        // Snapshots are read, checked and decoded in parallel: each is independent, and at
        // startup this is most of the work.
        if snapshots != nil {
            let logger = self.logger, instrumentation = self.instrumentation
            // Only the log's one writer owns its directory's snapshots.
            let isWriter = log.access == .exclusive
            let contradictions = Locked<[any Error]>([])
            DispatchQueue.concurrentPerform(iterations: projections.count) { index in
                let projection = projections[index]
                guard projection.nextPosition == 0 else { return }
                let file: SnapshotFile
                do {
                    guard let usable = try usableSnapshot(for: projection, maxNextPosition: next, removingStale: isWriter) else { return }
                    file = usable
                } catch {
                    contradictions.withLock { $0.append(error) }
                    return
                }
                do {
                    let started = ContinuousClock.now
                    try projection.restore(from: ProjectionSnapshot(bytes: file.body, nextPosition: file.nextPosition))
                    instrumentation?.snapshotRestored(projection: projection.name, duration: ContinuousClock.now - started)
                } catch {
                    logger.warning("snapshot state did not decode, replaying from the start",
                                   metadata: ["projection": "\(projection.name)", "error": "\(error)"])
                }
            }
            // A snapshot that contradicts the log is damage: never open past it.
            if let first = contradictions.withLock({ $0.first }) { throw first }
        }
        // Restoring and replaying free most of what they allocate (a restore's buffers are
        // about twice the table it builds), and the allocator would keep it resident: see
        // `FreedMemory`. After the replay, which reuses some of it.
        defer { FreedMemory.release() }
        guard let start = projections.map(\.nextPosition).min() else { return }
        try Self.replay(log, into: projections, from: start, until: next)
        for projection in projections {
            if let failure = projection.failure { throw RepositoryError.undecodableEvent(failure) }
        }
    }

    private func catchUp(_ projection: any Projection, through next: LogPosition) throws {
        try catchUp([projection], through: next)
    }

    /// Adds a projection: restores it from a snapshot if one fits, catches it up with the log
    /// and from then on folds every commit into it.
    /// - Throws: ``RepositoryError/misuse(_:)`` (``Misuse/Code/projectionNameTaken``) when the name is taken,
    ///   ``RepositoryError/limitExceeded(_:)`` (``LimitExceeded/Code/projectionName``) when it is
    ///   longer than a snapshot holds, ``RepositoryError/storage(_:)`` when the log cannot be read.
    /// - Complexity: O(records after its snapshot); commits wait meanwhile.
    public func register(_ projection: any Projection) throws {
        try Self.checkName(of: projection)
        try commit.withLock { (state) throws in
            guard !state.closed else { throw RepositoryError.closed }
            guard projection.name != versions.name, !state.projections.contains(where: { $0.name == projection.name }) else {
                throw RepositoryError.misuse(Misuse(.projectionNameTaken, "a projection named \"\(projection.name)\" is already registered"))
            }
            // The commit lock makes nextPosition exact: every record below it is committed and
            // no completion can run until the projection is in the list, so nothing is missed
            // or folded twice.
            try catchUp(projection, through: state.nextPosition)
            if let source = projection as? any StreamVersionSource { try versions.adopt(source) }
            state.projections = Self.inFoldOrder(state.projections + [projection])
        }
    }

    /// The order commits are folded in: sources of stream versions after every other
    /// projection, so that a version read from a source is never newer than any projection's
    /// state (the rule of ``execute(maxAttempts:_:)``: a version read before the state).
    static func inFoldOrder(_ projections: [any Projection]) -> [any Projection] {
        func isSource(_ projection: any Projection) -> Bool { (projection as? any StreamVersionSource)?.versionedEntityType != nil }
        return projections.filter { !isSource($0) } + projections.filter(isSource)
    }
}

extension EventStore {
    /// Refuses a projection whose name a snapshot header cannot hold (a 16-bit length): cut
    /// short, its snapshots would name no projection and never be used.
    /// - Throws: ``RepositoryError/limitExceeded(_:)`` (``LimitExceeded/Code/projectionName``).
    static func checkName(of projection: any Projection) throws {
        let length = projection.name.utf8.count
        guard length <= Int(UInt16.max) else {
            throw RepositoryError.limitExceeded(LimitExceeded(.projectionName,
                "the projection name \"\(projection.name.prefix(40))…\" is \(length) UTF-8 bytes; a snapshot holds at most \(UInt16.max)"))
        }
    }
}
