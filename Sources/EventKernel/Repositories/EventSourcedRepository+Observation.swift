/// Observing a query: its result now and after every commit that changed it.
extension EventSourcedRepository {
    /// Yields the result of `query` at once, then again after each commit that changed it, as
    /// GRDB's `ValueObservation` does: commits in between coalesce (a slow consumer gets the
    /// newest result), and a result equal to the last one yielded is not yielded again (compared
    /// by `Equatable` when the entity is, else by ids and stream versions). The query's predicate
    /// runs outside every lock. The stream ends when the consumer stops iterating or the store
    /// closes.
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` for a query that could never run (a
    ///   negative offset or limit, a reversed range, a cursor from another query): checked once, here, because
    ///   validity does not change with the rows; an observation never answers with a silent `[]`.
    public func observe(_ query: EntityQuery<Entity>) throws -> AsyncStream<[Entity]> {
        _ = try publishedTable.compile(query, defaultOrder: defaultOrder, cached: true)
        return observation(of: query)
    }

    /// Observes the entities matching `predicate`, in the default order (see ``observe(_:)``).
    public func observe(where predicate: @escaping @Sendable (Entity) -> Bool) -> AsyncStream<[Entity]> {
        // A predicate alone has nothing to check.
        observation(of: EntityQuery<Entity>().where(predicate))
    }

    /// The observation of a checked query (so `run` cannot throw in it).
    private func observation(of query: EntityQuery<Entity>) -> AsyncStream<[Entity]> {
        let typeName = self.typeName
        return QueryObservation.stream(
            store: store,
            listen: { [projection] poke in
                let token = projection.addListener { envelopes in
                    // No events: a rebuild replaced the whole table.
                    if envelopes.isEmpty || envelopes.contains(where: { $0.stream.entityType == typeName }) { poke() }
                }
                return { [weak projection] in projection?.removeListener(token) }
            },
            // The generation is read before the rows: a rebuild may fold the same events (same
            // ids and versions) into other values, so rows read after a switch never count as
            // the same as rows read before it.
            fetch: { [weak self, projection] () -> (generation: UInt64, rows: [Match]) in
                let generation = projection.generation
                return (generation, (try? self?.matches(query)) ?? [])
            },
            isDuplicate: { old, new in old.generation == new.generation && Self.sameRows(old.rows, new.rows) },
            output: { $0.rows.map(\.entity) })
    }

    private static func sameRows(_ old: [Match], _ new: [Match]) -> Bool {
        guard old.count == new.count else { return false }
        for index in old.indices where old[index].id != new[index].id || old[index].version != new[index].version {
            // A new version may hold an equal value (a save of what was there): equal by
            // `Equatable` counts as unchanged.
            guard let old = old[index].entity as? any Equatable, equal(old, new[index].entity) else { return false }
        }
        return true
    }

    private static func equal<T: Equatable>(_ a: T, _ b: Any) -> Bool {
        (b as? T).map { $0 == a } ?? false
    }
}
