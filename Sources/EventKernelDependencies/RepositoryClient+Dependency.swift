public import Dependencies
public import EventKernel

extension RepositoryClient: TestDependencyKey where Entity: RepositoryEntity {
    /// Every endpoint reports an issue (failing the test) and throws, as swift-dependencies'
    /// test values do; `observe` reports and returns a finished stream. Override the endpoints
    /// a test uses, or the whole client (`.inMemory()`).
    public static var testValue: RepositoryClient<Entity> {
        let name = "RepositoryClient<\(Entity.self)>"
        return RepositoryClient(
            fetchID: unimplemented("\(name).fetchID"),
            fetch: unimplemented("\(name).fetch"),
            fetchPage: unimplemented("\(name).fetchPage"),
            count: unimplemented("\(name).count"),
            add: unimplemented("\(name).add"),
            update: unimplemented("\(name).update"),
            save: unimplemented("\(name).save"),
            delete: unimplemented("\(name).delete"),
            observe: unimplemented("\(name).observe", placeholder: AsyncStream { $0.finish() }))
    }

    /// The repository on the preview store (`\.eventStore`, in memory), holding
    /// `Entity.previewEntities`.
    public static var previewValue: RepositoryClient<Entity> {
        @Dependency(\.eventStore) var eventStore
        return onStore(eventStore, seed: Entity.previewEntities)
    }

    /// A repository of its own in memory holding `entities` (added when first used): for tests
    /// that want the real engine without a disk.
    public static func inMemory(_ entities: [Entity] = []) -> RepositoryClient<Entity> {
        onStore(.inMemory(), seed: entities)
    }

    /// The repository opened on `eventStore` on first use, then `seed` added to it. Two steps,
    /// each retried on its own: a seed that fails (a validation error) must not reopen the
    /// repository on the next call, which the store would refuse as registered twice, hiding
    /// the seed's error.
    static func onStore(_ eventStore: EventStoreClient, seed: [Entity]) -> RepositoryClient<Entity> {
        let opened = OpenedOnce { try Entity.repository.open(on: try await eventStore.store()) }
        let repository = OpenedOnce {
            let repository = try await opened.value()
            try await repository.addAll(seed)
            return repository
        }
        return RepositoryClient(resolving: { try await repository.value() })
    }
}

extension RepositoryClient: DependencyKey where Entity: RepositoryEntity {
    /// The repository on the process's store (`\.eventStore`), opened on first use; a failed
    /// open is thrown by the call that needed it and tried again by the next.
    public static var liveValue: RepositoryClient<Entity> {
        @Dependency(\.eventStore) var eventStore
        return onStore(eventStore, seed: [])
    }
}
