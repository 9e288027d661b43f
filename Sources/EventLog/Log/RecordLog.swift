/// How appends are made durable. Chosen when a log is opened.
public enum DurabilityPolicy: Hashable, Sendable {
    /// An append returns only after its batch is on stable storage (`fdatasync`).
    /// Concurrent appends share one write and one sync (group commit).
    case synced
    /// An append returns after `write(2)`; the log syncs every `syncInterval` and on close.
    /// A crash (of the machine, not just the process) may lose up to one interval of appends.
    case buffered(syncInterval: Duration)

    /// Buffered, syncing every 100 milliseconds.
    public static var buffered: DurabilityPolicy { .buffered(syncInterval: .milliseconds(100)) }
}

/// How batch payloads are stored.
public enum CompressionCodec: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// Stored as is.
    case none = 0
    /// LZ4 block compression (liblz4). A batch that does not shrink is stored uncompressed.
    case lz4 = 1

    public var description: String {
        switch self {
        case .none: "none"
        case .lz4: "lz4"
        }
    }
}

/// Who commits (writes and syncs) an enqueued append.
public enum AppendCommitter: Hashable, Sendable {
    /// The log, on a thread of its own: for callers that cannot wait (or must not block).
    case log
    /// The caller, by calling ``RecordLog/commitEnqueuedAppends()`` right after enqueueing:
    /// it leads the commit when none is in progress, or follows the one that is.
    case caller
}

/// Who may append to a log, as the process holding it sees it: what a store over the log must
/// do about others' appends and about the files beside the log (its snapshots).
public enum LogAccess: Hashable, Sendable, CustomStringConvertible {
    /// This process appends and no one else does: a ``SegmentedLog`` opened for writing (it
    /// holds the store directory's lock), an ``InMemoryLog``. The log's bounds move only by
    /// this process's own appends. A store over it writes the directory's snapshots and tidies
    /// them (removes stale ones and a killed writer's temporary files).
    case exclusive
    /// This process only reads, and a writer elsewhere may append: a ``SegmentedLog`` opened
    /// read-only beside its writer. A store over it follows the log (``SharedRecordLog``) and
    /// writes no snapshots: the directory's snapshots are the writer's.
    case readOnly
    /// This process appends and so do others: a log on a database server that several service
    /// instances share (`PostgresLog`). A store over it follows the log (``SharedRecordLog``)
    /// and writes snapshots to its own directory, but removes none (no lock says the directory
    /// is this process's alone).
    case shared

    /// Whether this process may append (``exclusive`` or ``shared``).
    public var isWritable: Bool { self != .readOnly }

    /// Whether records may appear that this process did not append (``readOnly`` or
    /// ``shared``): a store over the log must follow it, and such a log is a ``SharedRecordLog``.
    public var othersMayAppend: Bool { self != .exclusive }

    public var description: String {
        switch self {
        case .exclusive: "exclusive"
        case .readOnly: "read-only"
        case .shared: "shared"
        }
    }
}

/// An append-only sequence of timestamped records with gap-free positions.
///
/// Implementations: ``SegmentedLog``, the durable one on disk; ``InMemoryLog``, for tests and
/// previews; `PostgresLog`, one log several service instances share. Layers above (EventKernel)
/// are written against this protocol, and learn what they must know of the log (``access``,
/// ``fileIO``) from it, never from its type.
///
/// All methods are safe to call from any task. Reads never wait on an append or a sync:
/// they see the records acknowledged so far.
public protocol RecordLog: AnyObject, Sendable {
    /// The acknowledged position range and timestamp range. O(1).
    var bounds: LogBounds { get }

    /// Who may append to the log: this process alone, another process beside this reader, or
    /// this process and others. A store over the log follows it when others may append (the log
    /// must then be a ``SharedRecordLog``), writes snapshots only when this process may append,
    /// and removes stale ones only when it appends alone. Fixed for the life of the log.
    var access: LogAccess { get }

    /// The system-call layer for writes and syncs of the log's files, and of the files a store
    /// keeps beside the log (its snapshots): a fault-injecting ``LogFileIO`` given to the log
    /// reaches them all. A log with no files of its own answers ``PosixFileIO``.
    var fileIO: any LogFileIO { get }

    /// The segment files that hold the log in a local directory, when it keeps its records in
    /// them: what a store compacts (rewriting sealed segments in place) and backs up (copying
    /// them as files). `nil`, the default, for a log without files of its own (``InMemoryLog``,
    /// a database's log); a store over such a log refuses to compact or back up, saying why.
    ///
    /// A log that wraps a ``SegmentedLog`` may forward this, and should, when its records are
    /// the wrapped log's, position for position and byte for byte, and it caches none of them:
    /// compaction then rewrites the wrapped log's segments underneath it, and a backup judges
    /// snapshots against the wrapped log's records. A wrapper that changes records must answer
    /// `nil`; one that does not forward leaves the store unable to compact or back up.
    var localSegments: SegmentedLog? { get }

    /// Appends records as one atomic batch: after a crash, either all of them are in the log or none.
    ///
    /// - Parameter entries: The records, in order. Must not be empty.
    /// - Returns: The positions assigned, `entries.count` of them, contiguous.
    /// - Throws: ``LogError``: ``LogError/Code/invalidArgument`` for an empty batch,
    ///   ``LogError/Code/tooLarge`` beyond the format's limits, ``LogError/Code/io`` or
    ///   ``LogError/Code/poisoned`` when the write or sync failed (nothing was acknowledged),
    ///   ``LogError/Code/closed``, ``LogError/Code/readOnly``.
    func append(_ entries: [LogEntry]) async throws -> Range<LogPosition>

    /// Queues records as one atomic batch and returns at once; `completion` reports the outcome.
    ///
    /// This is the primitive under ``RecordLog/append(_:)``. Layers above use it when the order of
    /// positions must match the order of their own decisions (an event store checks an
    /// expected entity version and enqueues under one lock), without holding that lock across
    /// the sync.
    ///
    /// Guarantees: batches get positions in the order they were enqueued; completions are
    /// called in that order, one at a time, after the batch is durable per the log's
    /// ``DurabilityPolicy`` (and so after every earlier batch is); a failed batch fails every
    /// batch enqueued after it, so acknowledged positions never have gaps. `completion` may run
    /// on any thread, possibly before this method returns: it must not block or take a lock the
    /// caller holds while enqueueing.
    ///
    /// - Parameters:
    ///   - entries: The records, in order.
    ///   - committer: Who commits the batch: ``AppendCommitter/log`` (the log, on its own), or
    ///     ``AppendCommitter/caller``, who then must call ``commitEnqueuedAppends()`` once it
    ///     holds no lock a completion could need.
    ///   - completion: Receives the assigned positions, or the ``LogError`` that prevented them.
    func enqueueAppend(
        _ entries: [LogEntry], committer: AppendCommitter,
        completion: @escaping @Sendable (Result<Range<LogPosition>, LogError>) -> Void
    )

    /// Commits the batches enqueued with ``AppendCommitter/caller``: on the calling thread when
    /// no commit is in progress and the caller appends alone (it then leads the round, whose
    /// completions run before this returns, blocking the thread for one write and one sync);
    /// otherwise the commit in progress or the log takes them and this returns at once (the
    /// caller is a follower). Docs/Architecture.md, "The path of an append".
    func commitEnqueuedAppends()

    /// Calls `body` with each record from `start` up to and including `end`, in position order,
    /// stopping early when `body` returns `false`.
    ///
    /// - Parameters:
    ///   - start: The first position to visit; positions before ``bounds`` are clamped.
    ///   - end: The last position to visit, or `nil` for the end of the log as of the call.
    ///   - body: Receives a view valid only during the call; returns whether to continue.
    /// - Throws: ``LogError`` with code ``LogError/Code/corruption`` naming file, offset and
    ///   position if a stored batch fails its checks, or any error `body` throws.
    /// - Complexity: O(log b) to find the first batch (b batches), then linear in what is visited.
    func forEachRecord(
        from start: LogPosition, through end: LogPosition?,
        _ body: (LogRecordView) throws -> Bool
    ) throws

    /// The first position of the stored batch that holds `position`, so that a reader taking
    /// the log a piece at a time can end each piece where a batch ends: a read decompresses and
    /// checks every batch it touches whole, so a piece that ends inside a batch has that batch
    /// decoded again by the next piece.
    ///
    /// A log that wraps another must forward this (the default answers `nil`): otherwise its
    /// readers silently lose the one-decode-per-batch reads.
    /// - Parameter position: A position the log holds.
    /// - Returns: The batch's first position (at most `position`), or `nil` when the log does
    ///   not hold `position` or does not read in batches (then any end is as good as another).
    /// - Complexity: O(log s + log b) for a segmented log (s segments, b batches in one).
    func batchStart(containing position: LogPosition) -> LogPosition?

    /// The first position of `range` that lies in a stored batch compaction rewrote (a sparse
    /// batch: Docs/FileFormat.md): a record there may have been removed or replaced since it was
    /// appended, which is no damage. Derived state anchored to such a record (a snapshot) is
    /// then outdated, not contradicted; a copy that finds fewer records than positions there
    /// knows why.
    ///
    /// A log that wraps another must forward this (the default answers `nil`).
    /// - Parameter range: Positions the log covers.
    /// - Returns: `nil` when no batch in `range` is sparse or the log is never compacted.
    /// - Throws: ``LogError`` when a batch's header cannot be read.
    /// - Complexity: O(log s + log b) to find the first batch, then one header read per batch
    ///   in `range`, for a segmented log.
    func firstCompactedPosition(in range: Range<LogPosition>) throws -> LogPosition?

    /// Calls `body` with each record whose timestamp lies in `range`, in position order,
    /// skipping whole batches whose minimum and maximum timestamps lie outside it.
    ///
    /// - Parameters:
    ///   - range: The timestamps to visit, both ends inclusive.
    ///   - body: Receives a view valid only during the call; returns whether to continue.
    /// - Throws: ``LogError`` on damage, or any error `body` throws.
    func forEachRecord(
        timestampsIn range: ClosedRange<LogTimestamp>,
        _ body: (LogRecordView) throws -> Bool
    ) throws

    /// Advances whenever the log's history is cut (a torn tail truncated at open, a repair):
    /// state derived from the log records it, to tell a log that was legitimately cut from one
    /// that lost what it acknowledged. A log that is never cut (``InMemoryLog``) keeps 0.
    var historyEpoch: UInt64 { get }

    /// Makes every acknowledged append durable now (a no-op under ``DurabilityPolicy/synced``).
    /// - Throws: ``LogError`` when the sync fails.
    func synchronize() async throws

    /// Syncs and releases the log. Later calls fail with ``LogError/Code/closed``. Idempotent.
    /// - Throws: ``LogError`` when the final sync fails.
    func close() async throws
}

extension RecordLog {
    /// Logs that are never cut stay in epoch 0.
    public var historyEpoch: UInt64 { 0 }

    /// Logs without segment files of their own: `nil`.
    public var localSegments: SegmentedLog? { nil }

    /// Logs that do not decode whole batches per read report none: `nil`.
    public func batchStart(containing position: LogPosition) -> LogPosition? { nil }

    /// Logs that are never compacted: `nil`.
    public func firstCompactedPosition(in range: Range<LogPosition>) throws -> LogPosition? { nil }

    /// Whether compaction rewrote the stored batch that covers `position`: see
    /// ``firstCompactedPosition(in:)``.
    /// - Throws: ``LogError`` when the batch's header cannot be read.
    public func isCompacted(at position: LogPosition) throws -> Bool {
        try firstCompactedPosition(in: position..<position + 1) != nil
    }
}

extension RecordLog {
    /// Queues records as one atomic batch for the log to commit on its own; see
    /// ``enqueueAppend(_:committer:completion:)``.
    public func enqueueAppend(
        _ entries: [LogEntry],
        completion: @escaping @Sendable (Result<Range<LogPosition>, LogError>) -> Void
    ) {
        enqueueAppend(entries, committer: .log, completion: completion)
    }

    /// Appends records as one atomic batch and waits until it is acknowledged. A caller that
    /// finds no commit in progress writes and syncs the batch itself (leader/follower group commit).
    public func append(_ entries: [LogEntry]) async throws -> Range<LogPosition> {
        try await withCheckedThrowingContinuation { continuation in
            enqueueAppend(entries, committer: .caller) { continuation.resume(with: $0) }
            commitEnqueuedAppends()
        }
    }

    /// Appends one record.
    /// - Returns: The position assigned.
    /// - Throws: See ``RecordLog/append(_:)``.
    @discardableResult
    public func append(_ entry: LogEntry) async throws -> LogPosition {
        try await append([entry]).lowerBound
    }

    /// Reads records from `start` forward, at most `limit` of them.
    /// - Complexity: O(log b + k) for k records returned.
    public func read(from start: LogPosition, limit: Int = .max) throws -> [LogRecord] {
        var out: [LogRecord] = []
        guard limit > 0 else { return out }
        try forEachRecord(from: start, through: nil) { view in
            out.append(view.copy())
            return out.count < limit
        }
        return out
    }

    /// Reads the records whose timestamps lie in `range` (both ends inclusive), in position order.
    public func read(timestampsIn range: ClosedRange<LogTimestamp>) throws -> [LogRecord] {
        var out: [LogRecord] = []
        try forEachRecord(timestampsIn: range) { view in
            out.append(view.copy())
            return true
        }
        return out
    }
}
