public import Foundation

/// Reading the repository: id lookups, queries, pages, counts and `explain`, each run on the
/// published copy of the entity table, outside the projection's lock.
extension EventSourcedRepository {
    /// The entity with `id`, or `nil`. - Complexity: O(1).
    public func fetch(id: Entity.ID) -> Entity? {
        let key = id.entityID
        return projection.withLockedState { $0[key] }
    }

    /// The entity's stream version (0: it never existed), for ``update(_:expectedVersion:)``.
    /// A deleted entity keeps the version of its deletion.
    /// - Complexity: O(1).
    public func version(of id: Entity.ID) -> UInt64 {
        let key = id.entityID
        return projection.withLockedState { $0.version(of: key) }
    }

    /// Every entity, in the default order (declared, else insertion).
    /// - Complexity: O(n), plus a sort when a default order is declared but no index serves it.
    public func fetchAll() -> [Entity] {
        (try? fetch(EntityQuery<Entity>())) ?? []
    }

    /// The entities matching `query`, in its order (see ``EntityQuery`` for costs).
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` for a negative offset or limit, a NaN
    ///   equality or `IN` value, or a cursor taken from another query (or under another
    ///   declaration of the indexes).
    public func fetch(_ query: EntityQuery<Entity>) throws -> [Entity] {
        let (table, slots, _) = try run(query, wantsCursor: false)
        return table.entities(at: slots)
    }

    /// The published table: a copy-on-write copy that queries run on outside the projection's
    /// lock (their predicates are the domain's code).
    var publishedTable: State { projection.read { $0 } }

    /// Runs `query` on the published table: the one path of every query.
    /// - Parameter wantsCursor: Whether to make the cursor after the last match (a page's).
    private func run(_ query: EntityQuery<Entity>, wantsCursor: Bool) throws -> (table: State, slots: [Int32], next: QueryCursor?) {
        try queryLatency.time {
            let table = publishedTable
            let (slots, next) = try table.run(query, defaultOrder: defaultOrder, cached: true, wantsCursor: wantsCursor)
            return (table, slots, next)
        }
    }

    /// The first entity matching `query`, or `nil`.
    public func fetchOne(_ query: EntityQuery<Entity>) throws -> Entity? {
        try fetch(query.limit(1)).first
    }

    /// A page of `query` and the cursor to continue after it.
    /// - Throws: As ``fetch(_:)``.
    public func fetchPage(_ query: EntityQuery<Entity>) throws -> QueryPage<Entity> {
        let (table, slots, next) = try run(query, wantsCursor: true)
        let complete = query.effectiveLimit.map { slots.count < $0 } ?? true
        return QueryPage(entities: table.entities(at: slots), nextCursor: complete ? nil : next)
    }

    /// How many entities match `query`, ignoring its limit, offset and cursor.
    /// - Complexity: O(log n + k / c) when one index applies every condition, for chunks of c
    ///   entries (see ``EntityQuery``).
    public func count(_ query: EntityQuery<Entity>) throws -> Int {
        try queryLatency.time { try publishedTable.count(query, cached: true) }
    }

    /// How a query is answered: which index, in which direction, what is filtered or sorted
    /// after. For tests and tuning, like SQL's `EXPLAIN QUERY PLAN`. A query that ``fetch(_:)``
    /// would refuse (a negative offset or limit) is described as `"invalid query"`.
    public func explain(_ query: EntityQuery<Entity>) -> String {
        let table = publishedTable
        return table.explain(query, defaultOrder: defaultOrder, declared: table.declared, cached: true)
    }

    /// The entities matching `query`, with their ids and versions.
    func matches(_ query: EntityQuery<Entity>) throws -> [Match] {
        let (table, slots, _) = try run(query, wantsCursor: false)
        return zip(slots, table.entities(at: slots)).map { slot, entity in
            let head = table.rows.heads[Int(slot)]
            return Match(entity: entity, id: head.id, version: head.version)
        }
    }

    /// A query result with what batch changes and observation compare: the stream and version.
    struct Match: Sendable {
        var entity: Entity
        var id: EntityID
        var version: UInt64
    }

    /// The entities matching `predicate`, sorted by `areInIncreasingOrder` (default: the
    /// default order), at most `limit`. `predicate` and the sort run outside every lock: they
    /// may read this or any other repository. Prefer ``fetch(_:)`` with indexed conditions.
    /// - Complexity: O(n) for the filter plus O(m log m) for the sort of m matches.
    public func fetch(
        where predicate: @escaping @Sendable (Entity) -> Bool,
        sortedBy areInIncreasingOrder: (@Sendable (Entity, Entity) -> Bool)? = nil,
        limit: Int? = nil
    ) -> [Entity] {
        var matches = (try? fetch(EntityQuery<Entity>().where(predicate))) ?? []
        if let areInIncreasingOrder {
            matches.sort { areInIncreasingOrder($0, $1) }
        }
        if let limit, limit < matches.count { matches.removeLast(matches.count - max(0, limit)) }
        return matches
    }

    /// The entities a Foundation `Predicate` accepts, in the default order:
    ///
    /// ```swift
    /// let favorites = try restaurants.fetch(matching: #Predicate { $0.isFavorite })
    /// ```
    ///
    /// The predicate is evaluated outside every lock, against every entity: a scan. For large
    /// sets prefer ``fetch(_:)`` with a condition on a declared index.
    /// - Parameter predicate: The condition, built with `#Predicate`.
    /// - Throws: The error the predicate's evaluation throws, unchanged (for example a
    ///   force-unwrapped `nil`); no partial result is returned.
    /// - Complexity: O(n) evaluations.
    public func fetch(matching predicate: Predicate<Entity>) throws -> [Entity] {
        let (table, slots, _) = try run(EntityQuery<Entity>(), wantsCursor: false)
        var matches: [Int32] = []
        for slot in slots
        where try predicate.evaluate(table.bySlot[Int(slot)]!) {
            matches.append(slot)
        }
        return table.entities(at: matches)
    }

    /// A page of entities in the default order.
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` for a negative offset or limit.
    /// - Complexity: O(log n + offset / 1,024 + limit) in insertion order (skipped a chunk at a time).
    public func fetchPage(offset: Int, limit: Int) throws -> [Entity] {
        guard offset >= 0, limit >= 0 else { throw RepositoryError.invalidQuery("offset \(offset) and limit \(limit) must not be negative") }
        guard limit > 0 else { return [] }
        return try fetch(EntityQuery<Entity>().offset(offset).limit(limit))
    }

    /// The number of entities. - Complexity: O(1).
    public var count: Int { projection.withLockedState { $0.count } }
}
