public import Foundation
public import EventLog
public import Logging

extension EventStore {
    /// Everything a durable store is opened with, in one value: what a service keeps in its
    /// own configuration and passes to ``open(at:configuration:projections:)`` (or to
    /// `EventSourcedActivityRepository.open(at:configuration:logger:)`, which opens its store
    /// through it).
    public struct Configuration: Sendable {
        /// The log's options (durability, segment size, compression).
        public var log: SegmentedLog.Configuration
        /// When snapshots are written.
        public var snapshots: SnapshotPolicy
        /// Receives the store's warnings and errors: ignored snapshots, failed snapshot writes.
        public var logger: Logger
        /// Receives what the store and its log measure, for metrics (`EventKernelMetrics`);
        /// `nil`, the default: nothing is measured. It replaces `log.instrumentation`.
        public var instrumentation: (any StoreInstrumentation)?

        /// Creates a configuration; the defaults are synced, LZ4, snapshots every 10,000 events
        /// (and a quarter of the log) and on close, and a logger labelled `EventKernel.EventStore`.
        public init(
            log: SegmentedLog.Configuration = SegmentedLog.Configuration(),
            snapshots: SnapshotPolicy = .default,
            logger: Logger = Logger(label: "EventKernel.EventStore"),
            instrumentation: (any StoreInstrumentation)? = nil
        ) {
            self.log = log
            self.snapshots = snapshots
            self.logger = logger
            self.instrumentation = instrumentation
        }
    }

    /// The store directory a program uses when it is given none: `$EVENTKERNEL_STORE`, else
    /// `./eventkernel-store`. The `eventkernel` command and the live dependency values
    /// (`EventKernelDependencies`) both use it, so the tool reads what a service wrote.
    public static var defaultDirectory: URL {
        let path = ProcessInfo.processInfo.environment["EVENTKERNEL_STORE"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "./eventkernel-store"
        return URL(filePath: path, directoryHint: .isDirectory).standardizedFileURL
    }

    /// Opens (or creates) a durable store in `directory` with `configuration`: the segmented
    /// log, snapshots, and the lock that keeps a second writer out. The one place a durable
    /// store is opened: every other way (``open(at:log:snapshotPolicy:logger:)``, the
    /// repositories' `open`, the `eventkernel` command, the dependency clients) comes here.
    /// - Parameters:
    ///   - directory: The store's directory.
    ///   - configuration: The log, snapshot, logging and instrumentation options.
    ///   - projections: Projections to register now, restored and caught up in the store's one
    ///     replay at open (more can be added later with ``register(_:)``, each replaying alone).
    /// - Throws: ``RepositoryError/storage(_:)`` with the `LogError` when the directory cannot
    ///   be opened (locked by another process, damaged, not a directory), and what
    ///   ``init(log:directory:projections:snapshotPolicy:logger:instrumentation:)`` throws.
    public static func open(
        at directory: URL, configuration: Configuration, projections: [any Projection] = []
    ) throws -> EventStore {
        let log: SegmentedLog
        do {
            log = try openLog(at: directory, configuration: configuration.log, instrumentation: configuration.instrumentation)
        } catch let error as LogError {
            throw RepositoryError.storage(StorageFailure(error))
        }
        return try EventStore(log: log, directory: directory, projections: projections, snapshotPolicy: configuration.snapshots,
                              logger: configuration.logger, instrumentation: configuration.instrumentation)
    }
}

extension EventStore {
    /// Opens a store's log for writing, the one way a durable store opens it: with what
    /// the store's snapshots say was acknowledged (``SnapshotDirectory/acknowledgedPositions()``),
    /// so that recovery never truncates, as a torn write, a batch a snapshot proves durable
    /// (Docs/Durability.md, "What counts as torn").
    /// - Parameters:
    ///   - directory: The store directory.
    ///   - configuration: The log's options.
    ///   - instrumentation: Replaces `configuration.instrumentation` when given.
    /// - Throws: What `SegmentedLog.open(at:configuration:)` throws.
    private static func openLog(
        at directory: URL, configuration: SegmentedLog.Configuration, instrumentation: (any StoreInstrumentation)?
    ) throws -> SegmentedLog {
        var log = configuration
        if let instrumentation { log.instrumentation = instrumentation }
        log.acknowledgedElsewhere += SnapshotDirectory(storeDirectory: directory).acknowledgedPositions()
        return try SegmentedLog.open(at: directory, configuration: log)
    }
}
