import Foundation
import EventLog
import KernelPrimitives

/// How far a projection rebuild has come (``EventStore/rebuild(_:from:progress:)``).
public struct RebuildProgress: Hashable, Sendable, CustomStringConvertible {
    /// The projection being rebuilt.
    public var projection: String
    /// The events folded into the new version so far.
    public var folded: UInt64
    /// The events to fold: the log's length as last seen. It grows while writers append; the
    /// last report, after the switch, has `folded == total`.
    public var total: UInt64
    /// Whether the new version has replaced the old one (the last report).
    public var switched: Bool

    /// Creates a progress report.
    /// - Parameters:
    ///   - projection: The projection being rebuilt.
    ///   - folded: The events folded into the new version so far.
    ///   - total: The events to fold, as last seen.
    ///   - switched: Whether the new version has replaced the old one.
    public init(projection: String, folded: UInt64, total: UInt64, switched: Bool) {
        self.projection = projection
        self.folded = folded
        self.total = total
        self.switched = switched
    }

    /// The fraction folded, from 0 to 1 (1 for an empty log).
    public var fraction: Double { total == 0 ? 1 : Double(folded) / Double(total) }

    public var description: String {
        "\(projection): \(folded) of \(total) events folded\(switched ? ", switched" : "")"
    }
}

/// Rebuilding a projection without downtime (blue/green): the new version is folded from the
/// log in the background while the registered one keeps answering, then takes its place in one
/// step under the commit lock. Docs/Consumers.md, "Rebuilds".
extension EventStore {
    /// Events folded per batch of a rebuild's background phase: progress is reported and
    /// cancellation checked between batches.
    static let rebuildBatch: LogPosition = 65_536

    /// When at most this many events remain after a background round, they are folded under
    /// the commit lock (commits wait meanwhile) and the states switch.
    static let rebuildSwitchGap: LogPosition = 4_096

    /// Background rounds after which the switch happens whatever the gap (writers that append
    /// faster than the rebuild folds would otherwise keep it from ever switching).
    static let rebuildMaxRounds = 8

    /// Tries at switching with the last events folded outside the commit lock, before they are
    /// folded under it.
    static let rebuildSwitchAttempts = 16

    /// Rebuilds `current` from the whole log into `fresh` and switches to it, without downtime.
    ///
    /// 1. `fresh` (a new, empty instance of the same name: a new declaration, new indexes, new
    ///    upcasters, a new codec) folds the log from its start up to the head in batches,
    ///    outside every lock of the store, while `current` keeps folding commits, answering
    ///    queries and telling its observers.
    /// 2. `fresh` folds the few events committed meanwhile (outside the lock, unless writers
    ///    keep committing while it does), and under the commit lock `current` takes over its
    ///    state and definition in one step
    ///    (``RebuildableProjection/replaceState(with:)``): a query reads either the complete old
    ///    state or the complete new one, never a part. `current` stays the registered instance,
    ///    so repositories, observers (told that everything changed) and stream versions go on.
    /// 3. A snapshot of the new version is written when the store has a snapshot directory, a
    ///    writable log and a policy that writes snapshots, so that the next open restores it
    ///    rather than replaying. A failed snapshot write is logged: the switch stands, and the
    ///    next open replays.
    ///
    /// While it runs the process holds both versions' states. `progress` is called after each
    /// batch and once after the switch (`folded == total`, `switched`), outside every lock.
    ///
    /// - Parameters:
    ///   - current: The registered projection to rebuild.
    ///   - fresh: A new instance with the same name, which has folded nothing.
    ///   - progress: Called with how far the rebuild has come; it may be slow, the rebuild waits.
    /// - Throws: ``RepositoryError/undecodableEvent(_:)`` with the position and cause when the
    ///   new version cannot fold an event; `CancellationError` when the calling task is
    ///   cancelled before the switch; ``RepositoryError/misuse(_:)``
    ///   (``Misuse/Code/invalidRebuild``) when `current` is not registered, `fresh` is not a
    ///   fresh instance of the same name, or a rebuild of `current` is under way;
    ///   ``RepositoryError/storage(_:)`` when the log cannot be read or does not hold the
    ///   whole history; ``RepositoryError/closed``. On every error `current` keeps its state and
    ///   goes on answering, as if the rebuild had never started.
    /// - Complexity: O(log) events read and folded outside the commit lock; under it, at most
    ///   the events committed during the last try at switching.
    public func rebuild<P: RebuildableProjection>(
        _ current: P, from fresh: P, progress: (@Sendable (RebuildProgress) -> Void)? = nil
    ) async throws {
        try await rebuild(current, from: fresh, progress: progress, whileSwitching: {})
    }

    /// ``rebuild(_:from:progress:)`` with `whileSwitching`, which runs under the commit lock
    /// right after the switch (a repository swaps its declaration there, with its state): the
    /// kernel's own code, never a user closure.
    package func rebuild<P: RebuildableProjection>(
        _ current: P, from fresh: P, progress: (@Sendable (RebuildProgress) -> Void)?,
        whileSwitching: () -> Void
    ) async throws {
        let name = current.name
        try commit.withLock { (state) throws in
            guard !state.closed else { throw RepositoryError.closed }
            guard state.projections.contains(where: { $0 === current }) else {
                throw RepositoryError.misuse(Misuse(.invalidRebuild, "the projection \"\(name)\" to rebuild is not registered with this store"))
            }
            guard fresh !== current, fresh.name == name, fresh.nextPosition == 0, fresh.failure == nil else {
                throw RepositoryError.misuse(Misuse(.invalidRebuild,
                    "the new version of \"\(name)\" must be a fresh instance of the same name (given \"\(fresh.name)\" at position \(fresh.nextPosition))"))
            }
            guard state.rebuilding.insert(ObjectIdentifier(current)).inserted else {
                throw RepositoryError.misuse(Misuse(.invalidRebuild, "a rebuild of \"\(name)\" is already under way"))
            }
        }
        defer { _ = commit.withLock { $0.rebuilding.remove(ObjectIdentifier(current)) } }
        let first = log.bounds.firstPosition
        guard first == 0 else {
            throw RepositoryError.storage(StorageFailure(LogError(.invalidArgument,
                "the log starts at position \(first): rebuilding \"\(name)\" needs the whole history from position 0")))
        }

        // Background phase: batches folded off every lock of the store, each on a thread of
        // its own (a batch is synchronous work, kept off the cooperative pool).
        var folded: LogPosition = 0
        var head = nextPosition
        var rounds = 0
        while true {
            try Task.checkCancellation()
            if folded >= head {
                rounds += 1
                head = nextPosition
                if head - folded <= Self.rebuildSwitchGap || rounds >= Self.rebuildMaxRounds { break }
            }
            let end = min(folded + Self.rebuildBatch, head)
            try await Self.foldOffThread(log, into: fresh, from: folded, until: end)
            folded = end
            progress?(RebuildProgress(projection: name, folded: folded, total: head, switched: false))
        }

        // The switch: one swap under the commit lock, so no commit falls between the two
        // versions. The few events committed since the last round are folded outside the lock
        // when no commit lands meanwhile (the fold runs the domain's closures: upcasters, index
        // keys); only writers that keep committing have them folded under it.
        var switchedAt: LogPosition?
        for attempt in 0...Self.rebuildSwitchAttempts {
            let lastAttempt = attempt == Self.rebuildSwitchAttempts
            if !lastAttempt {
                let target = nextPosition
                if target > folded {
                    try Self.replay(log, into: [fresh], from: folded, until: target)
                    folded = target
                }
            }
            switchedAt = try commit.withLock { (state) throws -> LogPosition? in
                guard !state.closed else { throw RepositoryError.closed }
                if lastAttempt {
                    try Self.replay(log, into: [fresh], from: folded, until: state.nextPosition)
                } else if state.nextPosition != folded {
                    return nil
                }
                if let failure = fresh.failure { throw RepositoryError.undecodableEvent(failure) }
                // Cancelled during the last round: the old version stays, as promised.
                try Task.checkCancellation()
                current.replaceState(with: fresh)
                whileSwitching()
                return state.nextPosition
            }
            if switchedAt != nil { break }
            if let failure = fresh.failure { throw RepositoryError.undecodableEvent(failure) }
        }
        guard let switchedAt else { preconditionFailure("the last attempt switches or throws") }
        if snapshots != nil, log.access.isWritable, snapshotPolicy.everyEvents != nil || snapshotPolicy.onClose {
            do { try await writeSnapshots(of: [current]) } catch {
                logger.error("snapshot after a rebuild failed; the next open replays", metadata: ["projection": "\(name)", "error": "\(error)"])
            }
        }
        progress?(RebuildProgress(projection: name, folded: switchedAt, total: switchedAt, switched: true))
    }

    /// Folds `[start, end)` into `projection` on a thread of its own, and throws the failure
    /// the projection met there (position and cause).
    private static func foldOffThread(
        _ log: any RecordLog, into projection: any Projection, from start: LogPosition, until end: LogPosition
    ) async throws {
        try await runOnThreadOfItsOwn(named: "EventKernel rebuild") {
            try replay(log, into: [projection], from: start, until: end)
            if let failure = projection.failure { throw RepositoryError.undecodableEvent(failure) }
        }
    }
}
