import EventKernel
public import Foundation

extension EventSourcedActivityRepository {
    /// The activity's version: how many events its stream holds (0 for an id never written;
    /// a deleted activity keeps counting). What an HTTP service sends as an `ETag`.
    /// - Complexity: O(1).
    public func version(of id: UUID) -> UInt64 {
        store.version(of: ActivityEventCodec.stream(of: id))
    }

    /// The activity with `id` and the version it is at, read version first: the version can
    /// then be older than the state, never newer, so an ``update(_:expectedVersion:)`` made
    /// from a state that changed meanwhile conflicts rather than overwriting the change.
    /// - Returns: `nil` when no such activity exists.
    public func versionedActivity(id: UUID) -> (activity: ActivityModel, version: UInt64)? {
        let version = version(of: id)
        return activity(id: id).map { ($0, version) }
    }

    /// Replaces an existing activity if its version is still `expectedVersion` (optimistic
    /// locking for a caller that edited what it read, as an HTTP `If-Match` asks).
    /// - Throws: `RepositoryError.conflict` when the activity changed since (nothing written,
    ///   no retry), `notFound`, `validationFailed`, storage errors.
    public func update(_ activity: ActivityModel, expectedVersion: UInt64) async throws {
        try Self.validate(activity)
        try await store.execute { command in
            let existing = command.read(ActivityEventCodec.stream(of: activity.id)) { self.activity(id: activity.id) }
            guard existing != nil else { throw RepositoryError.notFound(.uuid(activity.id)) }
            command.append(codec.encode(.updated(activity)), expectedVersion: expectedVersion)
        }
    }
}

extension ActivityModel {
    /// Checks the activity as every repository write does: finite dates, an end not before the
    /// start, a non-empty type. For other implementations of ``ActivityRepositoryProtocol``
    /// (an SQL one) that must refuse exactly what the event-sourced one refuses.
    /// - Throws: `RepositoryError.validationFailed` saying what is wrong.
    public func validate() throws {
        try EventSourcedActivityRepository.validate(self)
    }
}
