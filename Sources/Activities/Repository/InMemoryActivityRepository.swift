import EventKernel
import EventLog
public import Foundation

/// An ``ActivityRepositoryProtocol`` in memory, for tests and previews.
///
/// It is the event-sourced repository over an `InMemoryLog`: the same events, the same
/// projection and query engine, no disk. So it can never disagree with
/// ``EventSourcedActivityRepository`` about what a query returns or which writes are errors.
public final class InMemoryActivityRepository: ActivityRepositoryProtocol {
    /// The event-sourced repository underneath (for history and time travel in tests).
    public let base: EventSourcedActivityRepository

    /// Creates a repository holding `activities` (preview and test data), as the apps'
    /// in-memory repositories do: it cannot fail.
    ///
    /// Seed data is checked all the same: an activity whose id repeats an earlier one, or that
    /// ends before it starts, is a programming error in the seed and stops the program with a
    /// message naming it. Data that may be invalid goes through ``init(validating:)``.
    public convenience init(activities: [ActivityModel] = []) {
        do {
            try self.init(validating: activities)
        } catch {
            preconditionFailure("invalid seed activities for InMemoryActivityRepository: \(error)")
        }
    }

    /// Creates a repository holding `activities`, checking them.
    /// - Throws: `RepositoryError` if `activities` has duplicate ids or invalid dates.
    public init(validating activities: [ActivityModel]) throws {
        let codec = ActivityEventCodec()
        var seen = Set<UUID>()
        var records: [LogEntry] = []
        let now = LogTimestamp.now()
        for activity in activities {
            try EventSourcedActivityRepository.validate(activity)
            guard seen.insert(activity.id).inserted else { throw RepositoryError.alreadyExists(.uuid(activity.id)) }
            let event = codec.encode(.added(activity))
            // Seeded as already-committed events (version 1 of each activity), which the store
            // replays like any log: no async append is needed to build the initial state.
            records.append(LogEntry(timestamp: now, payload: EventEnvelope.encodeRecordPayload(
                eventType: event.eventType, schemaVersion: event.schemaVersion, stream: event.stream,
                entityVersion: 1, metadata: .none, payload: event.payload)))
        }
        base = try EventSourcedActivityRepository(log: InMemoryLog(records: records))
    }

    /// The activities matching `query`, synchronously.
    public func activities(matching query: ActivityQuery) throws -> [ActivityModel] { try base.activities(matching: query) }

    public func fetch(query: ActivityQuery) async throws -> [ActivityModel] { try base.activities(matching: query) }
    public func fetch(range: ActivityRangeQuery) async throws -> [ActivityModel] { try base.activities(in: range) }
    public func add(_ activity: ActivityModel) async throws { try await base.add(activity) }
    public func update(_ activity: ActivityModel) async throws { try await base.update(activity) }
    @discardableResult
    public func delete(id: UUID) async throws -> Bool { try await base.delete(id: id) }
    public func end(id: UUID, at date: Date) async throws { try await base.end(id: id, at: date) }
    public func observe(query: ActivityQuery) -> AsyncStream<[ActivityModel]> { base.observe(query: query) }
}
