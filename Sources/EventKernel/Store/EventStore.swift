public import Foundation
public import EventLog
public import Logging
import KernelPrimitives

/// The event store: typed events over any `RecordLog`, with optimistic concurrency,
/// projections folded in the commit path, live subscriptions and snapshots.
///
/// Concurrency design:
/// - An *admission* lock serializes "check expected versions, reserve the next ones, enqueue
///   the batch", so log positions follow the order of the checks. It is never held across the
///   sync: the log's group commit still batches concurrent appenders.
/// - The log calls completions in position order after durability, on the thread that leads
///   the commit: the appender itself (in `commitEnqueuedAppends`, after the admission lock is
///   released), another appender, or the log's writer. A completion never takes the admission
///   lock; it takes the *commit* lock, under which projections fold the events and
///   subscribers receive them.
/// - Queries read projections through their own locks, never the store's.
public final class EventStore: Sendable {
    /// The log underneath.
    public let log: any RecordLog
    /// The snapshot directory, when the store has a directory.
    public let snapshots: SnapshotDirectory?
    /// When snapshots are written.
    public let snapshotPolicy: SnapshotPolicy
    /// Receives what the store measures (conflicts, query latency, snapshots, observers), for
    /// metrics; `nil`: nothing is measured.
    public let instrumentation: (any StoreInstrumentation)?
    let logger: Logger
    let versions = VersionTable()

    private struct Admission { var closed = false }

    struct CommitState {
        var projections: [any Projection] = []
        var subscribers: [UInt64: AsyncThrowingStream<EventEnvelope, any Error>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
        /// Called once when the store closes: observations end there.
        var closeHandlers: [UInt64: @Sendable () -> Void] = [:]
        /// One past the last position whose completion ran: everything below is folded in.
        var nextPosition: LogPosition = 0
        var eventsSinceSnapshot = 0
        var snapshotInFlight = false
        var closed = false
    }

    private let admission = Locked(Admission())
    let commit = Locked(CommitState())
    /// Serializes the scans that read awaiting entity types' versions from the log.
    private let resolution = Locked(())

    /// Opens a store over a log: restores the entity-version map and each projection from the
    /// newest valid snapshot (if `directory` is given) and replays only the tail of the log.
    ///
    /// - Parameters:
    ///   - log: The log; the store closes it in ``close()``.
    ///   - directory: The store directory; snapshots live in `<directory>/snapshots/`. `nil`: no snapshots.
    ///   - projections: Projections to register now (more can be added with ``register(_:)``).
    ///   - snapshotPolicy: When to write snapshots.
    ///   - logger: Receives notices about ignored snapshots and failed snapshot writes.
    ///   - instrumentation: Receives what the store measures (give the same value to the log's
    ///     configuration for its rounds); `nil`: nothing is measured.
    /// - Throws: ``RepositoryError/storage(_:)`` when the log cannot be read or holds a record
    ///   that is not an event; ``RepositoryError/undecodableEvent(_:)`` when a projection cannot
    ///   fold a stored event (nothing is skipped; the store does not open).
    /// - Complexity: O(tail) records read, per projection restored from a different position.
    public init(
        log: any RecordLog, directory: URL? = nil, projections: [any Projection] = [],
        snapshotPolicy: SnapshotPolicy = .default,
        logger: Logger = Logger(label: "EventKernel.EventStore"),
        instrumentation: (any StoreInstrumentation)? = nil
    ) throws {
        self.log = log
        self.instrumentation = instrumentation
        let fileIO = (log as? SegmentedLog)?.fileIO ?? PosixFileIO()
        self.snapshots = directory.map { SnapshotDirectory(storeDirectory: $0, logger: logger, fileIO: fileIO) }
        self.snapshotPolicy = snapshotPolicy
        self.logger = logger
        // A writer killed while writing a snapshot leaves its temporary file; the new writer
        // (it holds the store's lock, so no one else is writing one) removes them.
        if let snapshots, let segmented = log as? SegmentedLog, !segmented.isReadOnly {
            snapshots.removeStaleTemporaryFiles()
        }
        let next = log.bounds.nextPosition
        // Sources keep their entity types' versions from the start: the version table neither
        // restores nor replays those streams.
        for case let source as any StreamVersionSource in projections { try versions.adopt(source) }
        try commit.withLock { (state) throws in
            state.nextPosition = next
            // One pass over the log for the version table and every projection: each is
            // restored from its snapshot, then the log is replayed once from the lowest
            // position any of them needs (each ignores what it already holds).
            try self.catchUp([versions] + projections, through: next)
            state.projections = Self.inFoldOrder(projections)
        }
        var names = Set([versions.name])
        for projection in projections where !names.insert(projection.name).inserted {
            throw RepositoryError.validationFailed("a projection named \"\(projection.name)\" is registered twice")
        }
        followSharedLog()
    }

    /// Restores `projection` from its newest usable snapshot, then folds the log up to `next`.
    /// Called with the commit lock held, so no commit interleaves.
    private func catchUp(_ projections: [any Projection], through next: LogPosition) throws {
        // Snapshots are read, checked and decoded in parallel: each is independent, and at
        // startup this is most of the work.
        if snapshots != nil {
            let logger = self.logger, instrumentation = self.instrumentation
            let isWriter = (log as? SegmentedLog).map { !$0.isReadOnly } ?? false
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
        guard let start = projections.map(\.nextPosition).min() else { return }
        try Self.replay(log, into: projections, from: start, until: next)
        for projection in projections {
            if let failure = projection.failure { throw RepositoryError.undecodableEvent(failure) }
        }
    }

    private func catchUp(_ projection: any Projection, through next: LogPosition) throws {
        try catchUp([projection], through: next)
    }

    /// Runs a read of log records, turning the log's and the envelope decoder's errors into
    /// ``RepositoryError/storage(_:)`` that keeps them as the cause: the one place that maps
    /// read failures, so every reader reports damage the same way.
    static func readingRecords<R>(_ body: () throws -> R) throws -> R {
        do { return try body() } catch let error as BinaryDecodingError {
            throw RepositoryError.storage(StorageFailure("a log record is not a valid event", cause: error))
        } catch let error as LogError {
            throw RepositoryError.storage(StorageFailure(error))
        }
    }

    /// Adds a projection: restores it from a snapshot if one fits, catches it up with the log
    /// and from then on folds every commit into it.
    /// - Throws: ``RepositoryError/validationFailed(_:)`` when the name is taken,
    ///   ``RepositoryError/storage(_:)`` when the log cannot be read.
    /// - Complexity: O(records after its snapshot); commits wait meanwhile.
    public func register(_ projection: any Projection) throws {
        try commit.withLock { (state) throws in
            guard !state.closed else { throw RepositoryError.closed }
            guard projection.name != versions.name, !state.projections.contains(where: { $0.name == projection.name }) else {
                throw RepositoryError.validationFailed("a projection named \"\(projection.name)\" is already registered")
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
    private static func inFoldOrder(_ projections: [any Projection]) -> [any Projection] {
        func isSource(_ projection: any Projection) -> Bool { (projection as? any StreamVersionSource)?.versionedEntityType != nil }
        return projections.filter { !isSource($0) } + projections.filter(isSource)
    }

    /// The position the next committed event will get, as seen by projections.
    public var nextPosition: LogPosition { commit.withLock { $0.nextPosition } }

    /// The last committed version of a stream, 0 when it has no event.
    /// - Throws: ``RepositoryError/storage(_:)`` when the version must be read from the log
    ///   and that fails: for a stream whose entity type's versions are kept by a repository's
    ///   projection (it keeps each entity's version with its state) that was registered when the
    ///   store's last snapshot was written but not yet in this process (create the repository
    ///   first and this never happens).
    /// - Complexity: O(1); once per process, O(log) for such an entity type.
    public func version(of stream: StreamID) throws -> UInt64 {
        try versionAndBasis(of: stream).version
    }

    /// A stream's committed version, and the commit count read before it (the basis of a
    /// command's fast path through ``VersionTable/reserve(_:basis:planned:)``).
    func versionAndBasis(of stream: StreamID) throws -> (version: UInt64, basis: UInt64) {
        while true {
            let basis = versions.commitBasis
            switch versions.lookup(stream) {
            case .known(let version): return (version, basis)
            case .source(let source): return (source.committedVersion(of: stream), basis)
            case .unknown: try resolveAwaitingVersions()
            }
        }
    }

    /// Reads from the log the versions of entity types whose source (a repository's
    /// projection) kept them when the version snapshot was written and has not registered in
    /// this process: one scan of the whole log, then they are kept by the version table.
    /// - Complexity: O(log).
    func resolveAwaitingVersions() throws {
        try resolution.withLock { (_) throws in
            let types = versions.awaitingEntityTypes
            guard !types.isEmpty else { return }
            logger.notice("reading stream versions from the log: their repository is not registered",
                          metadata: ["entityTypes": "\(types.map(\.value).sorted())"])
            var found: [StreamID: UInt64] = [:]
            let end = log.bounds.nextPosition
            if end > 0 {
                try forEachEnvelope(from: 0, through: end - 1) { envelope in
                    if types.contains(ExactString(envelope.stream.entityType)) {
                        found[envelope.stream] = Swift.max(found[envelope.stream] ?? 0, envelope.entityVersion)
                    }
                    return true
                }
            }
            versions.resolve(types, found: found)
        }
    }

    // MARK: Appending

    /// Appends events atomically, as one log batch.
    ///
    /// Every expected version is checked first against committed and in-flight versions; on
    /// a mismatch nothing is written. Once the log made the batch durable, the events are
    /// folded into the projections and sent to subscribers, then this method returns.
    ///
    /// - Parameter events: The events, in order. Several may concern the same entity.
    /// - Returns: The committed envelopes, with positions and entity versions.
    /// Repositories write through ``execute(maxAttempts:_:)``, which reads versions before state
    /// and retries conflicts; this is the primitive under it, for callers that supply their own
    /// expected versions.
    ///
    /// - Throws: ``RepositoryError/conflict(stream:expected:actual:)``, ``RepositoryError/closed``,
    ///   ``RepositoryError/validationFailed(_:)`` for a date a log timestamp cannot hold,
    ///   ``RepositoryError/storage(_:)`` when the log failed (nothing acknowledged).
    @discardableResult
    public func append(_ events: [PendingEvent]) async throws -> [EventEnvelope] {
        try await append(events, basis: nil, planned: nil)
    }

    /// ``append(_:)-([PendingEvent])`` for a command: `basis` is the commit count its first read
    /// saw and `planned` each event's version as the command derived it from its reads, which
    /// the version table takes as they are when no commit happened since (its fast path).
    @discardableResult
    func append(_ events: [PendingEvent], basis: UInt64?, planned: [UInt64]?) async throws -> [EventEnvelope] {
        guard !events.isEmpty else { return [] }
        let now = Date()
        var stamps: [LogTimestamp] = []
        stamps.reserveCapacity(events.count)
        for pending in events {
            do { stamps.append(try LogTimestamp(pending.recordedAt ?? now)) } catch {
                throw RepositoryError.validationFailed("recordedAt \(pending.recordedAt ?? now) cannot be stored: \(error)")
            }
        }
        let timestamps = stamps
        return try await withCheckedThrowingContinuation { continuation in
            admission.withLock { admission in
                guard !admission.closed else { return continuation.resume(throwing: RepositoryError.closed) }
                let entityVersions: [UInt64], reservation: VersionTable.Reservation
                do {
                    while true {
                        if let reserved = try versions.reserve(events, basis: basis, planned: planned) {
                            (entityVersions, reservation) = reserved
                            break
                        }
                        // A stream of an entity type whose versions await their source: read
                        // them from the log (under the admission lock: no append can slip in).
                        try resolveAwaitingVersions()
                    }
                } catch {
                    return continuation.resume(throwing: error)
                }
                var entries: [LogEntry] = []
                entries.reserveCapacity(events.count)
                for (index, pending) in events.enumerated() {
                    let e = pending.event
                    entries.append(LogEntry(timestamp: timestamps[index], payload: EventEnvelope.encodeRecordPayload(
                        eventType: e.eventType, schemaVersion: e.schemaVersion, stream: e.stream,
                        entityVersion: entityVersions[index], metadata: pending.metadata, payload: e.payload)))
                }
                log.enqueueAppend(entries, committer: .caller) { result in
                    self.complete(result, events: events, versions: entityVersions, reservation: reservation, stamps: timestamps, continuation: continuation)
                }
            }
            // Outside the admission lock: this thread writes and syncs the batch (and folds
            // the round's completions, which take only the commit lock) when no commit is in
            // progress; otherwise the commit in progress, or the log's writer after it, does.
            log.commitEnqueuedAppends()
        }
    }

    /// Appends one event. See ``append(_:)-([PendingEvent])``.
    @discardableResult
    public func append(_ event: PendingEvent) async throws -> EventEnvelope {
        try await append([event])[0]
    }

    private func complete(
        _ result: Result<Range<LogPosition>, LogError>, events: [PendingEvent], versions entityVersions: [UInt64],
        reservation: VersionTable.Reservation, stamps: [LogTimestamp], continuation: CheckedContinuation<[EventEnvelope], any Error>
    ) {
        switch result {
        case .failure(let error):
            versions.release(reservation)
            continuation.resume(throwing: Self.repositoryError(for: error))
        case .success(let range):
            var envelopes: [EventEnvelope] = []
            envelopes.reserveCapacity(events.count)
            for (index, pending) in events.enumerated() {
                let e = pending.event
                envelopes.append(EventEnvelope(
                    position: range.lowerBound + LogPosition(index), timestamp: stamps[index],
                    eventType: e.eventType, schemaVersion: e.schemaVersion, stream: e.stream,
                    entityVersion: entityVersions[index], metadata: pending.metadata, payload: e.payload))
            }
            // A shared log: what other writers committed below this batch is folded first.
            foldAppendedElsewhere(before: range.lowerBound)
            // Decoding and a domain's closures (upcasters, index keys) run here, before the
            // commit lock. Completions run one at a time in position order, so preparing
            // outside the lock cannot reorder anything.
            let registered = commit.withLock { $0.projections }
            let prepared = registered.map { $0.prepare(envelopes) }
            // Order matters. Projections first (sources of stream versions last, see
            // `inFoldOrder`): a writer that reads an entity's version and then a projection's
            // state (to decide add vs. update) must never see the new version with the old
            // state, or two concurrent adds of one id could both pass. Then the version table
            // folds the rest before the reservation is released, so a concurrent check never
            // sees an older version.
            let snapshotDue = commit.withLock { state -> Bool in
                // On a shared log the follower may have folded this batch already, or what lies
                // below it could not be read (a later fold takes both); otherwise it starts here.
                let folded = state.nextPosition
                guard folded >= range.lowerBound, folded < range.upperBound else {
                    versions.release(reservation)
                    return false
                }
                for (index, projection) in state.projections.enumerated() {
                    // A projection registered since `registered` was read prepares for itself.
                    let mine = index < registered.count && registered[index] === projection ? prepared[index] : nil
                    projection.apply(envelopes, prepared: mine)
                }
                versions.apply(envelopes)
                versions.release(reservation)
                let fresh = envelopes[Int(folded - range.lowerBound)...]
                for subscriber in state.subscribers.values {
                    for envelope in fresh { subscriber.yield(envelope) }
                }
                state.nextPosition = range.upperBound
                state.eventsSinceSnapshot += fresh.count
                guard let every = snapshotPolicy.everyEvents, snapshots != nil,
                      state.eventsSinceSnapshot >= every,
                      Double(state.eventsSinceSnapshot) >= snapshotPolicy.growthFraction * Double(state.nextPosition),
                      !state.snapshotInFlight, !state.closed else { return false }
                state.snapshotInFlight = true
                state.eventsSinceSnapshot = 0
                return true
            }
            if snapshotDue {
                // Off the commit path: file writes and fsyncs never delay acknowledgements.
                Task.detached { [self] in
                    do { try await self.writeSnapshots() } catch {
                        self.logger.error("periodic snapshot failed", metadata: ["error": "\(error)"])
                    }
                    self.commit.withLock { $0.snapshotInFlight = false }
                }
            }
            continuation.resume(returning: envelopes)
        }
    }

    // MARK: Snapshots and closing

    /// Writes a snapshot of every projection and of the stream-version table now.
    ///
    /// Each snapshot records the history it describes (the log's history epoch and the last
    /// event it covers), and the log is synced before any is written, so a snapshot never
    /// covers an event a crash could take away (Docs/Durability.md, "Derived state").
    /// - Throws: ``RepositoryError/validationFailed(_:)`` when the store has no directory,
    ///   ``RepositoryError/storage(_:)`` when the sync or a write fails.
    public func writeSnapshots() async throws {
        guard let snapshots else { throw RepositoryError.validationFailed("the store has no directory for snapshots") }
        let projections: [any Projection] = [versions] + commit.withLock { $0.projections }
        var captured: [(projection: any Projection, state: ProjectionSnapshot, encoding: Duration)] = []
        for projection in projections {
            // A projection that failed to fold an event holds a partial state: snapshotting it
            // would turn an error into lost data.
            if let failure = projection.failure {
                logger.error("snapshot skipped for a failed projection", metadata: ["projection": "\(projection.name)", "error": "\(failure)"])
                continue
            }
            let started = ContinuousClock.now
            captured.append((projection, try projection.snapshotState(), ContinuousClock.now - started))
        }
        // Under buffered durability the captured states may include events not yet on disk.
        do { try await log.synchronize() } catch {
            throw RepositoryError.storage(StorageFailure("the log sync before writing snapshots failed", cause: error))
        }
        let epoch = log.historyEpoch
        // Projections usually stand at the same position: read each anchor record once.
        var anchors: [LogPosition: SnapshotAnchor?] = [:]
        for (projection, state, encoding) in captured {
            let started = ContinuousClock.now
            let anchor: SnapshotAnchor?
            if let known = anchors[state.nextPosition] { anchor = known } else {
                anchor = try self.anchor(coveringUpTo: state.nextPosition)
                anchors[state.nextPosition] = .some(anchor)
            }
            try snapshots.write(
                SnapshotFile(projectionName: projection.name, schemaVersion: projection.schemaVersion,
                             nextPosition: state.nextPosition, historyEpoch: epoch, anchor: anchor, body: state.bytes),
                keep: snapshotPolicy.keep)
            instrumentation?.snapshotWritten(projection: projection.name, bytes: state.bytes.count,
                                             duration: encoding + (ContinuousClock.now - started))
        }
    }

    /// Closes the store: refuses new appends, writes snapshots if the policy says so, ends
    /// subscriptions and observations, and closes the log. Idempotent.
    /// - Throws: ``RepositoryError/storage(_:)`` when the log's final sync fails.
    public func close() async throws {
        let wasClosed = admission.withLock { admission in
            defer { admission.closed = true }
            return admission.closed
        }
        guard !wasClosed else { return }
        stopFollowingSharedLog()
        do { try await log.synchronize() } catch { throw RepositoryError.storage(StorageFailure("the final sync at close failed", cause: error)) }
        if snapshotPolicy.onClose, snapshots != nil {
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
        for handler in handlers { handler() }
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

    // MARK: Followers

    /// Catches up with what other writers appended: for a store over a read-only log opened
    /// beside a running writer, or over a log several instances share (`PostgresLog`, which
    /// also does this by itself on notifications and polls). Reads what they committed since,
    /// folds it into every projection and the version table, and sends it to subscribers,
    /// exactly as the store's own commits are (so ``nextPosition``, versions and observations
    /// advance).
    /// - Returns: The number of events read.
    /// - Throws: ``RepositoryError/storage(_:)`` when the log cannot be read;
    ///   ``RepositoryError/undecodableEvent(_:)`` when a projection cannot fold a new event;
    ///   ``RepositoryError/closed``.
    /// - Complexity: O(new events).
    @discardableResult
    public func refresh() throws -> Int {
        guard let shared = sharedLog else { return 0 }
        guard !commit.withLock({ $0.closed }) else { throw RepositoryError.closed }
        let bounds = try Self.readingRecords { try shared.refresh() }
        return try foldAppendedElsewhere(through: bounds.nextPosition)
    }
}
