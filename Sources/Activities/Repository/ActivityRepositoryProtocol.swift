import EventKernel
public import Foundation

/// The repository API Swift apps write against for activities.
///
/// Its first five requirements are the apps' repository plan's, exactly as the plan writes
/// them (`fetch(query:)`, `add`, `update`, `delete(id:)` returning nothing, `observe`), so a
/// backend written to the plan (a Core Data repository, an in-memory actor) conforms unchanged.
/// The requirements beyond them (`fetch(range:)`, `end(id:at:)`, and `delete(id:)` reporting
/// whether it deleted) have default implementations built on those five; a backend that can do
/// better implements them too. Implement at least one of the two `delete(id:)`s: each default
/// calls the other.
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
    /// Records a new activity.
    func add(_ activity: ActivityModel) async throws
    /// Replaces an existing activity (matched by id).
    func update(_ activity: ActivityModel) async throws
    /// Removes an activity; an unknown id is not an error and records nothing. (The plan's
    /// spelling; the default calls the `Bool`-returning one.)
    func delete(id: UUID) async throws
    /// The current result of `query` at once, then a new result after each committed change
    /// that alters it; ends when the consumer stops iterating or the store closes.
    func observe(query: ActivityQuery) -> AsyncStream<[ActivityModel]>

    /// The activities matching a date-range query (start date in a closed range, or overlapping
    /// an interval). The default filters what `fetch(query:)` returns for the query's types:
    /// O(n) for n activities.
    func fetch(range: ActivityRangeQuery) async throws -> [ActivityModel]
    /// Removes an activity, saying whether there was one; an unknown id is not an error and
    /// records nothing. A statement `try await repository.delete(id: id)` calls the plan's
    /// spelling; this one answers where a `Bool` is wanted (`if try await ...delete(id:)`).
    /// The default looks for the id with `fetch(query:)` (O(n)), then calls the plan's
    /// `delete(id:)`: not atomic, so a backend that can tell should implement this.
    /// - Returns: Whether an activity was deleted.
    @_disfavoredOverload @discardableResult
    func delete(id: UUID) async throws -> Bool
    /// Ends a running (or re-ends a finished) activity at `date`. The default finds it with
    /// `fetch(query:)` (O(n)), checks the date, and replaces it with `update`.
    func end(id: UUID, at date: Date) async throws
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

/// The defaults of the requirements beyond the plan's five.
extension ActivityRepositoryProtocol {
    /// Filters every activity of the query's types by the window, in the library's order
    /// (start date, then id bytes), up to the limit.
    /// - Throws: `RepositoryError.invalidQuery` for a window that ends before it starts, a NaN
    ///   bound or a negative limit; what `fetch(query:)` throws.
    public func fetch(range: ActivityRangeQuery) async throws -> [ActivityModel] {
        do { try range.validate() } catch { throw RepositoryError.invalidQuery(error.message) }
        let candidates = try await fetch(query: ActivityQuery(types: range.types, sortOrder: range.sortOrder))
        let matches = candidates.filter(range.matches).sorted { a, b in
            let (x, y) = (ActivityCursor(after: a), ActivityCursor(after: b))
            return range.sortOrder == .oldestFirst ? x < y : y < x
        }
        return range.effectiveLimit.map { Array(matches.prefix($0)) } ?? matches
    }

    /// Looks for `id` with `fetch(query:)`, then deletes with the plan's `delete(id:)`.
    /// - Returns: Whether an activity with `id` was there.
    @_disfavoredOverload @discardableResult
    public func delete(id: UUID) async throws -> Bool {
        let existed = try await fetch(query: ActivityQuery()).contains { $0.id == id }
        try await DefaultDelete.$reporting.withValue(ObjectIdentifier(Self.self)) {
            try await self.delete(id: id) as Void
        }
        return existed
    }

    /// Calls the `Bool`-returning `delete(id:)`.
    public func delete(id: UUID) async throws {
        // Called from this type's own `Bool` default: the type implements neither, and the two
        // defaults would call each other forever. Say so instead of overflowing the stack.
        precondition(DefaultDelete.reporting != ObjectIdentifier(Self.self),
                     "\(Self.self) implements neither delete(id:) of ActivityRepositoryProtocol; implement one")
        _ = try await DefaultDelete.$reporting.withValue(nil) { try await self.delete(id: id) as Bool }
    }

    /// Finds the activity with `fetch(query:)`, checks `date`, and replaces it with `update`.
    /// - Throws: `RepositoryError.notFound` for an unknown id, `validationFailed` for an end
    ///   before the start (or a NaN date); what `fetch(query:)` and `update` throw.
    public func end(id: UUID, at date: Date) async throws {
        try EventSourcedActivityRepository.validate(date, "end date")
        guard var activity = try await fetch(query: ActivityQuery()).first(where: { $0.id == id }) else {
            throw RepositoryError.notFound(.uuid(id))
        }
        guard date >= activity.startDate else {
            throw RepositoryError.validationFailed("end date \(date) is before the start date \(activity.startDate) of activity \(id)")
        }
        activity.endDate = date
        try await update(activity)
    }
}

/// The conforming type whose `Bool` default of `delete(id:)` is calling its plan's
/// `delete(id:)`, if any.
private enum DefaultDelete {
    @TaskLocal static var reporting: ObjectIdentifier?
}
