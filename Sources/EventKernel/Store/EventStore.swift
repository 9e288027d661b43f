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
    package let snapshots: SnapshotDirectory?
    /// When snapshots are written.
    public let snapshotPolicy: SnapshotPolicy
    /// Receives what the store measures (conflicts, query latency, snapshots, observers), for
    /// metrics; `nil`: nothing is measured.
    public let instrumentation: (any StoreInstrumentation)?
    let logger: Logger
    let versions = VersionTable()
    /// Where named consumers keep their committed positions and parked events.
    let consumerStorage: any ConsumerStorage
    /// The directory's consumer files when the log keeps the consumers instead: a consumer
    /// found there and not in the log's storage was kept by an earlier build, and is refused
    /// rather than silently started afresh (``ConsumerError/checkpointElsewhere(consumer:path:location:)``).
    let consumerFilesBeside: ConsumerDirectory?
    /// Wakes consumers waiting for commits (it carries no events).
    let commitSignal = CommitSignal()
    /// The consumers open on this store, one per name (their locks are released at close).
    let openConsumers = Locked<[String: Consumer]>([:])
    /// One gate per consumer name, held while that name is being opened: opening (a lease's
    /// connection, a checkpoint read) happens outside ``openConsumers``, so a slow database
    /// holds up only the callers opening the same name, never the store's close or other names.
    let consumerGates = Locked<[String: Locked<Void>]>([:])

    struct Admission { var closed = false }

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
        /// The projections a rebuild is under way for (one at a time per projection).
        var rebuilding: Set<ObjectIdentifier> = []
    }

    let admission = Locked(Admission())
    let commit = Locked(CommitState())
    /// Whether a compaction is under way (one at a time: ``compact()``).
    let compaction = Locked(false)
    /// Whether a snapshot write (or a compaction) is under way: ``holdingSnapshotWrites(_:)``.
    let snapshotWrites = Locked(false)
    /// Serializes the scans that read awaiting entity types' versions from the log.
    let resolution = Locked(())

    /// Opens a store over a log: restores the entity-version map and each projection from the
    /// newest valid snapshot (if `directory` is given) and replays only the tail of the log.
    ///
    /// - Parameters:
    ///   - log: The log; the store closes it in ``close()``.
    ///   - directory: The store directory; snapshots live in `<directory>/snapshots/`. `nil`: no snapshots.
    ///   - projections: Projections to register now (more can be added with ``register(_:)``).
    ///   - snapshotPolicy: When to write snapshots; ``SnapshotPolicy/never`` whatever is given
    ///     when the log is read-only (`LogAccess.readOnly`): its snapshots are its writer's.
    ///   - logger: Receives notices about ignored snapshots and failed snapshot writes.
    ///   - instrumentation: Receives what the store measures (give the same value to the log's
    ///     configuration for its rounds); `nil`: nothing is measured.
    /// - Throws: ``RepositoryError/storage(_:)`` when the log cannot be read or holds a record
    ///   that is not an event, or says others append to it (`RecordLog.access`) but is not a
    ///   `SharedRecordLog`; ``RepositoryError/undecodableEvent(_:)`` when a projection cannot
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
        let access = log.access
        if access.othersMayAppend, !(log is any SharedRecordLog) {
            // The store could never learn of the others' appends: it would answer from a
            // history that stopped at open.
            throw RepositoryError.storage(StorageFailure(LogError(.invalidArgument,
                "the log's access is \(access), so others append to it, but \(type(of: log)) is not a SharedRecordLog: a store over it could not follow them")))
        }
        self.snapshots = directory.map { SnapshotDirectory(storeDirectory: $0, logger: logger, fileIO: log.fileIO) }
        // The snapshots beside a read-only log are its writer's.
        self.snapshotPolicy = access.isWritable ? snapshotPolicy : .never
        self.logger = logger
        // A log shared by several instances keeps their consumers where all of them see them
        // (the directory is then this instance's own cache).
        if let source = log as? any ConsumerStorageSource {
            self.consumerStorage = source.makeConsumerStorage()
            self.consumerFilesBeside = directory.map { ConsumerDirectory(storeDirectory: $0, fileIO: log.fileIO) }
        } else {
            self.consumerStorage = directory.map { ConsumerDirectory(storeDirectory: $0, fileIO: log.fileIO) } ?? ConsumerMemory()
            self.consumerFilesBeside = nil
        }
        // A writer killed while writing a snapshot leaves its temporary file; the log's only
        // writer (no one else is writing one) removes them.
        if let snapshots, access == .exclusive {
            snapshots.removeStaleTemporaryFiles()
        }
        let next = log.bounds.nextPosition
        for projection in projections { try Self.checkName(of: projection) }
        // Sources keep their entity types' versions from the start: the version table neither
        // restores nor replays those streams.
        for case let source as any StreamVersionSource in projections { try versions.adopt(source) }
        try commit.withLock { (state) throws in
            state.nextPosition = next
            commitSignal.advance(to: next)
            // One pass over the log for the version table and every projection: each is
            // restored from its snapshot, then the log is replayed once from the lowest
            // position any of them needs (each ignores what it already holds).
            try self.catchUp([versions] + projections, through: next)
            state.projections = Self.inFoldOrder(projections)
        }
        var names = Set([versions.name])
        for projection in projections where !names.insert(projection.name).inserted {
            throw RepositoryError.misuse(Misuse(.projectionNameTaken, "a projection named \"\(projection.name)\" is registered twice"))
        }
        followSharedLog()
    }

    /// The position the next committed event will get, as seen by projections.
    public var nextPosition: LogPosition { commit.withLock { $0.nextPosition } }
}
