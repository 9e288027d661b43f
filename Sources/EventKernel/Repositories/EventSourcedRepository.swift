public import Foundation
public import EventLog
import KernelPrimitives

/// A generic event-sourced repository: a domain declares its entity type and gets durable
/// add, update, save (upsert) and delete (as events), id lookups, predicate and date-range
/// queries, paging, observation, history and time travel, without writing storage code.
///
/// Every entity is a stream (``StreamID``: `typeName` + id), so ids need only be unique
/// within a type: thread 100 and post 100 are different entities. Events are named
/// `"<typeName>.added"`, `".updated"` and `".deleted"`; payloads are the entity encoded by the
/// ``EntitySchema``'s codec (compact binary by default, JSON on request) at its version, and old
/// versions are upcast on every read.
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
    /// The projection state: the entity table with its declared indexes.
    public typealias State = EntityTable<Entity>

    /// The store written to.
    public let store: EventStore
    /// The entity type name: the streams' entity type and the event types' prefix.
    public let typeName: String
    /// How entities are encoded and upcast.
    public let schema: EntitySchema<Entity>
    /// The declared indexes, in declaration order.
    public let indexes: [EntityIndex<Entity>]
    /// The projection folding this type's events (registered with the store).
    public let projection: ProjectedState<State>
    private let defaultOrder: [EntityQuery<Entity>.Ordering]
    private let validate: (@Sendable (Entity) throws -> Void)?
    /// Times every query when the store is instrumented (`nil`: no clock is read).
    private let queryLatency: (any DurationRecorder)?

    /// The snapshot layout version: 2 added stream versions and the entity schema version, 3
    /// the insertion sequence and the declared indexes' order, 4 the entities in parts, 5 the
    /// versions of deleted entities (the projection is its streams' version source).
    private static var snapshotLayoutVersion: UInt16 { 5 }

    /// Entities per part of a snapshot (layout 4): parts decode in parallel at open.
    private static var entitiesPerSnapshotPart: Int { 4_096 }

    /// Creates the repository and registers its projection with `store` (restoring it from a
    /// snapshot and catching up with the log).
    /// - Parameters:
    ///   - store: The event store.
    ///   - typeName: The entity type name, unique per store, e.g. `"Account"`.
    ///   - schema: The entity's schema version, codec and upcasters for older versions.
    ///   - indexes: The indexes to keep (see ``EntityIndex``); queries on their properties
    ///     cost O(log n + k).
    ///   - defaultOrder: The order of ``fetchAll()``, paging and queries without an ordering,
    ///     e.g. `[.descending(\.date)]`; insertion order when empty (and after these terms).
    ///   - validate: Checks an entity before any write; its error is thrown and nothing written.
    /// - Throws: ``RepositoryError/undecodableEvent(_:)`` when a stored event does not decode
    ///   (for example a schema version without an upcaster: add it and open again; nothing was
    ///   lost), ``RepositoryError/validationFailed(_:)`` when the name is taken, storage errors.
    public init(
        store: EventStore, typeName: String, schema: EntitySchema<Entity> = EntitySchema(),
        indexes: [EntityIndex<Entity>] = [],
        defaultOrder: [IndexComponent<Entity>] = [],
        validate: (@Sendable (Entity) throws -> Void)? = nil
    ) throws {
        self.store = store
        self.typeName = typeName
        self.schema = schema
        self.indexes = indexes
        self.defaultOrder = defaultOrder.map { .init(keyPath: $0.keyPath, value: $0.value, descending: $0.descending) }
        self.validate = validate
        self.projection = Self.makeProjection(typeName: typeName, schema: schema, indexes: indexes)
        self.queryLatency = store.instrumentation?.queryLatency(repository: projection.name)
        try store.register(projection)
    }

    /// What `prepare` computes for one event outside every lock: the decoded (upcast) entity
    /// and its index keys, or `nil` for a deletion.
    struct Prepared: Sendable {
        var entity: Entity
        var keys: [IndexKey]
    }

    private static func keys(of entity: Entity, _ indexes: [EntityIndex<Entity>]) -> [IndexKey] {
        var keys: [IndexKey] = []
        keys.reserveCapacity(indexes.count)
        appendKeys(of: entity, indexes, to: &keys)
        return keys
    }

    /// Appends `entity`'s key in each of `indexes` to `keys` (a snapshot's parts gather a
    /// million entities' keys into one array, rather than an array per entity).
    private static func appendKeys(of entity: Entity, _ indexes: [EntityIndex<Entity>], to keys: inout [IndexKey]) {
        for index in indexes { keys.append(index.key(of: entity)) }
    }

    private static func makeProjection(
        typeName: String, schema: EntitySchema<Entity>, indexes: [EntityIndex<Entity>]
    ) -> ProjectedState<State> {
        let added = typeName + ".added", updated = typeName + ".updated", deleted = typeName + ".deleted"
        return ProjectedState<State>(
            name: "repository:\(typeName)", schemaVersion: snapshotLayoutVersion, initial: State(indexes: indexes),
            encode: { table in try encodeSnapshot(table, schema: schema, indexes: indexes) },
            decode: { bytes in try decodeSnapshot(bytes, schema: schema, indexes: indexes) },
            // Decoding, upcasting and the index keys (the domain's code) run here, outside every
            // lock; the fold below only moves values.
            prepare: { envelope -> Prepared? in
                guard envelope.stream.entityType == typeName else { return nil }
                switch envelope.eventType {
                case added, updated:
                    let entity = try schema.decode(envelope.payload, schemaVersion: envelope.schemaVersion)
                    return Prepared(entity: entity, keys: keys(of: entity, indexes))
                case deleted:
                    return nil
                default:
                    throw RepositoryError.validationFailed("unknown event type \"\(envelope.eventType)\" for entity type \(typeName)")
                }
            },
            fold: { table, envelope, prepared in
                guard envelope.stream.entityType == typeName else { return }
                if let prepared {
                    table.upsert(prepared.entity, id: envelope.entityID, version: envelope.entityVersion, keys: prepared.keys)
                } else {
                    table.remove(envelope.entityID, version: envelope.entityVersion)
                }
            },
            // The table keeps each entity's version (and a deleted one's): the store reads
            // this type's stream versions from it.
            versioning: .init(entityType: typeName, version: { table, stream in table.version(of: stream.entityID) }))
    }

    /// Layout 4: entity schema version, count, next sequence; per entity in insertion order its
    /// id, stream version and sequence delta; per declared index its name and the entities'
    /// order as ordinals (so restoring sorts nothing); then the entities in insertion order, in
    /// parts of at most ``entitiesPerSnapshotPart``: the part count, then per part its byte
    /// length and the part encoded by the schema as one array. Decoding entities through
    /// `Codable` is most of an open from a snapshot, and parts let it use every core.
    private static func encodeSnapshot(_ table: State, schema: EntitySchema<Entity>, indexes: [EntityIndex<Entity>]) throws -> [UInt8] {
        var writer = BinaryWriter(capacity: 32 + table.count * 24)
        writer.writeVarint(UInt64(schema.version))
        writer.writeVarint(UInt64(table.count))
        writer.writeVarint(table.rows.nextSequence)
        let rows = table.rows
        var ordinals = [Int32](repeating: 0, count: rows.heads.count)
        var slots: [Int32] = []
        slots.reserveCapacity(table.count)
        var previous: UInt64 = 0
        rows.bySequence.scan(from: rows.bySequence.startPosition, to: rows.bySequence.endPosition, reversed: false) { entry in
            let head = rows.heads[Int(entry.slot)]
            ordinals[Int(entry.slot)] = Int32(slots.count)
            writer.writeEntityID(head.id)
            writer.writeVarint(head.version)
            writer.writeVarint(head.sequence - previous)
            previous = head.sequence
            slots.append(entry.slot)
            return true
        }
        // Versions of deleted entities that were not added again.
        let deleted = rows.deletedVersions.filter { rows.slotsByID[$0.key] == nil }
        writer.writeVarint(UInt64(deleted.count))
        for (id, version) in deleted {
            writer.writeEntityID(id)
            writer.writeVarint(version)
        }
        writer.writeVarint(UInt64(indexes.count))
        for (number, index) in indexes.enumerated() {
            writer.writeString(index.name)
            let entries = rows.indexes[number].entries
            entries.scan(from: entries.startPosition, to: entries.endPosition, reversed: false) { entry in
                writer.writeVarint(UInt64(ordinals[Int(entry.slot)]))
                return true
            }
        }
        let partSize = entitiesPerSnapshotPart
        writer.writeVarint(UInt64((slots.count + partSize - 1) / partSize))
        // Gathered one part at a time: a copy of every entity at once would double the
        // snapshot's peak memory.
        for start in stride(from: 0, to: slots.count, by: partSize) {
            writer.writeBytes(try schema.encode(table.entities(at: slots[start..<min(start + partSize, slots.count)])))
        }
        return writer.bytes
    }

    private static func decodeSnapshot(_ bytes: [UInt8], schema: EntitySchema<Entity>, indexes: [EntityIndex<Entity>]) throws -> State {
        var reader = BinaryReader(bytes)
        let entitySchemaVersion = try reader.readVarint(as: UInt16.self)
        let count = Int(try reader.readVarint())
        guard count <= reader.remaining else { throw BinaryDecodingError(.invalidValue("\(count) entities in \(reader.remaining) bytes"), at: 0) }
        let nextSequence = try reader.readVarint()
        var heads: [(id: EntityID, version: UInt64, sequence: UInt64)] = []
        heads.reserveCapacity(count)
        var sequence: UInt64 = 0
        for _ in 0..<count {
            let id = try reader.readEntityID()
            let version = try reader.readVarint()
            sequence += try reader.readVarint()
            heads.append((id, version, sequence))
        }
        let deletedCount = Int(try reader.readVarint())
        guard deletedCount <= reader.remaining else { throw BinaryDecodingError(.invalidValue("\(deletedCount) deleted entities in \(reader.remaining) bytes"), at: reader.offset) }
        var deletedVersions: [EntityID: UInt64] = [:]
        deletedVersions.reserveCapacity(deletedCount)
        for _ in 0..<deletedCount {
            let id = try reader.readEntityID()
            deletedVersions[id] = try reader.readVarint()
        }
        var orders: [String: [Int32]] = [:]
        for _ in 0..<(try reader.readVarint()) {
            let name = try reader.readString()
            var order: [Int32] = []
            order.reserveCapacity(count)
            for _ in 0..<count {
                let ordinal = try reader.readVarint()
                guard ordinal < count else { throw BinaryDecodingError(.invalidValue("index ordinal \(ordinal) of \(count)"), at: reader.offset) }
                order.append(Int32(ordinal))
            }
            orders[name] = order
        }
        let partCount = Int(try reader.readVarint())
        guard partCount <= reader.remaining else { throw BinaryDecodingError(.invalidValue("\(partCount) parts in \(reader.remaining) bytes"), at: reader.offset) }
        var partBytes: [[UInt8]] = []
        partBytes.reserveCapacity(partCount)
        for _ in 0..<partCount { partBytes.append(try reader.readBytes()) }
        guard reader.remaining == 0 else { throw BinaryDecodingError(.invalidValue("\(reader.remaining) bytes after the entities"), at: reader.offset) }
        // Upcast like events: a snapshot of an older schema version is still used. The parts
        // decode in parallel, each with its entities' index keys (the domain's key paths), and
        // alongside them one more task fills the id map and the insertion order from the heads,
        // which need no entity (done after the decode, it was an eighth of an open).
        let parts = partBytes, restoredHeads = heads
        let results = Locked([Result<([Entity], [IndexKey]), any Error>?](repeating: nil, count: partCount))
        let restoredRows = Locked<Result<IndexedRows, BinaryDecodingError>?>(nil)
        var table = State(indexes: indexes)
        let fields = table.rows.fields
        DispatchQueue.concurrentPerform(iterations: partCount + 1) { task in
            guard task > 0 else {
                var rows = IndexedRows(fields: fields)
                rows.heads.reserveCapacity(count)
                rows.slotsByID.reserveCapacity(count)
                for head in restoredHeads {
                    guard rows.appendRestored(RowHead(id: head.id, version: head.version, sequence: head.sequence)) else {
                        restoredRows.withLock { $0 = .failure(BinaryDecodingError(.invalidValue("repeated entity id \(head.id)"), at: 0)) }
                        return
                    }
                }
                restoredRows.withLock { $0 = .success(rows) }
                return
            }
            let result = Result {
                let entities = try schema.decodeAll(parts[task - 1], schemaVersion: entitySchemaVersion)
                var keys: [IndexKey] = []
                keys.reserveCapacity(entities.count * indexes.count)
                for entity in entities { Self.appendKeys(of: entity, indexes, to: &keys) }
                return (entities, keys)
            }
            results.withLock { $0[task - 1] = result }
        }
        let decoded = try results.withLock { $0 }.map { try $0!.get() }
        table.rows = try restoredRows.withLock { $0 }!.get()
        // The parts' entities and keys are joined on two threads at once (one after the other,
        // copying a million entities and three million keys was an eighth of an open).
        let bySlot = Locked<[Entity?]>([]), keys = Locked<[IndexKey]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { task in
            if task == 0 {
                var joined: [Entity?] = []
                joined.reserveCapacity(count)
                for (entities, _) in decoded { joined.append(contentsOf: entities.lazy.map { Optional($0) }) }
                bySlot.withLock { $0 = joined }
            } else {
                var joined: [IndexKey] = []
                joined.reserveCapacity(count * indexes.count)
                for (_, partKeys) in decoded { joined.append(contentsOf: partKeys) }
                keys.withLock { $0 = joined }
            }
        }
        table.bySlot = bySlot.withLock { $0 }
        table.rows.keys = keys.withLock { $0 }
        guard table.bySlot.count == count else {
            throw BinaryDecodingError(.invalidValue("\(count) ids for \(table.bySlot.count) entities"), at: 0)
        }
        table.rows.nextSequence = max(nextSequence, (heads.last?.sequence ?? 0) + 1)
        table.rows.deletedVersions = deletedVersions
        try table.rows.restoreIndexes(names: indexes.map(\.name), orders: orders)
        return table
    }

    /// The stream of the entity with `id`.
    public func stream(of id: Entity.ID) -> StreamID { StreamID(typeName, id.entityID) }

    // MARK: Reading

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
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` for a negative offset or limit, or a
    ///   cursor taken from another query.
    public func fetch(_ query: EntityQuery<Entity>) throws -> [Entity] {
        let (table, slots, _) = try run(query)
        return table.entities(at: slots)
    }

    /// The published table: a copy-on-write copy that queries run on outside the projection's
    /// lock (their predicates are the domain's code).
    private var publishedTable: State { projection.read { $0 } }

    /// Runs `query` on the published table: the one path of every query.
    private func run(_ query: EntityQuery<Entity>) throws -> (table: State, slots: [Int32], next: QueryCursor?) {
        try queryLatency.time {
            let table = publishedTable
            let (slots, next) = try table.run(query, defaultOrder: defaultOrder)
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
        let (table, slots, next) = try run(query)
        let complete = query.effectiveLimit.map { slots.count < $0 } ?? true
        return QueryPage(entities: table.entities(at: slots), nextCursor: complete ? nil : next)
    }

    /// How many entities match `query`, ignoring its limit, offset and cursor.
    /// - Complexity: O(log n + k / c) when one index applies every condition, for chunks of c
    ///   entries (see ``EntityQuery``).
    public func count(_ query: EntityQuery<Entity>) throws -> Int {
        try queryLatency.time { try publishedTable.count(query) }
    }

    /// How a query is answered: which index, in which direction, what is filtered or sorted
    /// after. For tests and tuning, like SQL's `EXPLAIN QUERY PLAN`. A query that ``fetch(_:)``
    /// would refuse (a negative offset or limit) is described as `"invalid query"`.
    public func explain(_ query: EntityQuery<Entity>) -> String {
        publishedTable.explain(query, defaultOrder: defaultOrder, declared: indexes)
    }

    /// The entities matching `query`, with their ids and versions.
    private func matches(_ query: EntityQuery<Entity>) throws -> [Match] {
        let (table, slots, _) = try run(query)
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
        let (table, slots, _) = try run(EntityQuery<Entity>())
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

    // MARK: Writing inside a command

    private func event(_ kind: String, _ id: EntityID, _ entity: Entity?) throws -> EncodedEvent {
        EncodedEvent(eventType: "\(typeName).\(kind)", schemaVersion: schema.version, stream: StreamID(typeName, id),
                     payload: try entity.map(schema.encode) ?? [])
    }

    /// Refuses writes once the projection failed: its state is not the log's.
    private func checkUsable() throws {
        if let failure = projection.failure { throw RepositoryError.undecodableEvent(failure) }
    }

    /// The entity of `stream` as the command reads it: state and version at once, from the
    /// projection that keeps both.
    private func current(_ stream: StreamID, in command: inout CommandContext) -> Entity? {
        let key = stream.entityID
        return command.read(stream, versioned: { projection.withLockedState({ $0[key] }, versionOf: stream) })
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
                command.append(try self.event("deleted", row.id, nil))
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
                    throw RepositoryError.validationFailed("a batch update changed the id of \(stream)")
                }
                try self.validate?(entity)
                command.append(try self.event("updated", row.id, entity))
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

    // MARK: Observation, history, time travel

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
        _ = try publishedTable.compile(query, defaultOrder: defaultOrder)
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
                    if envelopes.contains(where: { $0.stream.entityType == typeName }) { poke() }
                }
                return { [weak projection] in projection?.removeListener(token) }
            },
            fetch: { [weak self] in (try? self?.matches(query)) ?? [] },
            isDuplicate: { old, new in Self.sameRows(old, new) },
            output: { $0.map(\.entity) })
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

    /// The events of one entity, oldest first. - Complexity: O(n) log scan.
    public func history(of id: Entity.ID) throws -> [EventEnvelope] {
        try store.history(of: stream(of: id))
    }

    /// The entities as they were after the event at `position`.
    /// - Complexity: O(events since the newest usable snapshot at or before `position`).
    public func entities(throughPosition position: LogPosition) throws -> [Entity] {
        let past = try store.state(of: { projection.makeFresh() }, throughPosition: position)
        return past.read { $0.entities }
    }

    /// The entities as they were at `date` (empty before the first event).
    public func entities(asOf date: Date) throws -> [Entity] {
        guard let position = try store.lastPosition(recordedAtOrBefore: date) else { return [] }
        return try entities(throughPosition: position)
    }
}
