public import Foundation

/// The repository API Swift apps write against for activities.
///
/// Implementations: ``EventSourcedActivityRepository`` (durable, event-sourced),
/// ``InMemoryActivityRepository`` (same engine, no disk) and, for dependency injection,
/// ``ActivityRepositoryClient``.
///
/// Errors are `RepositoryError` (from EventKernel): `alreadyExists` when adding an id that
/// exists, `notFound` when updating or ending an unknown id, `validationFailed` for an end date
/// before the start date, `invalidQuery` for a malformed query, `storage` when the disk fails,
/// `closed` after ``EventSourcedActivityRepository/close()``. Deleting an unknown id is not an
/// error and records nothing.
public protocol ActivityRepositoryProtocol: Sendable {
    /// The activities matching `query`, in its order, paginated by its limit, offset and cursor.
    func fetch(query: ActivityQuery) async throws -> [ActivityModel]
    /// The activities matching a date-range query (start date in a closed range, or overlapping
    /// an interval).
    func fetch(range: ActivityRangeQuery) async throws -> [ActivityModel]
    /// Records a new activity.
    func add(_ activity: ActivityModel) async throws
    /// Replaces an existing activity (matched by id).
    func update(_ activity: ActivityModel) async throws
    /// Removes an activity; an unknown id is not an error and records nothing.
    /// - Returns: Whether an activity was deleted.
    @discardableResult
    func delete(id: UUID) async throws -> Bool
    /// Ends a running (or re-ends a finished) activity at `date`.
    func end(id: UUID, at date: Date) async throws
    /// The current result of `query` at once, then a new result after each committed change
    /// that alters it; ends when the consumer stops iterating or the store closes.
    func observe(query: ActivityQuery) -> AsyncStream<[ActivityModel]>
}

extension ActivityRepositoryProtocol {
    /// Activities whose start date lies in `range` (both ends inclusive), oldest first.
    public func fetch(startingIn range: ClosedRange<Date>, types: Set<ActivityType>? = nil) async throws -> [ActivityModel] {
        try await fetch(range: ActivityRangeQuery(.startingIn, from: range.lowerBound, to: range.upperBound, types: types))
    }

    /// Activities overlapping `range`: begun by its end and not ended before its start (still
    /// running counts), oldest first.
    public func fetch(overlapping range: ClosedRange<Date>, types: Set<ActivityType>? = nil) async throws -> [ActivityModel] {
        try await fetch(range: ActivityRangeQuery(.overlapping, from: range.lowerBound, to: range.upperBound, types: types))
    }
}
