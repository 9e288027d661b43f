import Activities
import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// The activity repository's writes all go through `EventStore.execute`: these tests race them.
@Suite("Activity writes through the command path")
struct CommandPathTests {
    static let trials = testScale.pick(2_000, small: 200)

    @Test("racing add and apply of one id on a durable store: exactly one wins, every trial")
    func racingAddsOfOneID() async throws {
        let fixture = try await RepositoryFixture(.durable)
        let repository = fixture.repository
        for trial in 0..<Self.trials {
            let contested = model(Double(trial))
            let wins = await withTaskGroup(of: Bool.self) { group in
                for task in 0..<8 {
                    group.addTask {
                        do {
                            if task % 2 == 0 { try await repository.add(contested) } else { try await repository.apply([.added(contested)]) }
                            return true
                        } catch RepositoryError.alreadyExists(let id) {
                            #expect(id == .uuid(contested.id))
                            return false
                        } catch {
                            Issue.record("unexpected \(error)")
                            return false
                        }
                    }
                }
                var wins = 0
                for await won in group where won { wins += 1 }
                return wins
            }
            #expect(wins == 1, "trial \(trial)")
            #expect(try repository.store.version(of: ActivityEventCodec.stream(of: contested.id)) == 1, "trial \(trial)")
            if wins != 1 { break }
        }
        #expect(repository.count == Self.trials)
        #expect(repository.store.nextPosition == UInt64(Self.trials))
        try await repository.close()
    }

    @Test("racing update and delete on a durable store: an update never resurrects a deleted activity")
    func racingUpdateAndDelete() async throws {
        let fixture = try await RepositoryFixture(.durable)
        let repository = fixture.repository
        for trial in 0..<Self.trials {
            let original = model(Double(trial))
            // The activity's id is new: its whole history lies from here on (a scan of this
            // trial's events, not of the whole log).
            let start = repository.store.nextPosition
            try await repository.add(original)
            var changed = original
            changed.type = .tummyTime
            async let update: Bool = { do { try await repository.update(changed); return true } catch { return false } }()
            async let deleted = (try? await repository.delete(id: original.id)) ?? false
            let (updated, wasDeleted) = await (update, deleted)
            #expect(wasDeleted, "trial \(trial): the delete always finds the activity")
            #expect(repository.activity(id: original.id) == nil, "trial \(trial)")
            let stream = ActivityEventCodec.stream(of: original.id)
            var history: [ActivityEvent] = []
            try repository.store.forEachEnvelope(from: start, through: nil) { envelope in
                if envelope.stream == stream { history.append(try ActivityEventCodec().decode(envelope)) }
                return true
            }
            // Either the update came first, or it failed on the deleted activity: never after.
            #expect(history.last == .deleted(id: original.id), "trial \(trial)")
            #expect(history.count == (updated ? 3 : 2), "trial \(trial)")
        }
        try await repository.close()
    }

    @Test("delete of an unknown id returns false and appends nothing")
    func deleteOfUnknown() async throws {
        let repository = InMemoryActivityRepository().base
        #expect(try await repository.delete(id: UUID()) == false)
        let m = model(0)
        try await repository.add(m)
        #expect(try await repository.delete(id: m.id) == true)
        #expect(try await repository.delete(id: m.id) == false)
        #expect(repository.store.nextPosition == 2)
    }

    @Test("observation ends when the repository closes")
    func observationEndsOnClose() async throws {
        let fixture = try await RepositoryFixture(.durable)
        let repository = fixture.repository
        var iterator = repository.observe(query: ActivityQuery()).makeAsyncIterator()
        #expect(await iterator.next() == [])
        try await repository.close()
        #expect(await iterator.next() == nil)
        // Observing a closed repository ends at once too.
        var late = repository.observe(query: ActivityQuery()).makeAsyncIterator()
        let first = await late.next()
        #expect(first == nil || first == [])
    }

    @Test("a read-only follower's refresh advances positions, versions and observers")
    func followerRefresh() async throws {
        let fixture = try await RepositoryFixture(.durable)
        let writer = fixture.repository
        let m = model(0)
        try await writer.add(m)
        let reader = try EventSourcedActivityRepository.openReadOnly(at: fixture.directory)
        var observed = reader.observe(query: ActivityQuery()).makeAsyncIterator()
        #expect(await observed.next() == [m])

        try await writer.end(id: m.id, at: m.startDate + 60)
        #expect(try reader.refresh() == 1)
        #expect(reader.store.nextPosition == 2)
        #expect(try reader.store.version(of: ActivityEventCodec.stream(of: m.id)) == 2)
        #expect(reader.activity(id: m.id)?.endDate == m.startDate + 60)
        #expect(await observed.next()?.first?.endDate == m.startDate + 60)
        #expect(try reader.refresh() == 0)
        try await reader.close()
        try await writer.close()
    }
}

/// The activity projection keeps each activity's stream version in its row (and a deleted
/// activity's beside them): versions must equal the log's through commits, snapshots and replays,
/// and an event that could not be folded still counts.
@Suite struct ActivityStreamVersionTests {
    private static func versionsInLog(_ store: EventStore) throws -> [UUID: UInt64] {
        var versions: [UUID: UInt64] = [:]
        try store.forEachEnvelope(from: 0, through: nil) { envelope in
            if case .uuid(let id) = envelope.entityID { versions[id] = envelope.entityVersion }
            return true
        }
        return versions
    }

    private static func check(_ repository: EventSourcedActivityRepository, _ reference: [UUID: UInt64], _ context: String) throws {
        for (id, version) in reference {
            #expect(try repository.store.version(of: ActivityEventCodec.stream(of: id)) == version, "\(context): \(id)")
        }
    }

    @Test func versionsContinueAcrossDeleteReAddSnapshotAndReplay() async throws {
        let directory = TemporaryDirectory("ek-activity-versions")
        let models = (0..<40).map { model(Double($0), minutes: nil) }
        var reference: [UUID: UInt64] = [:]
        do {
            let repository = try EventSourcedActivityRepository.open(at: directory.url)
            for m in models { try await repository.add(m) }
            for m in models.prefix(30) { try await repository.end(id: m.id, at: m.startDate + 60) }
            for m in models.prefix(20) { var u = m; u.type = .tummyTime; try await repository.update(u) }
            for m in models.prefix(10) { try await repository.delete(id: m.id) }
            for m in models.prefix(5) { try await repository.add(m) }
            // A raw add of an activity that exists is committed but cannot be folded (an
            // integrity issue): its version still counts.
            let duplicate = ActivityEventCodec().encode(.added(models[39]))
            try await repository.store.append(PendingEvent(duplicate, expectedVersion: 1))
            #expect(repository.projection.integrityIssues.count == 1)
            reference = try Self.versionsInLog(repository.store)
            #expect(reference[models[0].id] == 5 && reference[models[39].id] == 2)
            try Self.check(repository, reference, "live")
            try await repository.close()
        }
        let reopened = try EventSourcedActivityRepository.open(at: directory.url)
        try Self.check(reopened, reference, "from the snapshot")
        // The streams continue: a deleted activity added again, an update expecting the version.
        try await reopened.add(models[7])
        #expect(try reopened.store.version(of: ActivityEventCodec.stream(of: models[7].id)) == 5)
        try await reopened.close()
        try FileManager.default.removeItem(at: directory.file("snapshots"))
        let replayed = try EventSourcedActivityRepository.open(at: directory.url)
        reference[models[7].id] = 5
        try Self.check(replayed, reference, "from the log")
        try await replayed.close()
    }
}
