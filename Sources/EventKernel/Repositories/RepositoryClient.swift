/// A generic repository as a struct of closures, for dependency injection: what
/// `ActivityRepositoryClient` is to activities, for any entity of an ``EventSourcedRepository``.
///
/// ```swift
/// struct ThreadList { var threads: RepositoryClient<Thread> }
/// let live = ThreadList(threads: RepositoryClient(repository: threadsRepository))
/// var scripted = live
/// scripted.threads.add = { _ in throw RepositoryError.validationFailed("scripted") }
/// ```
///
/// The `ActivitiesDependencies` and `EventKernelDependencies` products register clients with
/// swift-dependencies (live, test and preview values); this type itself depends on nothing.
public struct RepositoryClient<Entity: Identifiable & Sendable>: Sendable where Entity.ID: Sendable {
    /// See ``EventSourcedRepository/fetch(id:)``.
    public var fetchID: @Sendable (Entity.ID) async throws -> Entity?
    /// See ``EventSourcedRepository/fetch(_:)``.
    public var fetch: @Sendable (EntityQuery<Entity>) async throws -> [Entity]
    /// See ``EventSourcedRepository/fetchPage(_:)``.
    public var fetchPage: @Sendable (EntityQuery<Entity>) async throws -> QueryPage<Entity>
    /// See ``EventSourcedRepository/count(_:)``.
    public var count: @Sendable (EntityQuery<Entity>) async throws -> Int
    /// See ``EventSourcedRepository/add(_:)``.
    public var add: @Sendable (Entity) async throws -> Void
    /// See ``EventSourcedRepository/update(_:)``.
    public var update: @Sendable (Entity) async throws -> Void
    /// See ``EventSourcedRepository/save(_:)``.
    public var save: @Sendable (Entity) async throws -> Void
    /// See ``EventSourcedRepository/delete(id:)``: whether an entity was deleted.
    public var delete: @Sendable (Entity.ID) async throws -> Bool
    /// See ``EventSourcedRepository/observe(_:)``: the current result, then each changed one.
    /// A query the repository refuses ends the stream at once (use ``fetch`` to see why).
    public var observe: @Sendable (EntityQuery<Entity>) -> AsyncStream<[Entity]>

    /// Creates a client from closures.
    public init(
        fetchID: @escaping @Sendable (Entity.ID) async throws -> Entity?,
        fetch: @escaping @Sendable (EntityQuery<Entity>) async throws -> [Entity],
        fetchPage: @escaping @Sendable (EntityQuery<Entity>) async throws -> QueryPage<Entity>,
        count: @escaping @Sendable (EntityQuery<Entity>) async throws -> Int,
        add: @escaping @Sendable (Entity) async throws -> Void,
        update: @escaping @Sendable (Entity) async throws -> Void,
        save: @escaping @Sendable (Entity) async throws -> Void,
        delete: @escaping @Sendable (Entity.ID) async throws -> Bool,
        observe: @escaping @Sendable (EntityQuery<Entity>) -> AsyncStream<[Entity]>
    ) {
        self.fetchID = fetchID
        self.fetch = fetch
        self.fetchPage = fetchPage
        self.count = count
        self.add = add
        self.update = update
        self.save = save
        self.delete = delete
        self.observe = observe
    }
}

extension RepositoryClient where Entity: Codable, Entity.ID: EntityIDConvertible {
    /// A client forwarding to `repository`.
    public init(repository: EventSourcedRepository<Entity>) {
        self.init(resolving: { repository })
        observe = { query in (try? repository.observe(query)) ?? AsyncStream { $0.finish() } }
    }

    /// A client forwarding to the repository `resolve` returns: called on every call, so it
    /// may open the repository on first use and throw why it could not (a store locked by
    /// another process); ``observe`` then yields nothing and ends.
    /// - Parameter resolve: Returns the repository, usually cached after its first call.
    public init(resolving resolve: @escaping @Sendable () async throws -> EventSourcedRepository<Entity>) {
        self.init(
            fetchID: { id in try await resolve().fetch(id: id) },
            fetch: { query in try await resolve().fetch(query) },
            fetchPage: { query in try await resolve().fetchPage(query) },
            count: { query in try await resolve().count(query) },
            add: { entity in try await resolve().add(entity) },
            update: { entity in try await resolve().update(entity) },
            save: { entity in try await resolve().save(entity) },
            delete: { id in try await resolve().delete(id: id) },
            observe: { query in AsyncStream.resolving { try await resolve().observe(query) } })
    }
}
