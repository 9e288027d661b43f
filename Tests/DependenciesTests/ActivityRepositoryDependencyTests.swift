import Activities
import ActivitiesDependencies
import Dependencies
import EventKernel
import EventKernelDependencies
import EventKernelTestSupport
import Foundation
import Testing

/// `ActivityRepositoryClient` as a swift-dependencies value: the live value on a durable store,
/// the test value failing loudly, the preview value in memory.
@Suite("Dependencies: ActivityRepositoryClient")
struct ActivityRepositoryDependencyTests {
    @Test func liveValueWritesToTheStoreAtTheConfiguredLocation() async throws {
        let directory = TemporaryDirectory("ek-deps")
        let eventStore = EventStoreClient.open(at: directory.url)
        let client = withDependencies { $0.eventStore = eventStore } operation: { ActivityRepositoryClient.liveValue }
        #expect(!FileManager.default.fileExists(atPath: directory.file("LOCK").path), "opened before first use")

        let nap = crashModel(1)
        var results = client.observe(ActivityQuery(types: [nap.type])).makeAsyncIterator()
        #expect(await results.next() == [])
        try await client.add(nap)
        #expect(await results.next() == [nap], "the live feed did not yield the add")
        #expect(try await client.fetch(ActivityQuery()) == [nap])
        try await client.end(nap.id, nap.startDate + 60)
        await #expect(throws: RepositoryError.notFound(.uuid(crashModel(2).id))) { try await client.update(crashModel(2)) }
        try await client.delete(crashModel(3).id)  // unknown: not an error

        try await eventStore.close()
        await #expect(throws: RepositoryError.closed) { try await client.add(crashModel(4)) }
        let reopened = try EventSourcedActivityRepository.open(at: directory.url)
        #expect(reopened.activity(id: nap.id)?.endDate == nap.startDate + 60)
        #expect(reopened.count == 1)
        try await reopened.close()
    }

    @Test func liveValueReportsAFailedOpenAndRetriesOnTheNextCall() async throws {
        let directory = TemporaryDirectory("ek-deps")
        // The directory is a file: the open fails with the log's error, kept as the cause.
        let blocked = directory.file("store")
        try Data("not a store".utf8).write(to: blocked)
        let client = ActivityRepositoryClient.live(on: .open(at: blocked))
        do {
            try await client.add(crashModel(1))
            Issue.record("an add on a store that cannot open succeeded")
        } catch let error as RepositoryError {
            #expect(error.logError != nil, "the open's LogError was not kept: \(error)")
        }
        var feed = client.observe(ActivityQuery()).makeAsyncIterator()
        #expect(await feed.next() == nil, "an observation of a store that cannot open must end")

        try FileManager.default.removeItem(at: blocked)
        try await client.add(crashModel(1))
        #expect(try await client.fetch(ActivityQuery()) == [crashModel(1)])
    }

    @Test func testValueFailsEveryEndpointThatIsNotOverridden() async throws {
        let client = withDependencies { _ in } operation: {
            @Dependency(\.activityRepository) var activities
            return activities
        }
        let query = ActivityQuery()
        await withKnownIssue { _ = try await client.fetch(query) }
        await withKnownIssue { _ = try await client.fetchRange(ActivityRangeQuery(.startingIn, from: .now, to: .now)) }
        await withKnownIssue { try await client.add(crashModel(1)) }
        await withKnownIssue { try await client.update(crashModel(1)) }
        await withKnownIssue { try await client.delete(UUID()) }
        await withKnownIssue { try await client.end(UUID(), .now) }
        await withKnownIssue {
            var feed = client.observe(query).makeAsyncIterator()
            #expect(await feed.next() == nil)
        }
        // The unimplemented endpoints throw too, so code under test cannot carry on.
        await withKnownIssue {
            await #expect(throws: (any Error).self) { try await client.add(crashModel(1)) }
        }

        // An overridden endpoint works; the others still fail.
        let overridden = withDependencies {
            $0.activityRepository.fetch = { _ in [crashModel(7)] }
        } operation: {
            @Dependency(\.activityRepository) var activities
            return activities
        }
        #expect(try await overridden.fetch(query) == [crashModel(7)])
        await withKnownIssue { try await overridden.add(crashModel(1)) }
    }

    @Test func previewValueHoldsThePreviewData() async throws {
        let client = withDependencies { $0.context = .preview } operation: {
            @Dependency(\.activityRepository) var activities
            return activities
        }
        let all = try await client.fetch(ActivityQuery(sortOrder: .oldestFirst))
        #expect(all.map(\.type) == ActivityModel.previewData.map(\.type))
        #expect(all.map(\.startDate) == ActivityModel.previewData.map(\.startDate))
        // Writable, in memory.
        try await client.add(crashModel(1))
        #expect(try await client.fetch(ActivityQuery()).count == ActivityModel.previewData.count + 1)
    }
}
