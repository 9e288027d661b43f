public import Activities
import Foundation
import Testing

// The activity tracker plan's own backend and client code (../shared/seeds, design 000,
// "In-Memory Implementation (Testing)" and "TCA Dependency Client"), compiled against the
// library's `ActivityRepositoryProtocol`, `ActivityQuery`, `ActivityModel` and
// `ActivityRepositoryClient`. It is the plan's text except for what Swift 6 itself (not the
// library) requires, each marked `// Swift 6:` where it stands:
// - the plan's actor satisfies its synchronous `observe(query:)` requirement with an
//   actor-isolated method, which Swift 6 rejects against any nonisolated requirement (the
//   plan's own protocol included): `observe` is `nonisolated`, and the continuation is
//   stored by a hop onto the actor;
// - `init(repository: ActivityRepositoryProtocol)` and `underlying: Error` are written with
//   `any` (ExistentialAny, on in this package), and the imports are `public` (the plan's types
//   are public; InternalImportsByDefault is on), for Activities, which the public initializer uses;
// - the types are nested in `NaptimePlan` so that their names (`InMemoryActivityRepository`,
//   `RepositoryError`) do not shadow the library's in this test target.
// The Core Data backend needs Core Data (not on Linux); it has the same shape as the actor:
// the plan's five requirements, a `delete(id:)` returning nothing, no `fetch(range:)`, no `end`.
enum NaptimePlan {
    public enum RepositoryError: Error {
        case notFound(id: UUID)
        case saveFailed(underlying: any Error)   // Swift 6: `any` (ExistentialAny)
    }

    public actor InMemoryActivityRepository: ActivityRepositoryProtocol {
        private var activities: [ActivityModel]
        private var continuations: [UUID: AsyncStream<[ActivityModel]>.Continuation] = [:]

        public init(activities: [ActivityModel] = []) {
            self.activities = activities
        }

        public func fetch(query: ActivityQuery) async throws -> [ActivityModel] {
            var result = activities

            if let afterDate = query.afterDate {
                result = result.filter { $0.startDate > afterDate }
            }
            if let beforeDate = query.beforeDate {
                result = result.filter { $0.startDate < beforeDate }
            }
            if let types = query.types {
                result = result.filter { types.contains($0.type) }
            }

            result.sort { lhs, rhs in
                query.sortOrder == .newestFirst
                    ? lhs.startDate > rhs.startDate
                    : lhs.startDate < rhs.startDate
            }

            if let limit = query.limit, limit > 0 {
                result = Array(result.prefix(limit))
            }

            return result
        }

        public func add(_ activity: ActivityModel) async throws {
            activities.append(activity)
            notifyObservers()
        }

        public func update(_ activity: ActivityModel) async throws {
            guard let index = activities.firstIndex(where: { $0.id == activity.id }) else {
                throw RepositoryError.notFound(id: activity.id)
            }
            activities[index] = activity
            notifyObservers()
        }

        public func delete(id: UUID) async throws {
            activities.removeAll { $0.id == id }
            notifyObservers()
        }

        // Swift 6: `nonisolated`, and the continuation stored through `register` (below).
        nonisolated public func observe(query: ActivityQuery) -> AsyncStream<[ActivityModel]> {
            let id = UUID()
            return AsyncStream { continuation in
                Task {
                    // Store continuation for updates
                    await self.register(id: id, continuation: continuation)

                    // Yield initial value
                    if let activities = try? await self.fetch(query: query) {
                        continuation.yield(activities)
                    }
                }

                continuation.onTermination = { _ in
                    Task { await self.removeContinuation(id: id) }
                }
            }
        }

        // Swift 6: the plan's `self.continuations[id] = continuation`, on the actor.
        private func register(id: UUID, continuation: AsyncStream<[ActivityModel]>.Continuation) {
            continuations[id] = continuation
        }

        private func notifyObservers() {
            for continuation in continuations.values {
                continuation.yield(activities)
            }
        }

        private func removeContinuation(id: UUID) {
            continuations.removeValue(forKey: id)
        }
    }
}

extension ActivityRepositoryClient {
    /// Convenience initializer from protocol
    public init(repository: any ActivityRepositoryProtocol) {
        self.init(
            fetch: repository.fetch,
            add: repository.add,
            update: repository.update,
            delete: repository.delete,
            observe: repository.observe
        )
    }
}

@Suite struct PlanBackendTests {
    typealias Backend = NaptimePlan.InMemoryActivityRepository

    static let start = Date(timeIntervalSinceReferenceDate: 780_000_000)
    static func at(_ hours: Double) -> Date { start.addingTimeInterval(hours * 3_600) }

    /// The plan's backend conforms as written; the requirements beyond its five work through
    /// their defaults.
    @Test func thePlansActorConformsAndGetsTheRest() async throws {
        let sleep = ActivityModel(id: UUID(), startDate: Self.at(0), endDate: nil, type: .sleep)
        let feed = ActivityModel(id: UUID(), startDate: Self.at(2), endDate: Self.at(2.5), type: .tummyTime)
        let later = ActivityModel(id: UUID(), startDate: Self.at(30), endDate: nil, type: .sleep)
        let backend = Backend(activities: [later, sleep, feed])
        let repository: any ActivityRepositoryProtocol = backend

        // fetch(range:): the window, oldest first, types and limit applied; a reversed window refused.
        #expect(try await repository.fetch(startingIn: Self.at(0)...Self.at(24)) == [sleep, feed])
        #expect(try await repository.fetch(startingIn: Self.at(0)...Self.at(24), types: [.tummyTime]) == [feed])
        #expect(try await repository.fetch(overlapping: Self.at(3)...Self.at(40)) == [sleep, later], "running counts; feed ended before")
        #expect(try await repository.fetch(range: ActivityRangeQuery(.startingIn, from: Self.at(0), to: Self.at(40), sortOrder: .newestFirst, limit: 2))
                == [later, feed])
        await #expect(throws: (any Error).self) {
            try await repository.fetch(range: ActivityRangeQuery(.startingIn, from: Self.at(5), to: Self.at(1)))
        }

        // end(id:at:): through update; an unknown id and an end before the start refused.
        try await repository.end(id: sleep.id, at: Self.at(1.5))
        #expect(try await backend.fetch(query: ActivityQuery(types: [.sleep], sortOrder: .oldestFirst)).first?.endDate == Self.at(1.5))
        await #expect(throws: (any Error).self) { try await repository.end(id: UUID(), at: Self.at(1)) }
        await #expect(throws: (any Error).self) { try await repository.end(id: later.id, at: Self.at(1)) }
        #expect(try await backend.fetch(query: ActivityQuery()).first { $0.id == later.id }?.endDate == nil)

        // delete: the plan's spelling as a statement, the Bool where one is wanted.
        try await repository.delete(id: feed.id)
        let deleted: Bool = try await repository.delete(id: later.id)
        #expect(deleted)
        if try await repository.delete(id: later.id) { Issue.record("an unknown id reported as deleted") }
        #expect(try await backend.fetch(query: ActivityQuery()).map(\.id) == [sleep.id])
    }

    /// The plan's client initializer (`delete: repository.delete` and all) compiles against the
    /// library's protocol, over the plan's backend and over the library's repositories.
    @Test func thePlansClientWorksOverEveryBackend() async throws {
        let repositories: [any ActivityRepositoryProtocol] = [
            Backend(), InMemoryActivityRepository(),
        ]
        for repository in repositories {
            let client = ActivityRepositoryClient(repository: repository)
            var updates = client.observe(ActivityQuery()).makeAsyncIterator()
            #expect(await updates.next() == [], "\(type(of: repository))")
                let activity = ActivityModel(id: UUID(), startDate: Self.at(1), endDate: nil, type: .tummyTime)
            try await client.add(activity)
            #expect(try await client.fetch(ActivityQuery()) == [activity], "\(type(of: repository))")
            #expect(await updates.next() == [activity], "\(type(of: repository))")
            try await client.delete(activity.id)
            try await client.delete(UUID())   // an unknown id is not an error
            #expect(try await client.fetch(ActivityQuery()).isEmpty, "\(type(of: repository))")
        }
    }

    /// The library's repositories keep their `Bool` from `delete(id:)`, through the protocol too.
    @Test func theLibrarysRepositoriesStillSayWhetherTheyDeleted() async throws {
        let library = InMemoryActivityRepository()
        let activity = ActivityModel(id: UUID(), startDate: Self.at(1), endDate: nil, type: .sleep)
        try await library.add(activity)
        let viaProtocol: any ActivityRepositoryProtocol = library
        #expect(try await viaProtocol.delete(id: UUID()) == false)
        #expect(try await library.delete(id: activity.id) == true)
        try await library.delete(id: activity.id)   // a statement still compiles, and is not an error
    }

    /// A backend that implements neither `delete(id:)` stops with a message naming the type,
    /// instead of the two defaults calling each other until the stack overflows.
    @Test func aBackendWithNoDeleteStopsWithAMessage() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            struct NoDelete: ActivityRepositoryProtocol {
                func fetch(query: ActivityQuery) async throws -> [ActivityModel] { [] }
                func add(_ activity: ActivityModel) async throws {}
                func update(_ activity: ActivityModel) async throws {}
                func observe(query: ActivityQuery) -> AsyncStream<[ActivityModel]> { AsyncStream { $0.finish() } }
            }
            try? await NoDelete().delete(id: UUID())
        }
        let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(stderr.contains("NoDelete implements neither delete(id:) of ActivityRepositoryProtocol"), "\(stderr)")
    }
}
