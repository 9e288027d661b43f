import Activities
import ActivityTrackerExample
import Foundation
import Testing

// The plan's own tests (XCTest there, Swift Testing here), otherwise as written.
@Suite struct InMemoryActivityRepositoryTests {
    let repository = InMemoryActivityRepository()

    @Test func testAddAndFetch() async throws {
        let activity = ActivityModel(id: UUID(), startDate: Date(), endDate: nil, type: .sleep)
        try await repository.add(activity)
        let fetched = try await repository.fetch(query: .init())
        #expect(fetched.count == 1)
        #expect(fetched.first?.id == activity.id)
    }

    @Test func testQueryFiltering() async throws {
        let now = Date()
        let yesterday = Calendar.current.date(byAdding: .day, value: -1, to: now)!
        try await repository.add(ActivityModel(id: UUID(), startDate: now, endDate: nil, type: .sleep))
        try await repository.add(ActivityModel(id: UUID(), startDate: yesterday, endDate: nil, type: .sleep))
        let query = ActivityQuery(afterDate: Calendar.current.startOfDay(for: now).addingTimeInterval(-1))
        let result = try await repository.fetch(query: query)
        #expect(result.count == 1)
    }
}

@Suite struct ActivityFeatureTests {
    @Test func aFeatureOnTheFiveClosureClient() async throws {
        // The plan's TestStore override: five closures, the others defaulted.
        let added = LockedBox<[ActivityModel]>([])
        let feature = ActivityFeature(activityRepository: .init(
            fetch: { _ in added.value },
            add: { activity in added.mutate { $0.append(activity) } },
            update: { _ in },
            delete: { _ in },
            observe: { _ in AsyncStream { _ in } }))
        let started = try await feature.startActivity(.sleep)
        #expect(try await feature.today() == [started])
    }

    @Test func observeYieldsAtOnceAndAfterEachChange() async throws {
        let client = ActivityRepositoryClient.testValue
        var updates = client.observe(ActivityQuery()).makeAsyncIterator()
        #expect(await updates.next() == [])
        let activity = ActivityModel(startDate: Date(), type: .tummyTime)
        try await client.add(activity)
        #expect(await updates.next() == [activity])
        try await client.delete(activity.id)
        #expect(await updates.next() == [])
    }

    @Test func previewAndLimitZero() async throws {
        let feature = ActivityFeature(activityRepository: .previewValue)
        #expect(try await feature.sleeps().count == ActivityModel.previewData.filter { $0.type == .sleep }.count)
    }
}

/// A tiny lock-protected box for the test doubles.
final class LockedBox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: T
    init(_ value: T) { stored = value }
    var value: T { lock.withLock { stored } }
    func mutate(_ body: (inout T) -> Void) { lock.withLock { body(&stored) } }
}
