public import Foundation
public import EventLog

/// A generic event-sourced repository: a domain declares its entity type and gets durable
/// add, update, save (upsert) and delete (as events), id lookups, predicate and date-range
/// queries, paging, observation, history and time travel, without writing storage code.
///
/// Every entity is a stream (``StreamID``: `typeName` + id), so ids need only be unique
/// within a type: thread 100 and post 100 are different entities. Events are named
/// `"<typeName>.added"`, `".updated"` and `".deleted"`; payloads are the entity's JSON at the
/// ``EntitySchema``'s version, and old versions are upcast on every read.
///
/// Every write goes through ``EventStore/execute(maxAttempts:_:)``: the stream's version is read
/// before its state and a concurrent change is retried, so two concurrent adds of one id never
/// both succeed and concurrent saves all land. The `in:` forms (``add(_:in:)`` and friends) put
/// changes to several repositories into one atomic command:
///
/// ```swift
/// try await store.execute { command in
///     try threads.update(thread, in: &command)
///     try posts.add(post, in: &command)
/// }
/// ```
public final class EventSourcedRepository<Entity: Identifiable & Codable & Sendable>: WritableRepository,
    QueryableRepository, PaginatedRepository, ListenableRepository, Sendable
where Entity.ID: EntityIDConvertible {
    /// The projection state: entities by id with their stream versions and, when a date key is
    /// set, a sorted date index.
    public struct State: Sendable {
        struct Stored: Sendable {
            var entity: Entity
            var version: UInt64
            /// The date key's value, kept so that removing never calls the domain's closure.
            var date: Date?
        }
        var entries: [EntityID: Stored] = [:]
        /// `(date, id)` pairs sorted by date then id, for range queries.
        var dateIndex: [(date: Date, id: EntityID)] = []

        /// The entity with `id`, if it exists.
        public subscript(id: EntityID) -> Entity? { entries[id]?.entity }
        /// The number of entities.
        public var count: Int { entries.count }
        /// Every entity, in no particular order.
        public var entities: some Collection<Entity> { entries.values.lazy.map(\.entity) }
    }

    /// The store written to.
    public let store: EventStore
    /// The entity type name: the streams' entity type and the event types' prefix.
    public let typeName: String
    /// How entities are encoded and upcast.
    public let schema: EntitySchema<Entity>
    /// The projection folding this type's events (registered with the store).
    public let projection: ProjectedState<State>
    private let dateKey: (@Sendable (Entity) -> Date)?
    private let validate: (@Sendable (Entity) throws -> Void)?

    /// The snapshot layout version: 2 added stream versions and the entity schema version.
    private static var snapshotLayoutVersion: UInt16 { 2 }

    /// Creates the repository and registers its projection with `store` (restoring it from a
    /// snapshot and catching up with the log).
    /// - Parameters:
    ///   - store: The event store.
    ///   - typeName: The entity type name, unique per store, e.g. `"Account"`.
    ///   - schema: The entity's schema version and upcasters for older ones.
    ///   - dateKey: The date that ``fetch(dateIn:)`` ranges over, e.g. `\.date`.
    ///   - validate: Checks an entity before any write; its error is thrown and nothing written.
    /// - Throws: ``RepositoryError/undecodableEvent(_:)`` when a stored event does not decode
    ///   (for example a schema version without an upcaster: add it and open again; nothing was
    ///   lost), ``RepositoryError/validationFailed(_:)`` when the name is taken, storage errors.
    public init(
        store: EventStore, typeName: String, schema: EntitySchema<Entity> = EntitySchema(),
        dateKey: (@Sendable (Entity) -> Date)? = nil,
        validate: (@Sendable (Entity) throws -> Void)? = nil
    ) throws {
        self.store = store
        self.typeName = typeName
        self.schema = schema
        self.dateKey = dateKey
        self.validate = validate
        self.projection = Self.makeProjection(typeName: typeName, schema: schema, dateKey: dateKey)
        try store.register(projection)
    }

    private static func makeProjection(
        typeName: String, schema: EntitySchema<Entity>, dateKey: (@Sendable (Entity) -> Date)?
    ) -> ProjectedState<State> {
        let added = typeName + ".added", updated = typeName + ".updated", deleted = typeName + ".deleted"
        return ProjectedState<State>(
            name: "repository:\(typeName)", schemaVersion: snapshotLayoutVersion, initial: State(),
            encode: { state in
                // Layout: entity schema version, count, then per entity its id and stream
                // version, then the entities as one JSON array in the same order.
                var writer = BinaryWriter(capacity: 16 + state.entries.count * 24)
                writer.writeVarint(UInt64(schema.version))
                writer.writeVarint(UInt64(state.entries.count))
                var entities: [Entity] = []
                entities.reserveCapacity(state.entries.count)
                for (id, stored) in state.entries {
                    writer.writeEntityID(id)
                    writer.writeVarint(stored.version)
                    entities.append(stored.entity)
                }
                writer.writeRaw(try schema.encode(entities))
                return writer.bytes
            },
            decode: { bytes in
                var reader = BinaryReader(bytes)
                let entitySchemaVersion = try reader.readVarint(as: UInt16.self)
                let count = try reader.readVarint()
                var keys: [(EntityID, UInt64)] = []
                keys.reserveCapacity(Int(min(count, UInt64(reader.remaining / 2))))
                for _ in 0..<count { keys.append((try reader.readEntityID(), try reader.readVarint())) }
                // Upcast like events: a snapshot of an older schema version is still used.
                let entities = try schema.decodeAll(reader.readRemaining(), schemaVersion: entitySchemaVersion)
                guard entities.count == keys.count else {
                    throw BinaryDecodingError(.invalidValue("\(keys.count) ids for \(entities.count) entities"), at: 0)
                }
                var state = State()
                state.entries.reserveCapacity(keys.count)
                for (index, (id, version)) in keys.enumerated() {
                    let entity = entities[index]
                    state.entries[id] = State.Stored(entity: entity, version: version, date: dateKey?(entity))
                }
                if dateKey != nil {
                    // One sort, not n sorted inserts.
                    state.dateIndex = state.entries.map { (date: $0.value.date!, id: $0.key) }
                    state.dateIndex.sort { lessThan($0, $1) }
                }
                return state
            },
            // Decoding, upcasting and the date key (the domain's code) run here, outside every
            // lock; the fold below only moves values.
            prepare: { envelope -> State.Stored? in
                guard envelope.stream.entityType == typeName else { return nil }
                switch envelope.eventType {
                case added, updated:
                    let entity = try schema.decode(envelope.payload, schemaVersion: envelope.schemaVersion)
                    return State.Stored(entity: entity, version: envelope.entityVersion, date: dateKey?(entity))
                case deleted:
                    return nil
                default:
                    throw RepositoryError.validationFailed("unknown event type \"\(envelope.eventType)\" for entity type \(typeName)")
                }
            },
            fold: { state, envelope, stored in
                guard envelope.stream.entityType == typeName else { return }
                if let stored {
                    upsert(stored, id: envelope.entityID, into: &state)
                } else {
                    remove(envelope.entityID, from: &state)
                }
            })
    }

    private static func lessThan(_ a: (date: Date, id: EntityID), _ b: (date: Date, id: EntityID)) -> Bool {
        a.date < b.date || (a.date == b.date && a.id.description < b.id.description)
    }

    private static func indexSlot(_ key: (date: Date, id: EntityID), in index: [(date: Date, id: EntityID)]) -> Int {
        var low = 0, high = index.count
        while low < high {
            let mid = (low + high) / 2
            if lessThan(index[mid], key) { low = mid + 1 } else { high = mid }
        }
        return low
    }

    private static func upsert(_ stored: State.Stored, id: EntityID, into state: inout State) {
        remove(id, from: &state)
        state.entries[id] = stored
        if let date = stored.date {
            let key = (date: date, id: id)
            state.dateIndex.insert(key, at: indexSlot(key, in: state.dateIndex))
        }
    }

    private static func remove(_ id: EntityID, from state: inout State) {
        guard let old = state.entries.removeValue(forKey: id) else { return }
        if let date = old.date {
            let slot = indexSlot((date, id), in: state.dateIndex)
            if slot < state.dateIndex.count, state.dateIndex[slot].id == id { state.dateIndex.remove(at: slot) }
        }
    }

    /// The stream of the entity with `id`.
    public func stream(of id: Entity.ID) -> StreamID { StreamID(typeName, id.entityID) }

    // MARK: Reading

    /// The entity with `id`, or `nil`. - Complexity: O(1).
    public func fetch(id: Entity.ID) -> Entity? {
        let key = id.entityID
        return projection.withLockedState { $0.entries[key]?.entity }
    }

    /// The entity's stream version (0: it never existed), for ``update(_:expectedVersion:)``.
    public func version(of id: Entity.ID) -> UInt64 { store.version(of: stream(of: id)) }

    /// Every entity, ordered by id text. - Complexity: O(n log n).
    public func fetchAll() -> [Entity] {
        fetch(where: { _ in true }, sortedBy: nil, limit: nil)
    }

    /// The entities matching `predicate`, sorted by `areInIncreasingOrder` (default: by id
    /// text), at most `limit`. `predicate` and the sort run outside every lock: they may read
    /// this or any other repository.
    /// - Complexity: O(n) for the filter plus O(m log m) for the sort of m matches.
    public func fetch(
        where predicate: @Sendable (Entity) -> Bool,
        sortedBy areInIncreasingOrder: (@Sendable (Entity, Entity) -> Bool)? = nil,
        limit: Int? = nil
    ) -> [Entity] {
        var matches = matching(predicate)
        if let areInIncreasingOrder {
            matches.sort { areInIncreasingOrder($0.entity, $1.entity) }
        }
        var out = matches.map(\.entity)
        if let limit, limit < out.count { out.removeLast(out.count - max(0, limit)) }
        return out
    }

    /// The matching entries with their versions, in id-text order; the predicate runs on a
    /// published state, outside the projection's lock.
    private func matching(_ predicate: (Entity) -> Bool) -> [(id: EntityID, entity: Entity, version: UInt64)] {
        let state = projection.read { $0 }
        var matches: [(id: EntityID, entity: Entity, version: UInt64)] = []
        for (id, stored) in state.entries where predicate(stored.entity) {
            matches.append((id, stored.entity, stored.version))
        }
        return Self.inIDTextOrder(matches) { $0.id }
    }

    /// `items` sorted by their ids' text, the repository's default order. Each id's text is
    /// built once, not once per comparison.
    private static func inIDTextOrder<T>(_ items: [T], id: (T) -> EntityID) -> [T] {
        items.map { (key: id($0).description, item: $0) }.sorted { $0.key < $1.key }.map(\.item)
    }

    /// The entities whose date key lies in `range`, in date order.
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` when the repository has no date key.
    /// - Complexity: O(log n + k).
    public func fetch(dateIn range: ClosedRange<Date>) throws -> [Entity] {
        guard dateKey != nil else { throw RepositoryError.invalidQuery("repository \(typeName) has no date key") }
        return projection.withLockedState { state in
            var slot = Self.indexSlot((range.lowerBound, .uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))), in: state.dateIndex)
            // Ids sort by text; step back over equal dates whose id text sorts below the probe.
            while slot > 0, state.dateIndex[slot - 1].date >= range.lowerBound { slot -= 1 }
            var out: [Entity] = []
            while slot < state.dateIndex.count, state.dateIndex[slot].date <= range.upperBound {
                if let entity = state.entries[state.dateIndex[slot].id]?.entity { out.append(entity) }
                slot += 1
            }
            return out
        }
    }

    /// The entities whose date key lies between `start` and `end`, both inclusive.
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` when `end` precedes `start` or there is no date key.
    public func fetch(from start: Date, to end: Date) throws -> [Entity] {
        guard start <= end else { throw RepositoryError.invalidQuery("end date \(end) is before start date \(start)") }
        return try fetch(dateIn: start...end)
    }

    /// A page of entities in id-text order.
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` for a negative offset or limit.
    public func fetchPage(offset: Int, limit: Int) throws -> [Entity] {
        guard offset >= 0, limit >= 0 else { throw RepositoryError.invalidQuery("offset \(offset) and limit \(limit) must not be negative") }
        let all = fetchAll()
        guard offset < all.count else { return [] }
        return Array(all[offset..<min(all.count, offset + limit)])
    }

    /// The number of entities. - Complexity: O(1).
    public var count: Int { projection.withLockedState { $0.entries.count } }

    // MARK: Writing inside a command

    private func event(_ kind: String, _ id: EntityID, _ entity: Entity?) throws -> EncodedEvent {
        EncodedEvent(eventType: "\(typeName).\(kind)", schemaVersion: schema.version, stream: StreamID(typeName, id),
                     payload: try entity.map(schema.encode) ?? [])
    }

    /// Refuses writes once the projection failed: its state is not the log's.
    private func checkUsable() throws {
        if let failure = projection.failure { throw RepositoryError.undecodableEvent(failure) }
    }

    private func current(_ stream: StreamID, in command: inout CommandContext) -> Entity? {
        let key = stream.entityID
        return command.read(stream) { projection.withLockedState { $0.entries[key]?.entity } }
    }

    private func checkOnce(_ stream: StreamID, in command: CommandContext) throws {
        guard !command.isAppending(to: stream) else {
            throw RepositoryError.validationFailed("\(stream) is changed twice in one command; merge the changes into one")
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
        command.append(try event("added", stream.entityID, entity))
    }

    /// Replaces `entity` as part of `command`.
    /// - Parameter expectedVersion: When given, the entity's version must be this (see
    ///   ``version(of:)``), or the command fails with a conflict instead of retrying.
    /// - Throws: ``RepositoryError/notFound(_:)``, the validator's error.
    public func update(_ entity: Entity, expectedVersion: UInt64? = nil, in command: inout CommandContext) throws {
        try checkUsable()
        try validate?(entity)
        let stream = stream(of: entity.id)
        try checkOnce(stream, in: command)
        guard current(stream, in: &command) != nil else { throw RepositoryError.notFound(stream.entityID) }
        if let expectedVersion {
            command.append(try event("updated", stream.entityID, entity), expectedVersion: expectedVersion)
        } else {
            command.append(try event("updated", stream.entityID, entity))
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
        command.append(try event(exists ? "updated" : "added", stream.entityID, entity))
    }

    /// Deletes the entity with `id` as part of `command`.
    /// - Returns: Whether it existed (an unknown id appends nothing).
    @discardableResult
    public func delete(id: Entity.ID, in command: inout CommandContext) throws -> Bool {
        try checkUsable()
        let stream = stream(of: id)
        try checkOnce(stream, in: command)
        guard current(stream, in: &command) != nil else { return false }
        command.append(try event("deleted", stream.entityID, nil))
        return true
    }

    // MARK: Writing

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

    /// Adds entities atomically.
    /// - Throws: ``RepositoryError/alreadyExists(_:)`` (also for a duplicate within the batch);
    ///   nothing is written then.
    public func addAll(_ entities: [Entity]) async throws {
        guard !entities.isEmpty else { return }
        try await store.execute { command in for entity in entities { try self.add(entity, in: &command) } }
    }

    /// Replaces entities atomically.
    /// - Throws: ``RepositoryError/notFound(_:)``; nothing is written then.
    public func updateAll(_ entities: [Entity]) async throws {
        guard !entities.isEmpty else { return }
        try await store.execute { command in for entity in entities { try self.update(entity, in: &command) } }
    }

    /// Inserts or replaces entities atomically.
    public func saveAll(_ entities: [Entity]) async throws {
        guard !entities.isEmpty else { return }
        try await store.execute { command in for entity in entities { try self.save(entity, in: &command) } }
    }

    /// Deletes entities atomically; unknown ids are skipped.
    /// - Returns: How many were deleted.
    @discardableResult
    public func deleteAll(ids: [Entity.ID]) async throws -> Int {
        guard !ids.isEmpty else { return 0 }
        return try await store.execute { command in
            var deleted = 0
            for id in ids where try self.delete(id: id, in: &command) { deleted += 1 }
            return deleted
        }
    }

    /// Deletes every entity matching `predicate`, atomically. The predicate runs outside every
    /// lock; entities changed concurrently are checked again.
    /// - Returns: How many were deleted.
    @discardableResult
    public func deleteAll(where predicate: @Sendable (Entity) -> Bool) async throws -> Int {
        try await store.execute { command in
            var deleted = 0
            for match in self.matching(predicate) {
                // Expect the version of the state the predicate saw: an entity changed since
                // (which may no longer match) makes the command conflict and decide again.
                command.read(StreamID(self.typeName, match.id), stateVersion: match.version)
                command.append(try self.event("deleted", match.id, nil))
                deleted += 1
            }
            return deleted
        }
    }

    /// Applies `change` to every entity matching `predicate` and replaces them, atomically.
    /// `predicate` and `change` run outside every lock.
    /// - Returns: How many were updated.
    /// - Throws: What `change` or the validator throws; nothing is written then.
    @discardableResult
    public func updateAll(
        where predicate: @Sendable (Entity) -> Bool, _ change: (inout Entity) throws -> Void
    ) async throws -> Int {
        try await store.execute { command in
            var updated = 0
            for match in self.matching(predicate) {
                let stream = StreamID(self.typeName, match.id)
                command.read(stream, stateVersion: match.version)
                var entity = match.entity
                try change(&entity)
                guard entity.id.entityID == match.id else {
                    throw RepositoryError.validationFailed("a batch update changed the id of \(stream)")
                }
                try self.validate?(entity)
                command.append(try self.event("updated", match.id, entity))
                updated += 1
            }
            return updated
        }
    }

    // MARK: Observation, history, time travel

    /// Yields the entities matching `predicate` (in id-text order) at once, then again after
    /// each commit that changed that result, never an identical result twice in a row (results
    /// are compared by ids and stream versions, so entities need not be `Equatable`). The
    /// predicate runs outside every lock. The stream ends when the consumer stops iterating or
    /// the store closes.
    public func observe(where predicate: @escaping @Sendable (Entity) -> Bool) -> AsyncStream<[Entity]> {
        let typeName = self.typeName
        return QueryObservation.stream(
            store: store,
            listen: { [projection] poke in
                let token = projection.addListener { envelopes in
                    if envelopes.contains(where: { $0.stream.entityType == typeName }) { poke() }
                }
                return { [weak projection] in projection?.removeListener(token) }
            },
            fetch: { [weak self] in self?.matching(predicate) ?? [] },
            isDuplicate: { old, new in Self.sameEntries(old, new) },
            output: { $0.map(\.entity) })
    }

    private static func sameEntries(
        _ old: [(id: EntityID, entity: Entity, version: UInt64)], _ new: [(id: EntityID, entity: Entity, version: UInt64)]
    ) -> Bool {
        guard old.count == new.count else { return false }
        for index in old.indices where old[index].id != new[index].id || old[index].version != new[index].version {
            return false
        }
        return true
    }

    /// The events of one entity, oldest first. - Complexity: O(n) log scan.
    public func history(of id: Entity.ID) throws -> [EventEnvelope] {
        try store.history(of: stream(of: id))
    }

    /// The entities as they were after the event at `position`.
    /// - Complexity: O(events since the newest usable snapshot at or before `position`).
    public func entities(throughPosition position: LogPosition) throws -> [Entity] {
        let past = try store.state(of: { projection.makeFresh() }, throughPosition: position)
        return past.read { state in
            Self.inIDTextOrder(Array(state.entries)) { $0.key }.map(\.value.entity)
        }
    }

    /// The entities as they were at `date` (empty before the first event).
    public func entities(asOf date: Date) throws -> [Entity] {
        guard let position = try store.lastPosition(recordedAtOrBefore: date) else { return [] }
        return try entities(throughPosition: position)
    }
}
