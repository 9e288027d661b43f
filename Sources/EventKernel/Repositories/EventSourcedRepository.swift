import KernelPrimitives

/// A generic event-sourced repository: a domain declares its entity type and gets durable
/// add, update, save (upsert) and delete (as events), id lookups, predicate and date-range
/// queries, paging, observation, history and time travel, without writing storage code.
///
/// Every entity is a stream (``StreamID``: `typeName` + id), so ids need only be unique
/// within a type: thread 100 and post 100 are different entities. Events are named
/// `"<typeName>.added"`, `".updated"` and `".deleted"`; payloads are the entity encoded by the
/// ``EntitySchema``'s codec (compact binary by default, JSON on request) at its version, and old
/// versions are upcast on every read. Events in the domain's words that set one property
/// (`"<typeName>.ended"`) are ``FieldEvent``s registered on the schema.
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
    /// How entities are encoded and upcast (``rebuild(schema:indexes:progress:)`` may change it).
    public var schema: EntitySchema<Entity> { writingSchema.schema }
    /// The declared indexes, in declaration order: the table's (a rebuild may change them).
    public var indexes: [EntityIndex<Entity>] { projection.withLockedState { $0.declared } }
    /// The schema writes encode with, switched by a rebuild right after the table (under the
    /// store's commit lock).
    let currentSchema: Locked<SchemaBox>
    /// The schema writes encode with, in a box: what a command reads once per event, for a
    /// retain of the box where copying the schema out of the lock retained and released each
    /// of its tables and closures (perf: 3% of a batch append of activities).
    var writingSchema: SchemaBox { currentSchema.withLock { $0 } }

    /// An ``EntitySchema`` as one reference (see ``writingSchema``).
    final class SchemaBox: Sendable {
        let schema: EntitySchema<Entity>
        /// The schema's field events by name, each with its event type (`"<typeName>.<name>"`),
        /// spelled once per schema rather than per event appended.
        let fieldEvents: [String: (event: RegisteredFieldEvent<Entity>, eventType: String)]
        init(_ schema: EntitySchema<Entity>, _ eventTypes: OwnEventTypes) {
            self.schema = schema
            self.fieldEvents = schema.fieldEvents.mapValues { ($0, eventTypes.field($0.name)) }
        }
    }
    /// The names of the entity type's own events.
    let eventTypes: OwnEventTypes
    /// The projection folding this type's events (registered with the store).
    public let projection: ProjectedState<State>
    let defaultOrder: EntityQuery<Entity>.Orderings
    let validate: (@Sendable (Entity) throws -> Void)?
    /// Times every query when the store is instrumented (`nil`: no clock is read).
    let queryLatency: (any DurationRecorder)?
    /// The plans of the query shapes run so far on the published table's declaration of
    /// indexes (`EntityTable.planCache`, where they are kept): compiling and planning a query
    /// was about half of a 50-row page, and a repository runs a few shapes many times.
    var planCache: QueryPlanCache { publishedTable.planCache }

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
    ///   lost), ``RepositoryError/misuse(_:)`` when the name is taken, storage errors.
    public init(
        store: EventStore, typeName: String, schema: EntitySchema<Entity> = EntitySchema(),
        indexes: [EntityIndex<Entity>] = [],
        defaultOrder: [IndexComponent<Entity>] = [],
        validate: (@Sendable (Entity) throws -> Void)? = nil
    ) throws {
        self.store = store
        self.typeName = typeName
        self.eventTypes = OwnEventTypes(typeName)
        self.currentSchema = Locked(SchemaBox(schema, eventTypes))
        self.defaultOrder = EntityQuery<Entity>.Orderings(
            terms: defaultOrder.map { IndexedField(keyPath: $0.keyPath, descending: $0.descending) }, values: defaultOrder.map(\.value))
        self.validate = validate
        try Self.checkFieldEvents(schema, indexes, typeName: typeName)
        self.projection = Self.makeProjection(typeName: typeName, schema: schema, indexes: indexes)
        self.queryLatency = store.instrumentation?.queryLatency(repository: projection.name)
        try store.register(projection)
    }

    /// The stream of the entity with `id`.
    public func stream(of id: Entity.ID) -> StreamID { StreamID(typeName, id.entityID) }
}
