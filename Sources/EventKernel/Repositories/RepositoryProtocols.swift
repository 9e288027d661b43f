/// A repository whose entities can be read by id or all at once.
public protocol ReadableRepository<Entity>: Sendable {
    /// The stored entity.
    associatedtype Entity: Identifiable & Sendable
    /// The entity with `id`, or `nil`.
    func fetch(id: Entity.ID) -> Entity?
    /// Every entity, in an order the repository documents.
    func fetchAll() -> [Entity]
}

/// A repository that accepts changes.
public protocol WritableRepository<Entity>: ReadableRepository {
    /// Adds a new entity. - Throws: ``RepositoryError/alreadyExists(_:)`` and storage errors.
    func add(_ entity: Entity) async throws
    /// Replaces an existing entity. - Throws: ``RepositoryError/notFound(_:)`` and storage errors.
    func update(_ entity: Entity) async throws
    /// Inserts or replaces an entity (an upsert). - Throws: storage errors.
    func save(_ entity: Entity) async throws
    /// Deletes an entity; an unknown id is not an error.
    /// - Returns: Whether an entity was deleted.
    /// - Throws: Storage errors.
    @discardableResult
    func delete(id: Entity.ID) async throws -> Bool
    /// Adds several entities atomically (all or none).
    func addAll(_ entities: [Entity]) async throws
    /// Replaces several entities atomically (all or none).
    func updateAll(_ entities: [Entity]) async throws
    /// Deletes several entities atomically (all or none); unknown ids are skipped.
    /// - Returns: How many were deleted.
    @discardableResult
    func deleteAll(ids: [Entity.ID]) async throws -> Int
}

/// A repository that answers predicate queries.
public protocol QueryableRepository<Entity>: ReadableRepository {
    /// The entities matching `predicate`, sorted by `areInIncreasingOrder` when given, at most `limit`.
    func fetch(
        where predicate: @escaping @Sendable (Entity) -> Bool,
        sortedBy areInIncreasingOrder: (@Sendable (Entity, Entity) -> Bool)?,
        limit: Int?
    ) -> [Entity]
}

/// A repository that pages through its entities.
public protocol PaginatedRepository<Entity>: ReadableRepository {
    /// At most `limit` entities starting at `offset` in the repository's stable order.
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` for a negative offset or limit.
    func fetchPage(offset: Int, limit: Int) throws -> [Entity]
}

/// A repository whose query results can be observed.
public protocol ListenableRepository<Entity>: ReadableRepository {
    /// Yields the matching entities at once, then again after each commit that changes them.
    func observe(where predicate: @escaping @Sendable (Entity) -> Bool) -> AsyncStream<[Entity]>
}
