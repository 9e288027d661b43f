public import Activities
public import Dependencies
import EventKernel
public import EventKernelDependencies
import Foundation

extension ActivityRepositoryClient: DependencyKey {
    /// The durable repository on the process's store (`\.eventStore`: by default
    /// `$EVENTKERNEL_STORE`, else `./eventkernel-store`), opened on first use. A failed open
    /// is thrown by the call that needed it and tried again by the next; ``observe`` then
    /// ends at once.
    public static var liveValue: ActivityRepositoryClient {
        @Dependency(\.eventStore) var eventStore
        return live(on: eventStore)
    }

    /// The event-sourced repository on `eventStore`, registered on first use.
    /// - Parameter eventStore: The store, shared with the process's other repositories.
    public static func live(on eventStore: EventStoreClient) -> ActivityRepositoryClient {
        let opened = OpenedOnce { try EventSourcedActivityRepository(store: try await eventStore.store()) }
        let repository: @Sendable () async throws -> EventSourcedActivityRepository = { try await opened.value() }
        return ActivityRepositoryClient(
            fetch: { try await repository().fetch(query: $0) },
            fetchRange: { try await repository().fetch(range: $0) },
            add: { try await repository().add($0) },
            update: { try await repository().update($0) },
            delete: { _ = try await repository().delete(id: $0) },
            end: { try await repository().end(id: $0, at: $1) },
            observe: { query in AsyncStream.resolving { try await repository().observe(query: query) } })
    }

    /// Every endpoint reports an issue (failing the test) and throws, as swift-dependencies'
    /// test values do; `observe` reports and returns a finished stream. Override the endpoints
    /// a test uses (`$0.activityRepository.fetch = { _ in [...] }`), or the whole client
    /// (`try .inMemory([...])`).
    public static var testValue: ActivityRepositoryClient {
        ActivityRepositoryClient(
            fetch: IssueReporting.unimplemented("ActivityRepositoryClient.fetch"),
            fetchRange: IssueReporting.unimplemented("ActivityRepositoryClient.fetchRange"),
            add: IssueReporting.unimplemented("ActivityRepositoryClient.add"),
            update: IssueReporting.unimplemented("ActivityRepositoryClient.update"),
            delete: IssueReporting.unimplemented("ActivityRepositoryClient.delete"),
            end: IssueReporting.unimplemented("ActivityRepositoryClient.end"),
            observe: IssueReporting.unimplemented("ActivityRepositoryClient.observe", placeholder: AsyncStream { $0.finish() }))
    }

    /// An in-memory repository holding `ActivityModel.previewData` (``preview``).
    public static var previewValue: ActivityRepositoryClient { .preview }
}

extension DependencyValues {
    /// The activity repository: `@Dependency(\.activityRepository) var activities`.
    public var activityRepository: ActivityRepositoryClient {
        get { self[ActivityRepositoryClient.self] }
        set { self[ActivityRepositoryClient.self] = newValue }
    }
}
