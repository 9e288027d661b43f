public import Foundation
public import EventLog
public import Logging

extension EventStore {
    /// Opens (or creates) a durable store in `directory`: the segmented log, snapshots, and
    /// the lock that keeps a second writer out. A shorthand for
    /// ``open(at:configuration:projections:)`` (which it calls) when only these options
    /// differ from the defaults. Repositories are then created on it:
    ///
    /// ```swift
    /// let store = try EventStore.open(at: url)
    /// let accounts = try EventSourcedRepository<Account>(store: store, typeName: "Account")
    /// ```
    /// - Parameters:
    ///   - directory: The store's directory.
    ///   - log: The log's configuration (segment size, durability policy).
    ///   - snapshotPolicy: When to write snapshots.
    ///   - logger: Receives notices about ignored snapshots and failed snapshot writes.
    /// - Throws: ``RepositoryError/storage(_:)`` when the directory cannot be opened or is
    ///   locked by another process, and what ``init(log:directory:projections:snapshotPolicy:logger:instrumentation:)`` throws.
    public static func open(
        at directory: URL, log: SegmentedLog.Configuration = SegmentedLog.Configuration(),
        snapshotPolicy: SnapshotPolicy = .default, logger: Logger = Logger(label: "EventKernel.EventStore")
    ) throws -> EventStore {
        try open(at: directory, configuration: Configuration(log: log, snapshots: snapshotPolicy, logger: logger))
    }

    /// A store in memory: the same engine over an `InMemoryLog`, for tests and previews.
    /// - Throws: Nothing in practice (an empty log has nothing to fail on); kept throwing so
    ///   that it reads like ``open(at:log:snapshotPolicy:logger:)``.
    public static func inMemory(logger: Logger = Logger(label: "EventKernel.EventStore")) throws -> EventStore {
        try EventStore(log: InMemoryLog(), snapshotPolicy: .never, logger: logger)
    }
}
