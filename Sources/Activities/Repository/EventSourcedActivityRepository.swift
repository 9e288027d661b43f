public import EventKernel
public import EventLog
public import Foundation
public import Logging

/// The durable ``ActivityRepositoryProtocol``: every mutation is an ``ActivityEvent`` appended
/// to an EventKernel store; queries are answered from memory by an ``ActivityProjection``.
///
/// ```swift
/// let repository = try EventSourcedActivityRepository.open(at: URL(filePath: "/var/lib/app/activities"))
/// try await repository.add(ActivityModel(startDate: .now, type: .sleep))
/// let lastWeek = try repository.activities(matching: ActivityQuery(afterDate: .now - 7 * 86_400, limit: 50))
/// try await repository.close()
/// ```
///
/// Writes are checked against the current state and the entity's version in one step: two
/// concurrent adds of one id never both succeed, and an update never resurrects a deleted
/// activity. Under the default synced durability an awaited write is on stable storage.
public final class EventSourcedActivityRepository: ActivityRepositoryProtocol {
    /// The options of ``open(at:configuration:logger:)`` are the store's.
    @available(*, deprecated, renamed: "EventStore.Configuration", message: "the repository opens its store with the store's configuration")
    public typealias Configuration = EventStore.Configuration

    /// The event store underneath, for reading events, subscribing, snapshots and time travel.
    public let store: EventStore
    /// The read model.
    public let projection: ActivityProjection
    let codec = ActivityEventCodec()
    /// Times every query when the store is instrumented (`nil`: no clock is read).
    private let queryLatency: (any DurationRecorder)?

    /// Wraps a store, registering (and catching up) an ``ActivityProjection`` on it.
    /// - Throws: `RepositoryError` if the log cannot be replayed.
    public init(store: EventStore) throws {
        self.store = store
        self.projection = ActivityProjection()
        self.queryLatency = store.instrumentation?.queryLatency(repository: projection.name)
        try store.register(projection)
    }

    /// Wraps a store that was created with `projection` among its projections (so that the
    /// store's single replay at open also filled it).
    init(store: EventStore, registered projection: ActivityProjection) {
        self.store = store
        self.projection = projection
        self.queryLatency = store.instrumentation?.queryLatency(repository: projection.name)
    }

    /// Opens (creating if needed) a durable repository in `directory`, through
    /// `EventStore.open(at:configuration:projections:)`, the one way a durable store opens.
    ///
    /// Loads the newest valid snapshot and replays the log after it; a missing, damaged or
    /// outdated snapshot is logged and the log is replayed instead.
    /// - Parameters:
    ///   - directory: The store's directory.
    ///   - configuration: The store's options (log, snapshots, logger, instrumentation).
    ///   - logger: Replaces `configuration.logger` when given; `nil`, the default: the
    ///     configuration's.
    /// - Throws: `RepositoryError.storage` with the `LogError` when the directory cannot be
    ///   opened (locked by another process, damaged, not a directory), or another
    ///   `RepositoryError` when the log cannot be replayed.
    public static func open(
        at directory: URL, configuration: EventStore.Configuration = EventStore.Configuration(),
        logger: Logger? = nil
    ) throws -> EventSourcedActivityRepository {
        var configuration = configuration
        if let logger { configuration.logger = logger }
        let projection = ActivityProjection()
        let store = try EventStore.open(at: directory, configuration: configuration, projections: [projection])
        return EventSourcedActivityRepository(store: store, registered: projection)
    }

    /// Opens a repository for reading only, alongside a running writer if there is one.
    /// Writes fail; ``refresh()`` picks up what the writer appended since.
    public static func openReadOnly(
        at directory: URL, logger: Logger = Logger(label: "EventKernel.Activities")
    ) throws -> EventSourcedActivityRepository {
        let log = try SegmentedLog.openReadOnly(at: directory)
        let projection = ActivityProjection()
        let store = try EventStore(log: log, directory: directory, projections: [projection], snapshotPolicy: .never, logger: logger)
        return EventSourcedActivityRepository(store: store, registered: projection)
    }

    /// A repository over any log (an `InMemoryLog` for tests), without snapshots.
    public convenience init(log: any RecordLog) throws {
        let projection = ActivityProjection()
        self.init(store: try EventStore(log: log, projections: [projection], snapshotPolicy: .never), registered: projection)
    }

    /// Syncs, writes snapshots per policy, and closes the log. Later calls fail with `closed`.
    public func close() async throws {
        try await store.close()
    }

    // MARK: Queries

    /// The activities matching `query`, synchronously.
    /// - Throws: `RepositoryError.invalidQuery` when the query is malformed.
    /// - Complexity: O(log n + k) for a date window returning k activities.
    public func activities(matching query: ActivityQuery) throws -> [ActivityModel] {
        do {
            return try queryLatency.time { try projection.read { try $0.fetch(query) } }
        } catch let error as ActivityQueryError {
            throw RepositoryError.invalidQuery(error.message)
        }
    }

    /// The activities matching a date-range query, synchronously.
    public func activities(in range: ActivityRangeQuery) throws -> [ActivityModel] {
        do {
            return try queryLatency.time { try projection.read { try $0.fetch(range) } }
        } catch let error as ActivityQueryError {
            throw RepositoryError.invalidQuery(error.message)
        }
    }

    /// The activity with `id`, if it exists.
    public func activity(id: UUID) -> ActivityModel? {
        projection.read { $0[id: id] }
    }

    /// How many activities exist.
    public var count: Int { projection.read { $0.count } }

    public func fetch(query: ActivityQuery) async throws -> [ActivityModel] {
        try activities(matching: query)
    }

    public func fetch(range: ActivityRangeQuery) async throws -> [ActivityModel] {
        try activities(in: range)
    }

    // MARK: Writes

    public func add(_ activity: ActivityModel) async throws {
        try Self.validate(activity)
        try await write(activity.id) { existing in
            guard existing == nil else { throw RepositoryError.alreadyExists(.uuid(activity.id)) }
            return .added(activity)
        }
    }

    public func update(_ activity: ActivityModel) async throws {
        try Self.validate(activity)
        try await write(activity.id) { existing in
            guard existing != nil else { throw RepositoryError.notFound(.uuid(activity.id)) }
            return .updated(activity)
        }
    }

    /// Deletes the activity with `id` softly: appends the Activities delete event (what
    /// stores have always held). It takes no metadata, unlike ``purge(id:metadata:)``: its
    /// signature is the Activities protocol's. A soft delete that records who deleted is
    /// `EventStore.delete(stream:metadata:)` (a `$deleted` tombstone, read as this delete).
    /// - Returns: Whether the activity existed.
    /// - Throws: `RepositoryError.storage` when the log fails.
    @discardableResult
    public func delete(id: UUID) async throws -> Bool {
        try await write(id) { existing in existing == nil ? nil : .deleted(id: id) }
    }

    /// Purges the activity with `id`: a `$purged` tombstone ends its stream for good (through
    /// the store's one path, `EventStore.purge(streams:metadata:)`). The activity leaves the
    /// projection; adding its id again fails with `RepositoryError.streamPurged`, after a
    /// reopen and a full replay too; the next compaction removes its events. A soft-deleted
    /// activity is purged all the same (that releases its history).
    /// - Parameters:
    ///   - id: The activity's id.
    ///   - metadata: Recorded with the tombstone (who purged, and why).
    /// - Returns: What was done: `.written` with the tombstone's envelope, `.absent` for an id
    ///   that never had an event, or `.alreadyPurged`.
    /// - Throws: `RepositoryError.storage` when the log fails.
    @discardableResult
    public func purge(id: UUID, metadata: EventMetadata = .none) async throws -> StreamDeletion {
        try await store.purge(stream: ActivityEventCodec.stream(of: id), metadata: metadata)
    }

    /// Purges activities atomically (one batch). See ``purge(id:metadata:)``.
    /// - Returns: How many were purged (ids with no stream, or purged already, are skipped).
    /// - Throws: `RepositoryError.misuse` for an id given twice; `RepositoryError.storage`
    ///   (nothing is purged then).
    @discardableResult
    public func purgeAll(ids: [UUID], metadata: EventMetadata = .none) async throws -> Int {
        try await store.purge(streams: ids.map(ActivityEventCodec.stream(of:)), metadata: metadata)
            .count { $0.envelope != nil }
    }

    public func end(id: UUID, at date: Date) async throws {
        try Self.validate(date, "end date")
        try await write(id) { existing in
            guard let existing else { throw RepositoryError.notFound(.uuid(id)) }
            guard date >= existing.startDate else {
                throw RepositoryError.validationFailed("end date \(date) is before the start date \(existing.startDate) of activity \(id)")
            }
            return .ended(id: id, at: date)
        }
    }

    /// Appends several events atomically (one batch): all happen or none.
    /// Each is checked as the single-event writes check it, in order.
    /// - Parameters:
    ///   - events: The events, in order.
    ///   - metadata: Recorded with every event of the batch: an importer tags its batches with
    ///     where they came from (`eventkernel import` resumes after the last batch so tagged).
    /// - Throws: `RepositoryError`: an event that does not apply (then nothing is appended), or
    ///   a storage failure.
    public func apply(_ events: [ActivityEvent], metadata: EventMetadata = .none) async throws {
        guard !events.isEmpty else { return }
        try await store.execute { command in
            command.reserveCapacity(events.count)
            // The state each id will have after the events so far, so later events in the
            // batch are checked against earlier ones.
            var simulated: [UUID: ActivityModel?] = [:]
            simulated.reserveCapacity(events.count)
            for event in events {
                let id = event.activityID
                let existing: ActivityModel?
                if let known = simulated[id] {
                    existing = known
                } else {
                    existing = command.read(ActivityEventCodec.stream(of: id), versioned: { projection.activityAndVersion(id: id) })
                }
                let next: ActivityModel?
                switch event {
                case .added(let model):
                    try Self.validate(model)
                    if existing != nil { throw RepositoryError.alreadyExists(.uuid(id)) }
                    next = model
                case .updated(let model):
                    try Self.validate(model)
                    if existing == nil { throw RepositoryError.notFound(.uuid(id)) }
                    next = model
                case .ended(_, let date):
                    try Self.validate(date, "end date")
                    guard var model = existing else { throw RepositoryError.notFound(.uuid(id)) }
                    if date < model.startDate {
                        throw RepositoryError.validationFailed("end date \(date) is before the start date \(model.startDate) of activity \(id)")
                    }
                    model.endDate = date
                    next = model
                case .deleted:
                    if existing == nil { continue }
                    next = nil
                }
                simulated[id] = .some(next)
                command.append(codec.encode(event), metadata: metadata)
            }
        }
    }

    /// Decides and appends one event for `id` through the store's command path (version read
    /// before state, conflicts retried on the new state).
    /// - Returns: Whether an event was appended.
    @discardableResult
    private func write(_ id: UUID, _ decide: (ActivityModel?) throws -> ActivityEvent?) async throws -> Bool {
        try await store.execute { command in
            let existing = command.read(ActivityEventCodec.stream(of: id), versioned: { projection.activityAndVersion(id: id) })
            guard let event = try decide(existing) else { return false }
            command.append(codec.encode(event))
            return true
        }
    }

    static func validate(_ activity: ActivityModel) throws {
        try validate(activity.startDate, "start date")
        if let end = activity.endDate {
            try validate(end, "end date")
            guard end >= activity.startDate else {
                throw RepositoryError.validationFailed("end date \(end) is before the start date \(activity.startDate) of activity \(activity.id)")
            }
        }
        guard !activity.type.rawValue.isEmpty else {
            throw RepositoryError.validationFailed("activity \(activity.id) has an empty type")
        }
    }

    static func validate(_ date: Date, _ what: String) throws {
        guard date.timeIntervalSince1970.isFinite else {
            throw RepositoryError.validationFailed("\(what) is not a finite date")
        }
    }

    // MARK: Rebuilds

    /// Rebuilds the activity index from the log in the background while the current one keeps
    /// answering, then switches to it in one step, through the store's one rebuild path
    /// (`EventStore.rebuild(_:from:progress:)`): a query reads either the complete old index or
    /// the complete new one, observers are told after the switch, and every write committed
    /// meanwhile is in the new index. A snapshot of it is written when the store writes
    /// snapshots. The process holds both indexes while it runs.
    ///
    /// The fold is this build's: a rebuild picks up what changed in the projection's code
    /// since the index was built (a fixed fold, a new index layout), and clears integrity
    /// issues the new fold no longer meets.
    /// - Parameter progress: Called after each batch and after the switch, outside every lock.
    /// - Throws: `RepositoryError.undecodableEvent` with the position and cause when an event
    ///   does not decode; `CancellationError` when the task is cancelled; as the store's
    ///   rebuild. The current index stays in force on every error.
    public func rebuild(progress: (@Sendable (RebuildProgress) -> Void)? = nil) async throws {
        try await store.rebuild(projection, from: ActivityProjection(), progress: progress)
    }

    // MARK: Observation

    public func observe(query: ActivityQuery) -> AsyncStream<[ActivityModel]> {
        ActivityObservation.stream(query: query, projection: projection, store: store)
    }

    // MARK: Read-only followers

    /// For a repository opened with ``openReadOnly(at:logger:)``: reads what a writer appended
    /// since, through `EventStore.refresh()` (the store's position and versions advance,
    /// observers and subscribers are told).
    /// - Returns: The number of events read.
    /// - Throws: `RepositoryError.storage` when the log cannot be read.
    @discardableResult
    public func refresh() throws -> Int {
        try store.refresh()
    }
}
