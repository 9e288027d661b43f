/// Changes as part of a command (the `in:` forms): what each change checks and the event it
/// appends, so that several repositories' changes can share one atomic command.
extension EventSourcedRepository {
    func event(_ kind: OwnEventTypes.Kind, _ id: EntityID, _ entity: Entity?) throws -> EncodedEvent {
        // Read once: a rebuild may switch the schema, and the version must be the encoder's.
        let box = writingSchema
        return EncodedEvent(eventType: eventTypes[kind], schemaVersion: box.schema.version, stream: StreamID(typeName, id),
                     payload: try entity.map { try box.schema.encode($0) } ?? [])
    }

    /// Refuses writes once the projection failed: its state is not the log's.
    private func checkUsable() throws {
        if let failure = projection.failure { throw RepositoryError.undecodableEvent(failure) }
    }

    /// The entity of `stream` as the command reads it: state and version at once, from the
    /// projection that keeps both. The table is this type's version source, and its
    /// ``ProjectedState/Versioning`` reads the version the store checks by the same
    /// ``IndexedRows/lookup(_:)``, so the command and the store cannot disagree on it.
    private func current(_ stream: StreamID, in command: inout CommandContext) -> Entity? {
        let key = stream.entityID
        return command.read(stream, versioned: { projection.withLockedState { $0.entityAndVersion(key) } })
    }

    private func checkOnce(_ stream: StreamID, in command: CommandContext) throws {
        guard !command.isAppending(to: stream) else {
            throw RepositoryError.misuse(Misuse(.streamChangedTwice, "\(stream) is changed twice in one command; merge the changes into one"))
        }
    }

    /// Adds `entity` as part of `command`.
    /// - Throws: ``RepositoryError/alreadyExists(_:)`` (also when the command adds it already),
    ///   the validator's error.
    public func add(_ entity: Entity, in command: inout CommandContext) throws {
        try checkUsable()
        try validate?(entity)
        let stream = stream(of: entity.id)
        guard !command.isAppending(to: stream), current(stream, in: &command) == nil else {
            throw RepositoryError.alreadyExists(stream.entityID)
        }
        command.append(try event(.added, stream.entityID, entity))
    }

    /// Sets one property of an existing entity by a field event, as part of `command`: the log
    /// records `"<typeName>.<name>"` with the value alone.
    /// - Parameters:
    ///   - event: The field event; it must be registered on the repository's schema
    ///     (``EntitySchema/recording(_:)``).
    ///   - value: The property's new value.
    ///   - id: The entity's id; it must exist.
    ///   - expectedVersion: When given, the entity's version must be this (see
    ///     ``version(of:)``), or the command fails with a conflict instead of retrying.
    ///   - command: The command the change joins (``EventStore/execute(maxAttempts:_:)``).
    /// - Throws: ``RepositoryError/notFound(_:)``; ``RepositoryError/misuse(_:)`` with
    ///   ``Misuse/Code/unregisteredFieldEvent`` for an event the schema does not hold; the
    ///   validator's error (it sees the entity with the new value).
    public func apply<Value>(
        _ event: FieldEvent<Entity, Value>, _ value: Value, to id: Entity.ID, expectedVersion: UInt64? = nil,
        in command: inout CommandContext
    ) throws {
        try checkUsable()
        // Read once, as one reference (see `writingSchema`): a rebuild may switch the schema,
        // and the version must be the encoder's.
        let box = writingSchema
        guard let found = box.fieldEvents[event.name], found.event.keyPath == event.keyPath as AnyKeyPath else {
            throw RepositoryError.misuse(Misuse(.unregisteredFieldEvent,
                "the field event \"\(event.name)\" (setting \(event.keyPath)) is not registered on the schema of \(typeName)"))
        }
        let stream = stream(of: id)
        try checkOnce(stream, in: command)
        guard var entity = current(stream, in: &command) else { throw RepositoryError.notFound(stream.entityID) }
        entity[keyPath: event.keyPath] = value
        guard entity.id.entityID == stream.entityID else {
            throw RepositoryError.misuse(Misuse(.idChanged, "the field event \"\(event.name)\" would change the id of \(stream) to \(entity.id.entityID)"))
        }
        try validate?(entity)
        var payload: [UInt8] = []
        // The registered event's codec: the one its fold decodes with.
        try found.event.encode(value, &payload)
        let encoded = EncodedEvent(eventType: found.eventType, schemaVersion: box.schema.version, stream: stream, payload: payload)
        if let expectedVersion {
            command.append(encoded, expectedVersion: expectedVersion)
        } else {
            command.append(encoded)
        }
    }

    /// Replaces `entity` as part of `command`.
    /// - Parameters:
    ///   - entity: The new value; an entity with its id must exist.
    ///   - expectedVersion: When given, the entity's version must be this (see
    ///     ``version(of:)``), or the command fails with a conflict instead of retrying.
    ///   - command: The command the change joins (``EventStore/execute(maxAttempts:_:)``).
    /// - Throws: ``RepositoryError/notFound(_:)``, the validator's error.
    public func update(_ entity: Entity, expectedVersion: UInt64? = nil, in command: inout CommandContext) throws {
        try checkUsable()
        try validate?(entity)
        let stream = stream(of: entity.id)
        try checkOnce(stream, in: command)
        guard current(stream, in: &command) != nil else { throw RepositoryError.notFound(stream.entityID) }
        if let expectedVersion {
            command.append(try event(.updated, stream.entityID, entity), expectedVersion: expectedVersion)
        } else {
            command.append(try event(.updated, stream.entityID, entity))
        }
    }

    /// Inserts or replaces `entity` as part of `command`.
    /// - Throws: The validator's error.
    public func save(_ entity: Entity, in command: inout CommandContext) throws {
        try checkUsable()
        try validate?(entity)
        let stream = stream(of: entity.id)
        try checkOnce(stream, in: command)
        let exists = current(stream, in: &command) != nil
        command.append(try event(exists ? .updated : .added, stream.entityID, entity))
    }

    /// Deletes the entity with `id` as part of `command`: appends the entity type's own
    /// `deleted` event (what stores have always held), with no metadata of the caller's, unlike
    /// ``purge(id:metadata:in:)``: its signature stays as applications call it. A soft delete
    /// that records who deleted is ``EventStore/delete(stream:metadata:)`` (a `$deleted`
    /// tombstone, which every projection reads as this event).
    /// - Returns: Whether it existed (an unknown id appends nothing).
    @discardableResult
    public func delete(id: Entity.ID, in command: inout CommandContext) throws -> Bool {
        try checkUsable()
        let stream = stream(of: id)
        try checkOnce(stream, in: command)
        guard current(stream, in: &command) != nil else { return false }
        command.append(try event(.deleted, stream.entityID, nil))
        return true
    }

    /// Purges the entity with `id` as part of `command`: a `$purged` tombstone (``Tombstone``)
    /// ends its stream for good. The entity leaves the projection; adding its id again fails
    /// with ``RepositoryError/streamPurged(_:)`` from then on, after a reopen and a full replay
    /// too; the next compaction removes its events (Docs/Forgetting.md). A soft-deleted entity
    /// is purged all the same (that releases its history).
    /// - Parameters:
    ///   - id: The entity's id.
    ///   - metadata: Recorded with the tombstone (who purged, and why).
    ///   - command: The command the change joins (``EventStore/execute(maxAttempts:_:)``).
    /// - Returns: Whether a tombstone was appended: `false` for an id that never had an event
    ///   or is purged already (the command form cannot tell them apart;
    ///   ``purge(id:metadata:)`` returns a ``StreamDeletion`` that does).
    /// - Throws: ``RepositoryError/misuse(_:)`` when the command changes the stream already.
    @discardableResult
    public func purge(id: Entity.ID, metadata: EventMetadata = .none, in command: inout CommandContext) throws -> Bool {
        try purgeDecision(id: id, metadata: metadata, in: &command) == .write
    }

    /// What ``purge(id:metadata:in:)`` decided, for the forms that report it.
    func purgeDecision(id: Entity.ID, metadata: EventMetadata, in command: inout CommandContext) throws -> EventStore.TombstoneDecision {
        try checkUsable()
        return try store.appendTombstone(.purged, to: stream(of: id), metadata: metadata, in: &command)
    }
}

/// The event types of a repository's own events (`"<typeName>.added"`, ...), spelled once for
/// the commands that append them and the projection that folds them: interpolating the name
/// per event built a String per event (on the heap for a name of more than 15 bytes, as most
/// are).
struct OwnEventTypes: Sendable {
    enum Kind { case added, updated, deleted }
    let added: String
    let updated: String
    let deleted: String

    /// The entity type's name, the events' prefix.
    let typeName: String

    init(_ typeName: String) {
        self.typeName = typeName
        added = typeName + ".added"
        updated = typeName + ".updated"
        deleted = typeName + ".deleted"
    }

    /// The event type of the field event `name`: `"<typeName>.<name>"` (built once per schema by
    /// its callers, the commands' ``EventSourcedRepository/SchemaBox`` and the projection).
    func field(_ name: String) -> String { typeName + "." + name }

    subscript(kind: Kind) -> String {
        switch kind {
        case .added: added
        case .updated: updated
        case .deleted: deleted
        }
    }
}
