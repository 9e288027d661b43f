/// The writes that are a command of their own: one entity, a batch, or every entity a query
/// matches, each atomic through ``EventStore/execute(maxAttempts:_:)``.
extension EventSourcedRepository {
    /// Adds an entity.
    /// - Throws: ``RepositoryError/alreadyExists(_:)`` (also when a concurrent add of the same
    ///   id won), the validator's error, storage errors.
    public func add(_ entity: Entity) async throws {
        try await store.execute { try self.add(entity, in: &$0) }
    }

    /// Replaces an entity; a concurrent change is retried on the new state.
    /// - Throws: ``RepositoryError/notFound(_:)``, the validator's error, storage errors.
    public func update(_ entity: Entity) async throws {
        try await store.execute { try self.update(entity, in: &$0) }
    }

    /// Replaces an entity if its version is still `expectedVersion` (optimistic locking for
    /// callers that edited what they read).
    /// - Throws: ``RepositoryError/conflict(stream:expected:actual:)`` when it changed meanwhile,
    ///   ``RepositoryError/notFound(_:)``, the validator's error, storage errors.
    public func update(_ entity: Entity, expectedVersion: UInt64) async throws {
        try await store.execute { try self.update(entity, expectedVersion: expectedVersion, in: &$0) }
    }

    /// Sets one property of an existing entity by a field event (``FieldEvent``), in a command
    /// of its own. See ``apply(_:_:to:expectedVersion:in:)``.
    /// - Parameters:
    ///   - event: The field event, registered on the repository's schema.
    ///   - value: The property's new value.
    ///   - id: The entity's id; it must exist.
    ///   - expectedVersion: When given, the entity's version must be this, or the call fails
    ///     with ``RepositoryError/conflict(stream:expected:actual:)``.
    /// - Throws: ``RepositoryError/notFound(_:)``, ``RepositoryError/misuse(_:)`` for an
    ///   unregistered event, the validator's error.
    public func apply<Value>(_ event: FieldEvent<Entity, Value>, _ value: Value, to id: Entity.ID, expectedVersion: UInt64? = nil) async throws {
        try await store.execute { try self.apply(event, value, to: id, expectedVersion: expectedVersion, in: &$0) }
    }

    /// Inserts or replaces an entity (an upsert). Concurrent saves of one entity all succeed,
    /// in commit order: the last one committed is the entity's state, and its history shows all.
    /// - Throws: The validator's error, storage errors.
    public func save(_ entity: Entity) async throws {
        try await store.execute { try self.save(entity, in: &$0) }
    }

    /// Deletes the entity with `id`; an unknown id is not an error and records nothing.
    /// - Returns: Whether an entity was deleted.
    /// - Throws: Storage errors.
    @discardableResult
    public func delete(id: Entity.ID) async throws -> Bool {
        try await store.execute { try self.delete(id: id, in: &$0) }
    }

    /// Purges the entity with `id`, in a command of its own. See ``purge(id:metadata:in:)``.
    /// - Returns: What was done: ``StreamDeletion/written(_:)`` with the tombstone's envelope,
    ///   ``StreamDeletion/absent`` for an id that never had an event, or
    ///   ``StreamDeletion/alreadyPurged``.
    /// - Throws: Storage errors.
    @discardableResult
    public func purge(id: Entity.ID, metadata: EventMetadata = .none) async throws -> StreamDeletion {
        let (decision, envelopes) = try await store.executeCommitting { try self.purgeDecision(id: id, metadata: metadata, in: &$0) }
        var written = envelopes.makeIterator()
        return StreamDeletion(decision, written: &written)
    }

    /// Purges entities atomically (one batch). See ``purge(id:metadata:in:)``.
    /// - Returns: How many were purged (ids with no stream, or purged already, are skipped).
    /// - Throws: ``RepositoryError/misuse(_:)`` for an id given twice; storage errors (nothing
    ///   is purged then).
    @discardableResult
    public func purgeAll(ids: [Entity.ID], metadata: EventMetadata = .none) async throws -> Int {
        guard !ids.isEmpty else { return 0 }
        return try await store.execute { command in
            command.reserveCapacity(ids.count)
            var purged = 0
            for id in ids where try self.purge(id: id, metadata: metadata, in: &command) { purged += 1 }
            return purged
        }
    }

    /// Adds entities atomically.
    /// - Throws: ``RepositoryError/alreadyExists(_:)`` (also for a duplicate within the batch);
    ///   nothing is written then.
    public func addAll(_ entities: [Entity]) async throws {
        guard !entities.isEmpty else { return }
        try await store.execute { command in
            // One table per command, sized once (growing it from empty was a tenth of a batch's decisions).
            command.reserveCapacity(entities.count)
            for entity in entities { try self.add(entity, in: &command) }
        }
    }

    /// Replaces entities atomically.
    /// - Throws: ``RepositoryError/notFound(_:)``; nothing is written then.
    public func updateAll(_ entities: [Entity]) async throws {
        guard !entities.isEmpty else { return }
        try await store.execute { command in
            command.reserveCapacity(entities.count)
            for entity in entities { try self.update(entity, in: &command) }
        }
    }

    /// Inserts or replaces entities atomically.
    public func saveAll(_ entities: [Entity]) async throws {
        guard !entities.isEmpty else { return }
        try await store.execute { command in
            command.reserveCapacity(entities.count)
            for entity in entities { try self.save(entity, in: &command) }
        }
    }

    /// Deletes entities atomically; unknown ids are skipped.
    /// - Returns: How many were deleted.
    @discardableResult
    public func deleteAll(ids: [Entity.ID]) async throws -> Int {
        guard !ids.isEmpty else { return 0 }
        return try await store.execute { command in
            command.reserveCapacity(ids.count)
            var deleted = 0
            for id in ids where try self.delete(id: id, in: &command) { deleted += 1 }
            return deleted
        }
    }

    /// Deletes every entity matching `query` (its conditions and predicate; an ordering,
    /// limit and offset choose which), atomically: one batch, one commit. Entities changed
    /// concurrently are checked again.
    /// - Returns: How many were deleted.
    /// - Throws: ``RepositoryError/invalidQuery(_:)``, storage errors; nothing is deleted then.
    @discardableResult
    public func deleteAll(matching query: EntityQuery<Entity>) async throws -> Int {
        try await store.execute { command in
            var deleted = 0
            for row in try self.matches(query) {
                // Expect the version of the state the query saw: an entity changed since (which
                // may no longer match) makes the command conflict and decide again.
                command.read(StreamID(self.typeName, row.id), stateVersion: row.version)
                command.append(try self.event(.deleted, row.id, nil))
                deleted += 1
            }
            return deleted
        }
    }

    /// Deletes every entity matching `predicate`, atomically. The predicate runs outside every
    /// lock. Prefer ``deleteAll(matching:)`` with indexed conditions.
    /// - Returns: How many were deleted.
    @discardableResult
    public func deleteAll(where predicate: @escaping @Sendable (Entity) -> Bool) async throws -> Int {
        try await deleteAll(matching: EntityQuery<Entity>().where(predicate))
    }

    /// Retention in one line: deletes, atomically, every entity whose `keyPath` is before
    /// `cutoff` (the forum's 30-day cleanup: `deleteAll(where: \.lastPostDate, before: monthAgo)`).
    /// An entity whose optional `keyPath` is `nil` is not before anything and is kept, as SQL's
    /// `DELETE ... WHERE last_refresh < ?` keeps it (Docs/Queries.md). With an index on
    /// `keyPath` it finds them in O(log n + k).
    /// - Returns: How many were deleted.
    @discardableResult
    public func deleteAll<Value: IndexValueConvertible>(
        where keyPath: any KeyPath<Entity, Value> & Sendable, before cutoff: Value
    ) async throws -> Int {
        try await deleteAll(matching: EntityQuery<Entity>().where(keyPath, lessThan: cutoff))
    }

    /// Applies `change` to every entity matching `query` and replaces them, atomically.
    /// The query's predicate and `change` run outside every lock.
    /// - Returns: How many were updated.
    /// - Throws: What `change` or the validator throws; nothing is written then.
    @discardableResult
    public func updateAll(
        matching query: EntityQuery<Entity>, _ change: (inout Entity) throws -> Void
    ) async throws -> Int {
        try await store.execute { command in
            var updated = 0
            for row in try self.matches(query) {
                let stream = StreamID(self.typeName, row.id)
                command.read(stream, stateVersion: row.version)
                var entity = row.entity
                try change(&entity)
                guard entity.id.entityID == row.id else {
                    throw RepositoryError.misuse(Misuse(.idChanged, "a batch update changed the id of \(stream) to \(entity.id.entityID)"))
                }
                try self.validate?(entity)
                command.append(try self.event(.updated, row.id, entity))
                updated += 1
            }
            return updated
        }
    }

    /// Applies `change` to every entity matching `predicate` and replaces them, atomically.
    /// - Returns: How many were updated.
    @discardableResult
    public func updateAll(
        where predicate: @escaping @Sendable (Entity) -> Bool, _ change: (inout Entity) throws -> Void
    ) async throws -> Int {
        try await updateAll(matching: EntityQuery<Entity>().where(predicate), change)
    }
}
