public import Activities
public import ActivityWorkload
import EventKernel
import EventKernelLifecycle
import EventKernelMetrics
public import EventLog
public import Foundation
public import Logging
public import ServiceLifecycle

/// The service's storage on EventKernel: an `EventSourcedActivityRepository` in a directory.
/// Every write is an event (synced by default: acknowledged once on disk), queries and the
/// live feed are answered from memory, history is the activity's events.
public final class EventKernelBackend: ActivityBackend {
    /// The repository underneath.
    public let repository: EventSourcedActivityRepository
    public var name: String { "eventkernel" }
    private let logger: Logger

    /// Opens (creating if needed) the store in `directory`.
    /// - Parameters:
    ///   - directory: The store directory.
    ///   - durability: `.synced` (the default: a write returns once it is on disk) or buffered.
    ///   - logger: The store's logger (ignored snapshots, failed snapshot writes) and the
    ///     lifecycle's.
    /// The store's metrics (`EventKernelMetrics`) go to the swift-metrics backend bootstrapped
    /// before this call; none when nothing is bootstrapped.
    /// - Throws: `RepositoryError.storage` (locked by another process, damaged) and what an
    ///   open throws.
    public init(directory: URL, durability: DurabilityPolicy = .synced, logger: Logger) throws {
        var configuration = EventStore.Configuration()
        configuration.log.durability = durability
        configuration.instrumentation = EventKernelMetrics.make()
        repository = try EventSourcedActivityRepository.open(at: directory, configuration: configuration, logger: logger)
        self.logger = logger
    }

    /// A backend over an existing repository (tests: an in-memory one).
    public init(repository: EventSourcedActivityRepository, logger: Logger) {
        self.repository = repository
        self.logger = logger
    }

    /// `EventStoreService` (product `EventKernelLifecycle`): closes the store on shutdown.
    public var lifecycle: any Service { EventStoreService(store: repository.store, logger: logger) }

    public func close() async throws { try await repository.close() }

    public func fetch(query: ActivityQuery) async throws -> [ActivityModel] { try repository.activities(matching: query) }
    public func fetch(range: ActivityRangeQuery) async throws -> [ActivityModel] { try repository.activities(in: range) }
    public func add(_ activity: ActivityModel) async throws { try await repository.add(activity) }
    public func update(_ activity: ActivityModel) async throws { try await repository.update(activity) }
    public func delete(id: UUID) async throws -> Bool { try await repository.delete(id: id) }
    public func end(id: UUID, at date: Date) async throws { try await repository.end(id: id, at: date) }
    public func observe(query: ActivityQuery) -> AsyncStream<[ActivityModel]> { repository.observe(query: query) }

    public func versionedActivity(id: UUID) async throws -> (activity: ActivityModel, version: UInt64)? {
        repository.versionedActivity(id: id)
    }

    public func update(_ activity: ActivityModel, expectedVersion: UInt64) async throws {
        try await repository.update(activity, expectedVersion: expectedVersion)
    }

    public func apply(_ operations: [ActivityOperation]) async throws {
        try await repository.apply(operations.map { operation in
            switch operation {
            case .add(let model): .added(model)
            case .update(let model): .updated(model)
            case .end(let id, let date): .ended(id: id, at: date)
            case .delete(let id): .deleted(id: id)
            }
        })
    }

    public func history(of id: UUID) async throws -> [ActivityChange] {
        var state: ActivityModel?
        return try repository.history(of: id).map { entry in
            let kind: ActivityChange.Kind
            switch entry.event {
            case .added(let model): (kind, state) = (.added, model)
            case .updated(let model): (kind, state) = (.updated, model)
            case .ended(_, let date): (kind, state) = (.ended, state.map { var ended = $0; ended.endDate = date; return ended })
            case .deleted: (kind, state) = (.deleted, nil)
            }
            return ActivityChange(version: entry.entityVersion, recordedAt: entry.recordedAt, kind: kind, activity: state)
        }
    }
}
