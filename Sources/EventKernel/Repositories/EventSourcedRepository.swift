public import Foundation
public import EventLog

/// A generic event-sourced repository: a domain declares its entity type and gets durable
/// add/update/delete (as events), id lookups, predicate and date-range queries, paging,
/// observation and history, without writing storage code.
///
/// Events are named `"<typeName>.added"`, `".updated"` and `".deleted"`; payloads are the
/// entity's JSON. One store can hold several repositories (distinct `typeName`s); use
/// ``pendingAdd(_:)`` and friends with ``EventStore/append(_:)-([PendingEvent])`` for one
/// atomic batch spanning them. Entity ids must be unique across the types of one store
/// (UUIDs are), since the store keeps one version per ``EntityID``.
public final class EventSourcedRepository<Entity: Identifiable & Codable & Sendable>: WritableRepository,
    QueryableRepository, PaginatedRepository, ListenableRepository, Sendable
where Entity.ID: EntityIDConvertible {
    /// The projection state: entities by id and, when a date key is set, a sorted date index.
    public struct State: Sendable {
        /// The live entities.
        public var entities: [EntityID: Entity] = [:]
        /// `(date, id)` pairs sorted by date then id, for range queries.
        var dateIndex: [(date: Date, id: EntityID)] = []
    }

    /// The store written to.
    public let store: EventStore
    /// The entity type name prefixing event types.
    public let typeName: String
    /// The projection folding this type's events (registered with the store).
    public let projection: ProjectedState<State>
    private let dateKey: (@Sendable (Entity) -> Date)?

    /// Creates the repository and registers its projection with `store` (restoring it from a
    /// snapshot and catching up with the log).
    /// - Parameters:
    ///   - store: The event store.
    ///   - typeName: The entity type name, unique per store, e.g. `"Account"`.
    ///   - schemaVersion: The snapshot schema version; bump it when `Entity`'s coding changes.
    ///   - dateKey: The date that ``fetch(dateIn:)`` ranges over, e.g. `\.date`.
    /// - Throws: ``RepositoryError`` when the name is taken or the log cannot be read.
    public init(
        store: EventStore, typeName: String, schemaVersion: UInt16 = 1,
        dateKey: (@Sendable (Entity) -> Date)? = nil
    ) throws {
        self.store = store
        self.typeName = typeName
        self.dateKey = dateKey
        self.projection = Self.makeProjection(typeName: typeName, schemaVersion: schemaVersion, dateKey: dateKey)
        try store.register(projection)
    }

    private static func makeProjection(
        typeName: String, schemaVersion: UInt16, dateKey: (@Sendable (Entity) -> Date)?
    ) -> ProjectedState<State> {
        let prefix = typeName + "."
        return ProjectedState<State>(
            name: "repository:\(typeName)", schemaVersion: schemaVersion, initial: State(),
            encode: { state in
                Array(try JSONEncoder().encode(state.entities.sorted { $0.key.description < $1.key.description }.map(\.value)))
            },
            decode: { bytes in
                var state = State()
                for entity in try JSONDecoder().decode([Entity].self, from: Data(bytes)) {
                    Self.upsert(entity, into: &state, dateKey: dateKey)
                }
                return state
            },
            reducer: { state, envelope in
                guard envelope.eventType.hasPrefix(prefix) else { return }
                switch envelope.eventType.dropFirst(prefix.count) {
                case "added", "updated":
                    let entity = try JSONDecoder().decode(Entity.self, from: Data(envelope.payload))
                    Self.upsert(entity, into: &state, dateKey: dateKey)
                case "deleted":
                    Self.remove(envelope.entityID, from: &state, dateKey: dateKey)
                default:
                    throw RepositoryError.validationFailed("unknown event type \(envelope.eventType)")
                }
            })
    }

    private static func indexSlot(_ key: (date: Date, id: EntityID), in index: [(date: Date, id: EntityID)]) -> Int {
        var low = 0, high = index.count
        while low < high {
            let mid = (low + high) / 2
            let item = index[mid]
            if item.date < key.date || (item.date == key.date && item.id.description < key.id.description) {
                low = mid + 1
            } else { high = mid }
        }
        return low
    }

    private static func upsert(_ entity: Entity, into state: inout State, dateKey: (@Sendable (Entity) -> Date)?) {
        let id = entity.id.entityID
        remove(id, from: &state, dateKey: dateKey)
        state.entities[id] = entity
        if let dateKey {
            let key = (date: dateKey(entity), id: id)
            state.dateIndex.insert(key, at: indexSlot(key, in: state.dateIndex))
        }
    }

    private static func remove(_ id: EntityID, from state: inout State, dateKey: (@Sendable (Entity) -> Date)?) {
        guard let old = state.entities.removeValue(forKey: id) else { return }
        if let dateKey {
            let slot = indexSlot((dateKey(old), id), in: state.dateIndex)
            if slot < state.dateIndex.count, state.dateIndex[slot].id == id { state.dateIndex.remove(at: slot) }
        }
    }

    // MARK: Reading

    /// The entity with `id`, or `nil`. - Complexity: O(1).
    public func fetch(id: Entity.ID) -> Entity? {
        let key = id.entityID
        return projection.read { $0.entities[key] }
    }

    /// Every entity, ordered by id text. - Complexity: O(n log n).
    public func fetchAll() -> [Entity] {
        fetch(where: { _ in true }, sortedBy: nil, limit: nil)
    }

    /// The entities matching `predicate`, sorted by `areInIncreasingOrder` (default: by id
    /// text), at most `limit`.
    /// - Complexity: O(n) for the filter plus O(m log m) for the sort of m matches.
    public func fetch(
        where predicate: @Sendable (Entity) -> Bool,
        sortedBy areInIncreasingOrder: (@Sendable (Entity, Entity) -> Bool)? = nil,
        limit: Int? = nil
    ) -> [Entity] {
        var matches = projection.read { state in state.entities.values.filter(predicate) }
        if let areInIncreasingOrder {
            matches.sort(by: areInIncreasingOrder)
        } else {
            matches.sort { $0.id.entityID.description < $1.id.entityID.description }
        }
        if let limit, limit < matches.count { matches.removeLast(matches.count - max(0, limit)) }
        return matches
    }

    /// The entities whose date key lies in `range`, in date order.
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` when the repository has no date key.
    /// - Complexity: O(log n + k).
    public func fetch(dateIn range: ClosedRange<Date>) throws -> [Entity] {
        guard dateKey != nil else { throw RepositoryError.invalidQuery("repository \(typeName) has no date key") }
        return projection.read { state in
            var slot = Self.indexSlot((range.lowerBound, .string("")), in: state.dateIndex)
            // `.string("")` sorts first among equal dates, so `slot` is the first date >= lower bound.
            var out: [Entity] = []
            while slot < state.dateIndex.count, state.dateIndex[slot].date <= range.upperBound {
                if let entity = state.entities[state.dateIndex[slot].id] { out.append(entity) }
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
    public var count: Int { projection.read { $0.entities.count } }

    // MARK: Writing

    private func encode(_ kind: String, id: EntityID, entity: Entity?, expectedVersion: UInt64?) throws -> PendingEvent {
        let payload = try entity.map { Array(try JSONEncoder().encode($0)) } ?? []
        return PendingEvent(EncodedEvent(eventType: "\(typeName).\(kind)", schemaVersion: 1, entityID: id, payload: payload),
                            expectedVersion: expectedVersion)
    }

    /// The event that adds `entity`, for a batch. Its expected version is the entity's
    /// current one, so a concurrent add of the same id conflicts.
    /// - Throws: ``RepositoryError/alreadyExists(_:)``.
    public func pendingAdd(_ entity: Entity) throws -> PendingEvent {
        let id = entity.id.entityID
        guard fetch(id: entity.id) == nil else { throw RepositoryError.alreadyExists(id) }
        return try encode("added", id: id, entity: entity, expectedVersion: store.version(of: id))
    }

    /// The event that replaces `entity`, for a batch.
    /// - Throws: ``RepositoryError/notFound(_:)``.
    public func pendingUpdate(_ entity: Entity) throws -> PendingEvent {
        let id = entity.id.entityID
        guard fetch(id: entity.id) != nil else { throw RepositoryError.notFound(id) }
        return try encode("updated", id: id, entity: entity, expectedVersion: store.version(of: id))
    }

    /// The event that deletes the entity with `id`, for a batch.
    /// - Throws: ``RepositoryError/notFound(_:)``.
    public func pendingDelete(id: Entity.ID) throws -> PendingEvent {
        let key = id.entityID
        guard fetch(id: id) != nil else { throw RepositoryError.notFound(key) }
        return try encode("deleted", id: key, entity: nil, expectedVersion: store.version(of: key))
    }

    private func commit(_ events: [PendingEvent], conflictMeansExists: Bool) async throws {
        do { try await store.append(events) } catch RepositoryError.conflict(let id, _, _) where conflictMeansExists {
            throw RepositoryError.alreadyExists(id)
        }
    }

    /// Adds an entity. - Throws: ``RepositoryError/alreadyExists(_:)``, storage errors.
    public func add(_ entity: Entity) async throws { try await commit([pendingAdd(entity)], conflictMeansExists: true) }
    /// Replaces an entity. - Throws: ``RepositoryError/notFound(_:)``, ``RepositoryError/conflict(entity:expected:actual:)`` on a concurrent change.
    public func update(_ entity: Entity) async throws { try await commit([pendingUpdate(entity)], conflictMeansExists: false) }
    /// Deletes an entity. - Throws: ``RepositoryError/notFound(_:)``, conflicts, storage errors.
    public func delete(id: Entity.ID) async throws { try await commit([pendingDelete(id: id)], conflictMeansExists: false) }
    /// Adds entities atomically. - Throws: ``RepositoryError/alreadyExists(_:)`` (also for a duplicate within the batch); nothing is written then.
    public func addAll(_ entities: [Entity]) async throws {
        guard !entities.isEmpty else { return }
        try await commit(entities.map(pendingAdd), conflictMeansExists: true)
    }
    /// Replaces entities atomically. - Throws: ``RepositoryError/notFound(_:)``; nothing is written then.
    public func updateAll(_ entities: [Entity]) async throws {
        guard !entities.isEmpty else { return }
        try await commit(entities.map(pendingUpdate), conflictMeansExists: false)
    }
    /// Deletes entities atomically. - Throws: ``RepositoryError/notFound(_:)``; nothing is written then.
    public func deleteAll(ids: [Entity.ID]) async throws {
        guard !ids.isEmpty else { return }
        try await commit(ids.map { try pendingDelete(id: $0) }, conflictMeansExists: false)
    }

    /// Deletes every entity matching `predicate`, atomically.
    /// - Returns: How many were deleted.
    @discardableResult
    public func deleteAll(where predicate: @Sendable (Entity) -> Bool) async throws -> Int {
        let ids = fetch(where: predicate).map(\.id)
        try await deleteAll(ids: ids)
        return ids.count
    }

    // MARK: Observation, history, time travel

    /// Yields the entities matching `predicate` (in id-text order) at once, then again after
    /// each commit that changed that result, never an identical result twice in a row.
    /// The stream ends when the consumer stops iterating.
    public func observe(where predicate: @escaping @Sendable (Entity) -> Bool) -> AsyncStream<[Entity]> {
        let (stream, continuation) = AsyncStream.makeStream(of: [Entity].self, bufferingPolicy: .bufferingNewest(16))
        let last = Locked<[UInt8]?>(nil)
        let prefix = typeName + "."
        let publish: @Sendable () -> Void = { [weak self] in
            guard let self else { return }
            last.withLock { last in
                let result = self.fetch(where: predicate)
                // Entities need not be Equatable: compare encodings to drop unchanged results.
                // Sorted keys: JSONEncoder's key order is otherwise not guaranteed to repeat,
                // and an unchanged result would be yielded again (seen under AddressSanitizer).
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                let encoded = (try? encoder.encode(result)).map(Array.init) ?? []
                guard encoded != last else { return }
                last = encoded
                continuation.yield(result)
            }
        }
        let token = projection.addListener { envelopes in
            if envelopes.contains(where: { $0.eventType.hasPrefix(prefix) }) { publish() }
        }
        publish()
        continuation.onTermination = { [weak projection] _ in projection?.removeListener(token) }
        return stream
    }

    /// The events of one entity, oldest first. - Complexity: O(n) log scan.
    public func history(of id: Entity.ID) throws -> [EventEnvelope] {
        try store.history(of: id.entityID).filter { $0.eventType.hasPrefix(typeName + ".") }
    }

    /// The entities as they were after the event at `position`.
    /// - Complexity: O(events since the newest usable snapshot at or before `position`).
    public func entities(throughPosition position: LogPosition) throws -> [Entity] {
        let past = try store.state(of: { projection.makeFresh() }, throughPosition: position)
        return past.read { $0.entities.values.sorted { $0.id.entityID.description < $1.id.entityID.description } }
    }

    /// The entities as they were at `date` (empty before the first event).
    public func entities(asOf date: Date) throws -> [Entity] {
        guard let position = try store.lastPosition(recordedAtOrBefore: date) else { return [] }
        return try entities(throughPosition: position)
    }
}
