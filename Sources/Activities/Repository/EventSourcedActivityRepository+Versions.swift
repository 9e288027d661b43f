import EventKernel
public import Foundation

extension EventSourcedActivityRepository {
    /// The activity's version: how many events its stream holds (0 for an id never written;
    /// a deleted activity keeps counting). What an HTTP service sends as an `ETag`.
    /// - Complexity: O(1).
    public func version(of id: UUID) -> UInt64 {
        projection.activityAndVersion(id: id).1
    }

    /// The activity with `id` and the version it is at, read together (the projection keeps
    /// each activity's version with it), so an ``update(_:expectedVersion:)`` made from this
    /// state conflicts exactly when the activity changed since.
    /// - Returns: `nil` when no such activity exists.
    public func versionedActivity(id: UUID) -> (activity: ActivityModel, version: UInt64)? {
        let (activity, version) = projection.activityAndVersion(id: id)
        return activity.map { ($0, version) }
    }

    /// Replaces an existing activity if its version is still `expectedVersion` (optimistic
    /// locking for a caller that edited what it read, as an HTTP `If-Match` asks).
    /// - Throws: `RepositoryError.conflict` when the activity changed since (nothing written,
    ///   no retry), `notFound`, `validationFailed`, storage errors.
    public func update(_ activity: ActivityModel, expectedVersion: UInt64) async throws {
        try Self.validate(activity)
        try await store.execute { command in
            let existing = command.read(ActivityEventCodec.stream(of: activity.id), versioned: { projection.activityAndVersion(id: activity.id) })
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
