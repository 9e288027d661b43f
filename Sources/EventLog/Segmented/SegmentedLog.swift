public import Foundation
import Synchronization
import KernelPrimitives

/// The durable ``RecordLog``: a directory of LZ4-compressed, checksummed, segmented files.
///
/// ```swift
/// let log = try SegmentedLog.open(at: URL(filePath: "/var/lib/app/events"))
/// let positions = try await log.append([LogEntry(timestamp: .now(), payload: bytes)])
/// try log.forEachRecord(from: 0, through: nil) { record in ...; return true }
/// try await log.close()
/// ```
///
/// - One writer per directory: ``open(at:configuration:)`` takes an exclusive `flock` on
///   `<directory>/LOCK`; a second writer, in this process or another, gets
///   ``LogError/Code/locked``. ``openReadOnly(at:)`` takes no lock and sees a consistent prefix.
/// - Appends are grouped (leader/follower group commit): an appender that finds no commit in
///   progress writes and syncs its batch on its own thread; those arriving meanwhile share
///   the next round's one `write(2)` and one `fdatasync(2)` (``DurabilityPolicy``), which a
///   dedicated writer thread leads, so that at most one thread of the Swift concurrency pool
///   waits on the disk at a time.
/// - Opening reads the index side files of sealed segments and scans only the active segment,
///   truncating a torn tail and refusing damage elsewhere (``recoveryReport``, Docs/Durability.md).
///
/// The byte layout is specified in Docs/FileFormat.md.
public final class SegmentedLog: RecordLog {
    /// Options fixed when a log is opened for writing.
    public struct Configuration: Sendable {
        /// A segment is sealed and a new one started once it reaches this many bytes.
        /// A single batch larger than this gets a segment of its own. Default 64 MiB; at least 4 KiB.
        public var segmentSize: Int = 64 << 20
        /// When an append is acknowledged. Default ``DurabilityPolicy/synced``.
        public var durability: DurabilityPolicy = .synced
        /// How batch payloads are stored. Default ``CompressionCodec/lz4``.
        public var compression: CompressionCodec = .lz4
        /// Reserve the active segment's space ahead of its data with `fallocate`, so that
        /// `fdatasync` flushes data without size metadata. Default `true` (Linux only; ignored
        /// elsewhere).
        public var preallocate: Bool = true
        /// How far ahead of its data the active segment's space is reserved, in bytes: a new
        /// segment reserves this much past its header (up to its segment size, when that is
        /// smaller), and a write that runs past the reserved space grows it to this much past
        /// the write, never past the segment size (a batch larger than a segment reserves just
        /// itself). A growth that fails is left to the write: it does not fail the append.
        /// Default 4 MiB; at least 4 KiB.
        ///
        /// Reserving in steps rather than a whole segment at once keeps a small store small
        /// (a store of a few events takes a few MiB while it is open, not a segment's 64 MiB)
        /// and costs one extra metadata commit per step: the `fdatasync` of the write that
        /// grows it.
        public var preallocationStep: Int = 4 << 20
        /// Concurrent appends are merged into batches of up to about this many payload bytes.
        public var maxGroupBytes: Int = 4 << 20
        /// The system-call layer for writes and syncs; replaced in fault-injection tests.
        public var fileIO: any LogFileIO = PosixFileIO()
        /// Receives what each write round did (records, bytes, sync latency), for metrics.
        /// Default `nil`: nothing is measured.
        public var instrumentation: (any LogInstrumentation)?
        /// What records outside the log (snapshots) say was acknowledged: a writer's open
        /// refuses, rather than truncates as torn, a tail they cover (``AcknowledgedPosition``).
        /// `EventStore.open` and the repositories' `open` fill it from the store's snapshots
        /// (`SnapshotDirectory.acknowledgedPositions()`); set it when opening the log of a
        /// store yourself. Default empty.
        public var acknowledgedElsewhere: [AcknowledgedPosition] = []

        /// The defaults: synced, LZ4, 64 MiB segments, preallocated 4 MiB at a time.
        public init() {}

        /// Creates a configuration.
        public init(segmentSize: Int = 64 << 20, durability: DurabilityPolicy = .synced,
                    compression: CompressionCodec = .lz4, preallocate: Bool = true) {
            self.segmentSize = segmentSize
            self.durability = durability
            self.compression = compression
            self.preallocate = preallocate
        }
    }

    /// Counters since open, for tests, the CLI and benchmarks.
    public struct Statistics: Hashable, Sendable {
        /// Append requests acknowledged.
        public var appendsAcknowledged: Int
        /// Batches written.
        public var batchesWritten: Int
        /// `fdatasync` calls on segment files.
        public var dataSyncs: Int
        /// Bytes written to segment files (headers and stored payloads).
        public var bytesWritten: Int
    }

    /// The store directory.
    public let directory: URL
    /// Whether the log was opened with ``openReadOnly(at:)``.
    public let isReadOnly: Bool
    let core: LogCore
    let writer: GroupCommitWriter?
    private let lock: DirectoryLock?
    private let recovery: Locked<RecoveryReport>
    private let epoch: Locked<UInt64>
    private let replacements = Locked<UInt64>(0)

    private init(directory: URL, core: LogCore, writer: GroupCommitWriter?, lock: DirectoryLock?, recovery: RecoveryReport, historyEpoch: UInt64) {
        self.directory = directory
        self.epoch = Locked(historyEpoch)
        self.core = core
        self.writer = writer
        self.lock = lock
        self.isReadOnly = writer == nil
        self.recovery = Locked(recovery)
    }

    /// Opens (creating if needed) the log in `directory` for writing.
    ///
    /// Recovers from a crash first: a torn batch at the end of the active segment is truncated
    /// (its bytes are kept under `recovered/`) and reported in ``recoveryReport``.
    ///
    /// - Parameters:
    ///   - directory: The store directory; created with intermediate directories if missing.
    ///   - configuration: Segment size, durability, compression.
    /// - Returns: The open log, holding the store's writer lock until ``close()``.
    /// - Throws: ``LogError``: ``LogError/Code/locked`` if another writer has the store,
    ///   ``LogError/Code/notAStore`` if `directory` is a file or holds other files but no store
    ///   (a new store is created only in an empty directory), ``LogError/Code/corruption``
    ///   (with file, offset, position) for damage that is not a torn tail (among it, a tail that
    ///   looks torn but that ``Configuration/acknowledgedElsewhere`` says was acknowledged; the
    ///   store is then left untouched), ``LogError/Code/io``.
    public static func open(at directory: URL, configuration: Configuration = Configuration()) throws -> SegmentedLog {
        guard configuration.segmentSize >= 4096 else {
            throw LogError(.invalidArgument, "segment size \(configuration.segmentSize) is below the minimum of 4096 bytes")
        }
        guard configuration.preallocationStep >= 4096 else {
            throw LogError(.invalidArgument, "preallocation step \(configuration.preallocationStep) is below the minimum of 4096 bytes")
        }
        if case .buffered(let interval) = configuration.durability, interval <= .zero {
            throw LogError(.invalidArgument, "buffered sync interval must be positive, got \(interval)")
        }
        let path = directory.standardizedFileURL.path
        try StoreDirectory.create(path)
        // Before the lock: refusing must leave no LOCK file in the backup.
        try StoreManifest.refuseIncompleteBackup(in: path)
        if !StoreDirectory.exists(path + "/" + StoreManifest.fileName) { try StoreManifest.requireStoreContents(in: path) }
        let lock = try DirectoryLock(directory: path)
        let before = try StoreManifest.prepareForWriting(in: path, io: configuration.fileIO)
        var report = RecoveryReport()
        let loaded = try LogLoader(directory: path, writable: true, configuration: configuration, historyEpoch: before.historyEpoch)
            .load(report: &report)
        // Read again: recovery advances the epoch when it cuts a torn tail.
        let manifest = try StoreManifest.requireForReading(in: path)
        let core = LogCore(directory: path, configuration: configuration, segments: loaded.segments)
        let writer = GroupCommitWriter(core: core, active: loaded.active!)
        writer.start()
        return SegmentedLog(directory: directory, core: core, writer: writer, lock: lock, recovery: report,
                            historyEpoch: manifest.historyEpoch)
    }

    /// Opens the log in `directory` for reading, alongside a writer if one is running.
    ///
    /// Never writes: a torn tail is not truncated but treated as the end; ``refresh()`` picks
    /// up what a writer appended since.
    /// - Throws: ``LogError/Code/notAStore`` if the directory does not exist or is not a store
    ///   (no `eventkernel.store` file and no segment files, or a backup in progress or cut short);
    ///   damage as for ``open(at:configuration:)``.
    public static func openReadOnly(at directory: URL) throws -> SegmentedLog {
        let path = directory.standardizedFileURL.path
        try StoreDirectory.requireExisting(path)
        let manifest = try StoreManifest.requireForReading(in: path)
        var report = RecoveryReport()
        let configuration = Configuration()
        let loaded = try LogLoader(directory: path, writable: false, configuration: configuration).load(report: &report)
        let core = LogCore(directory: path, configuration: configuration, segments: loaded.segments)
        return SegmentedLog(directory: directory, core: core, writer: nil, lock: nil, recovery: report,
                            historyEpoch: manifest.historyEpoch)
    }

    deinit {
        // The writer thread still closes the log (trims, writes the checkpoint): the lock goes
        // with it and is released only once that is done, so that a new writer (or a reader
        // scanning the active segment) never meets a closing one.
        writer?.abandon(releasing: lock)
    }

    /// Whether `directory` is a store: it holds an `eventkernel.store` file (valid or not:
    /// a damaged one is damage to report, not a reason to call the directory something else),
    /// or segment files with valid names (stores written before the store file existed).
    public static func isStore(at directory: URL) -> Bool {
        let path = directory.standardizedFileURL.path
        if StoreDirectory.exists(path + "/" + StoreManifest.fileName) { return true }
        guard let names = try? StoreDirectory.list(path) else { return false }
        return Segment.Name.containsSegment(names)
    }

    /// The store's history epoch: advanced whenever the log's history is cut (a torn tail
    /// truncated at open, a repair), so that state derived from an older history can tell
    /// (Docs/Durability.md, "Derived state").
    public var historyEpoch: UInt64 { epoch.withLock { $0 } }

    /// What recovery found and did when the log was opened (or last refreshed).
    public var recoveryReport: RecoveryReport { recovery.withLock { $0 } }

    /// Counters since open.
    public var statistics: Statistics { core.statistics() }

    public var bounds: LogBounds { core.state.withLock { $0.bounds } }

    /// The system-call layer the log writes through (``Configuration/fileIO``); a store's
    /// snapshot directory writes through it too.
    public var fileIO: any LogFileIO { core.configuration.fileIO }

    /// This log itself: its records live in the segment files of ``directory``.
    public var localSegments: SegmentedLog? { self }

    /// ``LogAccess/readOnly`` when opened with ``openReadOnly(at:)`` (a writer may append
    /// beside it), else ``LogAccess/exclusive`` (this log holds the directory's lock).
    public var access: LogAccess { isReadOnly ? .readOnly : .exclusive }

    /// The number of segment files, sealed and active.
    public var segmentCount: Int { core.state.withLock { $0.segments.count } }

    public func enqueueAppend(
        _ entries: [LogEntry], committer: AppendCommitter,
        completion: @escaping @Sendable (Result<Range<LogPosition>, LogError>) -> Void
    ) {
        guard let writer else {
            completion(.failure(LogError(.readOnly, "the log was opened read-only", file: core.directory)))
            return
        }
        guard !entries.isEmpty else {
            completion(.failure(LogError(.invalidArgument, "an append needs at least one record")))
            return
        }
        var bytes = 0
        for entry in entries { bytes += entry.payload.count + 20 }
        guard bytes <= BatchHeader.maxPayloadLength else {
            completion(.failure(LogError(.tooLarge, "an append of \(entries.count) records and about \(bytes) bytes exceeds the batch limit of \(BatchHeader.maxPayloadLength) bytes")))
            return
        }
        writer.submit(.append(entries, bytes, completion), writerCommits: committer == .log)
    }

    public func commitEnqueuedAppends() {
        writer?.commitEnqueuedAppends()
    }

    public func synchronize() async throws {
        guard let writer else { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            writer.submit(.sync({ continuation.resume(with: $0.mapError { $0 as any Error }) }))
        }
    }

    public func close() async throws {
        guard let writer else {
            core.state.withLock { $0.closed = true }
            return
        }
        // The writer has stopped once close completes, whether or not its final sync failed:
        // release the lock either way, so that a failed close does not keep the store locked
        // until this object is deinitialised (a reopen, which runs recovery, must be possible).
        defer { lock?.unlock() }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            writer.submit(.close({ continuation.resume(with: $0.mapError { $0 as any Error }) }))
        }
    }

    /// Picks up batches and segments a writer appended since this read-only log was opened or
    /// last refreshed.
    /// - Returns: The new bounds.
    /// - Throws: ``LogError`` for damage, or ``LogError/Code/invalidArgument`` on a writable log
    ///   (which is always current).
    @discardableResult
    public func refresh() throws -> LogBounds {
        guard writer == nil else { return bounds }
        var report = RecoveryReport()
        let manifest = try StoreManifest.requireForReading(in: core.directory)
        epoch.withLock { $0 = manifest.historyEpoch }
        let known = core.state.withLock { $0.segments }
        let loaded = try LogLoader(directory: core.directory, writable: false, configuration: core.configuration)
            .load(report: &report, reusingSealed: known)
        recovery.withLock { $0 = report }
        if Self.replacesSegments(known, with: loaded.segments) { replacements.withLock { $0 += 1 } }
        return core.state.withLock { state in
            state.segments = loaded.segments
            state.recomputeBounds()
            return state.bounds
        }
    }

    /// How many ``refresh()``es found a segment this log had read replaced by another file
    /// (a compaction renames each rewritten segment over the old one) or gone: a reader that
    /// kept what it read (the viewer's catalog) compares the count before and after a refresh
    /// and reads again. Judged on the files this log holds open, so no file can take the old
    /// one's device and inode meanwhile, on every platform and file system; 0 on a writable log.
    package var segmentReplacements: UInt64 { replacements.withLock { $0 } }

    /// Whether `loaded` replaces a segment of `known`: a base whose file is another one now
    /// (the reused sealed segments are the same objects: nothing to compare), or a base gone.
    private static func replacesSegments(_ known: [Segment], with loaded: [Segment]) -> Bool {
        for before in known {
            guard let now = loaded.first(where: { $0.basePosition == before.basePosition }) else { return true }
            if now.file !== before.file, !now.file.isSameFile(as: before.file) { return true }
        }
        return false
    }
}

/// The state readers see, guarded by ``LogCore/state``.
struct LogState: Sendable {
    var segments: [Segment]
    var bounds: LogBounds = .empty
    var closed = false

    mutating func recomputeBounds() {
        var bounds = LogBounds(firstPosition: segments.first?.basePosition ?? 0,
                               nextPosition: segments.last?.nextPosition ?? 0, minTimestamp: nil, maxTimestamp: nil)
        for segment in segments {
            if let lo = segment.minTimestamp {
                bounds.minTimestamp = Swift.min(bounds.minTimestamp ?? LogTimestamp(nanosecondsSince1970: lo), LogTimestamp(nanosecondsSince1970: lo))
            }
            if let hi = segment.maxTimestamp {
                bounds.maxTimestamp = Swift.max(bounds.maxTimestamp ?? LogTimestamp(nanosecondsSince1970: hi), LogTimestamp(nanosecondsSince1970: hi))
            }
        }
        self.bounds = bounds
    }
}

/// What the writer and the readers of one open log share.
final class LogCore: Sendable {
    let directory: String
    let configuration: SegmentedLog.Configuration
    let state: Locked<LogState>
    /// Held by whatever must see a sealed segment and its index as one version: a rewrite
    /// (compaction) and a backup. Never taken under ``state``.
    let maintenance = Locked<Void>(())
    let appendsAcknowledged = Atomic<Int>(0)
    let batchesWritten = Atomic<Int>(0)
    let dataSyncs = Atomic<Int>(0)
    let bytesWritten = Atomic<Int>(0)

    init(directory: String, configuration: SegmentedLog.Configuration, segments: [Segment]) {
        self.directory = directory
        self.configuration = configuration
        var state = LogState(segments: segments)
        state.recomputeBounds()
        self.state = Locked(state)
    }

    func statistics() -> SegmentedLog.Statistics {
        SegmentedLog.Statistics(
            appendsAcknowledged: appendsAcknowledged.load(ordering: .relaxed),
            batchesWritten: batchesWritten.load(ordering: .relaxed),
            dataSyncs: dataSyncs.load(ordering: .relaxed),
            bytesWritten: bytesWritten.load(ordering: .relaxed))
    }
}
