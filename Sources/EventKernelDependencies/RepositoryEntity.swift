public import EventKernel

/// An entity whose repository is a swift-dependencies value: conform it, then write
/// `@Dependency(RepositoryClient<Thread>.self) var threads` in a feature.
///
/// ```swift
/// extension Thread: RepositoryEntity {
///     static let repository = RepositoryDefinition<Thread>(
///         typeName: "Thread", indexes: [.on(\.forumID, .descending(\.lastPostDate))])
///     static var previewEntities: [Thread] { [Thread(id: 1, forumID: 1, title: "Welcome")] }
/// }
/// ```
///
/// The live value opens the repository on the shared ``EventStoreClient`` (`\.eventStore`),
/// the preview value on the preview store seeded with ``previewEntities``, and the test value
/// fails every test that calls it without overriding it.
public protocol RepositoryEntity: Identifiable, Codable, Sendable where ID: EntityIDConvertible {
    /// How the entity's repository is declared: its type name, schema, indexes, default
    /// order and validation.
    static var repository: RepositoryDefinition<Self> { get }
    /// What the preview value holds; empty by default.
    static var previewEntities: [Self] { get }
}

extension RepositoryEntity {
    public static var previewEntities: [Self] { [] }
}

/// The arguments of `EventSourcedRepository.init(store:typeName:schema:indexes:defaultOrder:validate:)`
/// without the store: a repository declared once and opened on whichever store a dependency
/// context provides.
public struct RepositoryDefinition<Entity: Identifiable & Codable & Sendable>: Sendable where Entity.ID: EntityIDConvertible {
    /// The entity type name, unique per store.
    public var typeName: String
    /// The entity's schema version, codec and upcasters.
    public var schema: EntitySchema<Entity>
    /// The declared indexes.
    public var indexes: [EntityIndex<Entity>]
    /// The order of unordered queries.
    public var defaultOrder: [IndexComponent<Entity>]
    /// Checks an entity before any write.
    public var validate: (@Sendable (Entity) throws -> Void)?

    /// Declares a repository; the parameters are those of `EventSourcedRepository`'s initializer.
    public init(
        typeName: String, schema: EntitySchema<Entity> = EntitySchema(),
        indexes: [EntityIndex<Entity>] = [], defaultOrder: [IndexComponent<Entity>] = [],
        validate: (@Sendable (Entity) throws -> Void)? = nil
    ) {
        self.typeName = typeName
        self.schema = schema
        self.indexes = indexes
        self.defaultOrder = defaultOrder
        self.validate = validate
    }

    /// Creates the repository on `store` (registering its projection, catching it up).
    /// - Throws: What `EventSourcedRepository.init` throws (the type name taken, an event
    ///   that does not decode, storage errors).
    public func open(on store: EventStore) throws -> EventSourcedRepository<Entity> {
        try EventSourcedRepository(store: store, typeName: typeName, schema: schema, indexes: indexes,
                                   defaultOrder: defaultOrder, validate: validate)
    }
}
