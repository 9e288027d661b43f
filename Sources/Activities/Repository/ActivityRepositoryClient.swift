public import Foundation

/// The activity repository as a struct of closures, for dependency injection.
///
/// ```swift
/// struct Feature { var activities: ActivityRepositoryClient }
/// let live = Feature(activities: ActivityRepositoryClient(repository: try EventSourcedActivityRepository.open(at: url)))
/// let test = Feature(activities: ActivityRepositoryClient(repository: InMemoryActivityRepository()))
/// let preview = Feature(activities: .preview)
/// ```
/// Override single closures in tests (`client.add = { _ in throw ... }`) to script failures.
public struct ActivityRepositoryClient: Sendable {
    /// See ``ActivityRepositoryProtocol/fetch(query:)``.
    public var fetch: @Sendable (ActivityQuery) async throws -> [ActivityModel]
    /// See ``ActivityRepositoryProtocol/fetch(range:)``.
    public var fetchRange: @Sendable (ActivityRangeQuery) async throws -> [ActivityModel]
    /// See ``ActivityRepositoryProtocol/add(_:)``.
    public var add: @Sendable (ActivityModel) async throws -> Void
    /// See ``ActivityRepositoryProtocol/update(_:)``.
    public var update: @Sendable (ActivityModel) async throws -> Void
    /// See the plan's `delete(id:)` of ``ActivityRepositoryProtocol``, which returns nothing, as
    /// the apps' clients do; an unknown id is not an error.
    public var delete: @Sendable (UUID) async throws -> Void
    /// See ``ActivityRepositoryProtocol/end(id:at:)``.
    public var end: @Sendable (UUID, Date) async throws -> Void
    /// See ``ActivityRepositoryProtocol/observe(query:)``.
    public var observe: @Sendable (ActivityQuery) -> AsyncStream<[ActivityModel]>

    /// Creates a client from closures.
    public init(
        fetch: @escaping @Sendable (ActivityQuery) async throws -> [ActivityModel],
        fetchRange: @escaping @Sendable (ActivityRangeQuery) async throws -> [ActivityModel],
        add: @escaping @Sendable (ActivityModel) async throws -> Void,
        update: @escaping @Sendable (ActivityModel) async throws -> Void,
        delete: @escaping @Sendable (UUID) async throws -> Void,
        end: @escaping @Sendable (UUID, Date) async throws -> Void,
        observe: @escaping @Sendable (ActivityQuery) -> AsyncStream<[ActivityModel]>
    ) {
        self.fetch = fetch
        self.fetchRange = fetchRange
        self.add = add
        self.update = update
        self.delete = delete
        self.end = end
        self.observe = observe
    }

    /// Creates a client from the five closures of the apps' repository plans; `fetchRange` and
    /// `end`, which those plans do not have, throw ``RepositoryUnimplemented`` until set.
    public init(
        fetch: @escaping @Sendable (ActivityQuery) async throws -> [ActivityModel],
        add: @escaping @Sendable (ActivityModel) async throws -> Void,
        update: @escaping @Sendable (ActivityModel) async throws -> Void,
        delete: @escaping @Sendable (UUID) async throws -> Void,
        observe: @escaping @Sendable (ActivityQuery) -> AsyncStream<[ActivityModel]>
    ) {
        self.init(
            fetch: fetch, fetchRange: { _ in throw RepositoryUnimplemented(name: "fetchRange") },
            add: add, update: update, delete: delete,
            end: { _, _ in throw RepositoryUnimplemented(name: "end") }, observe: observe)
    }

    /// A client forwarding to `repository`. (Taking `any`, as the apps' plan's own
    /// `init(repository:)` does: an app that keeps the plan's initializer declares the same
    /// signature, which then shadows this one instead of making every call ambiguous.)
    public init(repository: any ActivityRepositoryProtocol) {
        self.init(
            fetch: { try await repository.fetch(query: $0) },
            fetchRange: { try await repository.fetch(range: $0) },
            add: { try await repository.add($0) },
            update: { try await repository.update($0) },
            delete: { _ = try await repository.delete(id: $0) },
            end: { try await repository.end(id: $0, at: $1) },
            observe: { repository.observe(query: $0) })
    }

    /// A client over a fresh ``InMemoryActivityRepository`` holding `activities`.
    /// - Throws: `RepositoryError` for duplicate ids or invalid dates in `activities`.
    public static func inMemory(_ activities: [ActivityModel] = []) throws -> ActivityRepositoryClient {
        ActivityRepositoryClient(repository: try InMemoryActivityRepository(validating: activities))
    }

    /// An in-memory client holding ``ActivityModel/previewData``, for previews.
    public static var preview: ActivityRepositoryClient {
        ActivityRepositoryClient(repository: InMemoryActivityRepository(activities: ActivityModel.previewData))
    }

    /// A client whose every call fails: a safe default that surfaces a missing dependency.
    public static var unimplemented: ActivityRepositoryClient {
        let fail: @Sendable (String) -> any Error = { RepositoryUnimplemented(name: $0) }
        return ActivityRepositoryClient(
            fetch: { _ in throw fail("fetch") }, fetchRange: { _ in throw fail("fetchRange") },
            add: { _ in throw fail("add") }, update: { _ in throw fail("update") },
            delete: { _ in throw fail("delete") }, end: { _, _ in throw fail("end") },
            observe: { _ in AsyncStream { $0.finish() } })
    }
}

/// Thrown by ``ActivityRepositoryClient/unimplemented``.
public struct RepositoryUnimplemented: Error, CustomStringConvertible {
    /// The closure that was called.
    public var name: String
    public var description: String { "ActivityRepositoryClient.\(name) is not implemented in this context" }
}
