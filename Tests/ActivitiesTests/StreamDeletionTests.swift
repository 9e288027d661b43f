import Activities
import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// Stream deletion on the Activities family (issue 27 item 1): the kernel's tombstones drop an
/// activity like its own delete event, and a purged activity is never revived.
@Suite("Activity stream deletion")
struct ActivityStreamDeletionTests {
    private static func expectPurged(_ id: UUID, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("the write to purged \(id) was accepted", sourceLocation: sourceLocation)
        } catch let error as RepositoryError {
            #expect(error == .streamPurged(ActivityEventCodec.stream(of: id)), sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(error)", sourceLocation: sourceLocation)
        }
    }

    private static func expectRefused(_ repository: EventSourcedActivityRepository, _ activity: ActivityModel) async throws {
        await expectPurged(activity.id) { try await repository.add(activity) }
        await expectPurged(activity.id) { try await repository.apply([.added(activity)]) }
        #expect(repository.activity(id: activity.id) == nil)
        #expect(try await repository.purge(id: activity.id) == .alreadyPurged)
        #expect(try await repository.store.delete(stream: ActivityEventCodec.stream(of: activity.id)) == .alreadyPurged)
    }

    @Test("soft delete by tombstone, then re-add continues the stream; the history says who")
    func softDeleteThenReAdd() async throws {
        let fixture = try await RepositoryFixture(.durable)
        let repository = fixture.repository
        let activity = model(1)
        try await repository.add(activity)
        let stream = ActivityEventCodec.stream(of: activity.id)
        let who = EventMetadata(correlationID: "c-1", actor: "ops")
        #expect(try await repository.store.delete(stream: stream, metadata: who).envelope?.entityVersion == 2)
        #expect(repository.activity(id: activity.id) == nil && repository.count == 0)
        #expect(try repository.activities(matching: ActivityQuery()).isEmpty)
        #expect(try await repository.store.delete(stream: stream) == .absent, "already gone: nothing written")
        try await repository.add(activity)
        let history = try repository.history(of: activity.id)
        #expect(history.map(\.entityVersion) == [1, 2, 3])
        #expect(history[1].tombstone == .deleted && history[1].event == .deleted(id: activity.id) && history[1].metadata == who)
        #expect(history[0].tombstone == nil)
        #expect(repository.projection.integrityIssues.isEmpty)
    }

    @Test("purge, then re-add fails: live, after a snapshot, after reopen, after a full replay")
    func purgeIsForGood() async throws {
        let fixture = try await RepositoryFixture(.durable)
        var repository = fixture.repository
        let live = model(1), deleted = model(2), kept = model(3)
        for activity in [live, deleted, kept] { try await repository.add(activity) }
        try await repository.delete(id: deleted.id)
        #expect(try await repository.purge(id: live.id).envelope != nil)
        #expect(try await repository.purge(id: deleted.id).envelope != nil, "a soft-deleted activity's history is released by a purge")
        #expect(try await repository.purge(id: UUID()) == .absent, "an unknown id")
        #expect(try repository.activities(matching: ActivityQuery()).map(\.id) == [kept.id])
        #expect(try repository.history(of: live.id).last?.tombstone == .purged)
        #expect(repository.projection.integrityIssues.isEmpty, "a purge of a deleted activity is not an integrity issue")
        try await Self.expectRefused(repository, live)
        try await Self.expectRefused(repository, deleted)
        try await repository.store.writeSnapshots()
        try await repository.close()
        repository = try await fixture.reopen()
        try await Self.expectRefused(repository, live)
        try await repository.close()
        try FileManager.default.removeItem(at: fixture.directory.appending(path: "snapshots"))
        repository = try await fixture.reopen()
        #expect(repository.count == 1)
        #expect(repository.store.purgedStreamCount == 2)
        try await Self.expectRefused(repository, deleted)
        try await repository.close()
    }

    @Test("compaction removes purged activities' bytes; queries, reopen and a full replay answer as before")
    func compactionForgetsPurgedActivities() async throws {
        let directory = TemporaryDirectory("activities-compaction")
        var configuration = EventStore.Configuration()
        configuration.log = SegmentedLog.Configuration(segmentSize: 8_192, compression: .none)
        var repository = try EventSourcedActivityRepository.open(at: directory.url, configuration: configuration)
        let activities = (0..<200).map { model(Double($0), $0 % 2 == 0 ? .sleep : .tummyTime) }
        for activity in activities { try await repository.add(activity) }
        let purged = activities.enumerated().filter { $0.offset % 3 == 0 }.map(\.element)
        for activity in purged { _ = try await repository.purge(id: activity.id) }
        for i in 200..<320 { try await repository.add(model(Double(i))) }
        let window = ActivityQuery(afterDate: Date(timeIntervalSince1970: 3_600 * 20), beforeDate: Date(timeIntervalSince1970: 3_600 * 90), types: [.sleep])
        let before = try repository.activities(matching: ActivityQuery()).map(\.id)
        let windowBefore = try repository.activities(matching: window).map(\.id)
        let report = try await repository.store.compact()
        #expect(report.streamsForgotten == purged.count && report.receiptsWritten == purged.count)
        #expect(try repository.activities(matching: ActivityQuery()).map(\.id) == before)
        #expect(try repository.activities(matching: window).map(\.id) == windowBefore)
        for activity in purged.prefix(3) { try await Self.expectRefused(repository, activity) }
        try await repository.close()
        // No file of the store (a snapshot's body decompressed) holds a purged activity's id (its
        // 16 bytes) any more; a live one's is there, so the search can see one.
        func bytes(_ id: UUID) -> [UInt8] { withUnsafeBytes(of: id.uuid) { Array($0) } }
        for activity in purged { #expect(try files(in: directory.url, holding: bytes(activity.id)).isEmpty, "\(activity.id)") }
        let holding = try files(in: directory.url, holding: bytes(activities[1].id))
        #expect(holding.contains { $0.hasSuffix(".log") } && holding.contains { $0.hasSuffix(".snap") }, "\(holding)")
        for fromSnapshot in [true, false] {
            if !fromSnapshot { try FileManager.default.removeItem(at: directory.url.appending(path: "snapshots")) }
            repository = try EventSourcedActivityRepository.open(at: directory.url, configuration: configuration)
            #expect(try repository.activities(matching: ActivityQuery()).map(\.id) == before, "from a snapshot: \(fromSnapshot)")
            #expect(try repository.activities(matching: window).map(\.id) == windowBefore)
            #expect(repository.store.purgedStreamCount == purged.count)
            for activity in purged.suffix(3) { try await Self.expectRefused(repository, activity) }
            try await repository.close()
        }
    }

    @Test("both orderings of an add and a purge of a deleted id, forced")
    func addThenPurgeAndPurgeThenAdd() async throws {
        let repository = try await RepositoryFixture(.inMemory).repository
        let first = model(1), second = model(2)
        for activity in [first, second] {
            try await repository.add(activity)
            try await repository.delete(id: activity.id)
        }
        try await repository.add(first)
        #expect(try await repository.purge(id: first.id).envelope?.entityVersion == 4, "the purge ends the re-added activity")
        #expect(try repository.history(of: first.id).map(\.tombstone) == [nil, nil, nil, .purged])
        #expect(try await repository.purge(id: second.id).envelope?.entityVersion == 3)
        await Self.expectPurged(second.id) { try await repository.add(second) }
        #expect(try repository.history(of: second.id).map(\.tombstone) == [nil, nil, .purged])
        #expect(repository.count == 0)
    }

    @Test("observers see a purged activity leave")
    func observation() async throws {
        let repository = try await RepositoryFixture(.inMemory).repository
        let activity = model(1)
        try await repository.add(activity)
        var updates = repository.observe(query: ActivityQuery()).makeAsyncIterator()
        #expect(await updates.next()?.map(\.id) == [activity.id])
        try await repository.purge(id: activity.id)
        #expect(await updates.next()?.isEmpty == true)
    }

    @Test("racing purge and add of one deleted id: one outcome, the log's")
    func racingPurgeAndAdd() async throws {
        let fixture = try await RepositoryFixture(.durable, configuration: .init(log: .init(durability: .buffered)))
        let repository = fixture.repository
        let trials = testScale.pick(1_000, small: 300)
        for trial in 0..<trials {
            let activity = model(Double(trial))
            try await repository.add(activity)
            try await repository.delete(id: activity.id)
            async let added: Bool = {
                do { try await repository.add(activity); return true } catch RepositoryError.streamPurged { return false }
            }()
            async let purged = repository.purge(id: activity.id)
            let (didAdd, didPurge) = try await (added, purged)
            #expect(didPurge.envelope != nil, "trial \(trial)")
            let history = try repository.history(of: activity.id)
            #expect(history.map(\.tombstone) == (didAdd ? [nil, nil, nil, .purged] : [nil, nil, .purged]), "trial \(trial)")
            #expect(repository.activity(id: activity.id) == nil, "trial \(trial)")
            if history.last?.tombstone != .purged { break }
        }
    }
}
