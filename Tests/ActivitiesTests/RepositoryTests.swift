import Activities
import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport
#if PostgreSQL
import PostgresLog
#endif

/// Which repository a parameterized test runs against: in memory, on the local log, or on a
/// PostgreSQL log (`postgres` is skipped with a notice when no test server is configured).
enum RepositoryKind: String, CaseIterable, CustomTestStringConvertible {
    case inMemory, durable, postgres
    var testDescription: String { rawValue }
}

/// A repository under test plus what it needs to be cleaned up and reopened.
final class RepositoryFixture: Sendable {
    let kind: RepositoryKind
    let directory: URL
    let repository: EventSourcedActivityRepository
    #if PostgreSQL
    /// The PostgreSQL log (`postgres`): snapshots go to `directory`.
    let postgres: PostgresLog.Configuration?
    #else
    let postgres: Void? = nil
    #endif

    init(_ kind: RepositoryKind, configuration: EventStore.Configuration = .init()) async throws {
        self.kind = kind
        directory = FileManager.default.temporaryDirectory.appending(path: "activities-\(UUID().uuidString.prefix(8))")
        #if PostgreSQL
        postgres = kind == .postgres ? try PostgresTestDatabase.configuration() : nil
        #endif
        switch kind {
        case .inMemory:
            repository = InMemoryActivityRepository().base
        case .durable:
            repository = try EventSourcedActivityRepository.open(at: directory, configuration: configuration)
        case .postgres:
            repository = try await Self.onPostgres(postgres, directory, snapshots: configuration.snapshots)
        }
    }

    #if PostgreSQL
    /// A repository on the fixture's PostgreSQL log.
    private static func onPostgres(_ postgres: PostgresLog.Configuration?, _ directory: URL, snapshots: SnapshotPolicy = .default) async throws -> EventSourcedActivityRepository {
        try EventSourcedActivityRepository(store: try await EventStore.open(postgres: postgres!, snapshotsIn: directory, snapshotPolicy: snapshots))
    }
    #else
    /// Skipped in a build without the PostgreSQL trait.
    private static func onPostgres(_ postgres: Void?, _ directory: URL, snapshots: SnapshotPolicy = .default) async throws -> EventSourcedActivityRepository {
        try Test.cancel(withoutPostgreSQL)
    }
    #endif

    /// Another repository on the same log (close this one first: the local log has one writer).
    func reopen() async throws -> EventSourcedActivityRepository {
        switch kind {
        case .inMemory: repository
        case .durable: try EventSourcedActivityRepository.open(at: directory)
        case .postgres: try await Self.onPostgres(postgres, directory)
        }
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
        #if PostgreSQL
        if let postgres { Task { await PostgresTestDatabase.drop(postgres) } }
        #endif
    }
}

let day: TimeInterval = 86_400
let epoch = Date(timeIntervalSince1970: 1_750_000_000)

func model(_ hoursFromEpoch: Double, _ type: ActivityType = .sleep, minutes: Double? = 30) -> ActivityModel {
    let start = epoch.addingTimeInterval(hoursFromEpoch * 3_600)
    return ActivityModel(startDate: start, endDate: minutes.map { start.addingTimeInterval($0 * 60) }, type: type)
}

@Suite("Activity repositories")
struct RepositoryTests {
    @Test("add then fetch, and filter by afterDate", arguments: RepositoryKind.allCases)
    func addThenFetch(kind: RepositoryKind) async throws {
        let fixture = try await RepositoryFixture(kind)
        let repository = fixture.repository
        let a = model(0), b = model(5, .tummyTime), c = model(10)
        for activity in [b, a, c] { try await repository.add(activity) }
        #expect(try await repository.fetch(query: ActivityQuery()) == [c, b, a])
        #expect(try await repository.fetch(query: ActivityQuery(sortOrder: .oldestFirst)) == [a, b, c])
        #expect(try await repository.fetch(query: ActivityQuery(afterDate: a.startDate)) == [c, b])
        #expect(try await repository.fetch(query: ActivityQuery(types: [.sleep], limit: 1)) == [c])
        #expect(try await repository.fetch(startingIn: a.startDate...b.startDate) == [a, b])
        // b runs 5:00-5:30; an interval 5:10-7:00 overlaps it but not a or c.
        #expect(try await repository.fetch(overlapping: b.startDate.addingTimeInterval(600)...b.startDate.addingTimeInterval(7_200)) == [b])
        if kind != .inMemory { try await repository.close() }
    }

    @Test("write semantics: duplicates, unknown ids, end before start, bad queries", arguments: RepositoryKind.allCases)
    func writeSemantics(kind: RepositoryKind) async throws {
        let fixture = try await RepositoryFixture(kind)
        let repository = fixture.repository
        let a = model(0, minutes: nil)
        try await repository.add(a)
        await #expect(throws: RepositoryError.alreadyExists(.uuid(a.id))) { try await repository.add(a) }
        let ghost = model(1)
        await #expect(throws: RepositoryError.notFound(.uuid(ghost.id))) { try await repository.update(ghost) }
        await #expect(throws: RepositoryError.notFound(.uuid(ghost.id))) { try await repository.end(id: ghost.id, at: epoch) }

        let positionsBefore = repository.store.log.bounds.nextPosition
        try await repository.delete(id: ghost.id)
        #expect(repository.store.log.bounds.nextPosition == positionsBefore, "deleting an unknown id appends nothing")

        await #expect {
            try await repository.end(id: a.id, at: a.startDate.addingTimeInterval(-1))
        } throws: { error in
            guard case RepositoryError.validationFailed(let message) = error else { return false }
            return message.contains("before the start date")
        }
        var backwards = model(2)
        backwards.endDate = backwards.startDate.addingTimeInterval(-60)
        await #expect(throws: RepositoryError.self) { try await repository.add(backwards) }
        await #expect {
            _ = try await repository.fetch(query: ActivityQuery(afterDate: epoch.addingTimeInterval(10), beforeDate: epoch))
        } throws: { error in
            if case RepositoryError.invalidQuery = error { return true } else { return false }
        }
        await #expect(throws: RepositoryError.self) { _ = try await repository.fetch(query: ActivityQuery(limit: -1)) }
        // Nothing invalid was recorded: one add, no more.
        #expect(repository.store.log.bounds.nextPosition == positionsBefore)
        #expect(try await repository.fetch(query: ActivityQuery()) == [a])

        try await repository.end(id: a.id, at: a.startDate.addingTimeInterval(600))
        #expect(repository.activity(id: a.id)?.endDate == a.startDate.addingTimeInterval(600))
        try await repository.delete(id: a.id)
        #expect(try await repository.fetch(query: ActivityQuery()).isEmpty)
        // A deleted id may be added again.
        try await repository.add(a)
        #expect(repository.count == 1)
        if kind != .inMemory { try await repository.close() }
    }

    @Test("a randomized model test against a brute-force reference", arguments: RepositoryKind.allCases)
    func randomizedModel(kind: RepositoryKind) async throws {
        let seed: UInt64 = kind == .durable ? 7 : 11
        var random = SplitMix64(seed: seed)
        let fixture = try await RepositoryFixture(kind, configuration: .init(log: .init(durability: .buffered)))
        let repository = fixture.repository
        var reference = BruteForceActivityStore()
        var ids: [UUID] = []
        let types: [ActivityType] = [.sleep, .tummyTime, "feeding", "bath"]
        for step in 0..<2_500 {
            let roll = Int.random(in: 0..<(100), using: &random)
            let existing = ids.isEmpty ? nil : ids[Int.random(in: 0..<(ids.count), using: &random)]
            let start = epoch.addingTimeInterval(Double(Int.random(in: 0..<(30 * 24), using: &random)) * 1_800)
            let end: Date? = Int.random(in: 0..<(5), using: &random) == 0 ? nil : start.addingTimeInterval(Double(Int.random(in: 0..<(600), using: &random)) * 60 - 600)
            let type = types[Int.random(in: 0..<(types.count), using: &random)]
            do {
                if roll < 45 || existing == nil {
                    let m = ActivityModel(startDate: start, endDate: end, type: type)
                    let ok = reference.insert(m)
                    try await repository.add(m)
                    #expect(ok, "step \(step): add should have failed (seed \(seed))")
                    ids.append(m.id)
                } else if roll < 65, let id = existing {
                    let m = ActivityModel(id: id, startDate: start, endDate: end, type: type)
                    let ok = reference.update(m)
                    try await repository.update(m)
                    #expect(ok, "step \(step): update should have failed (seed \(seed))")
                } else if roll < 80, let id = existing {
                    let at = start.addingTimeInterval(Double(Int.random(in: 0..<(100_000), using: &random)) - 50_000)
                    let ok = reference.end(id, at)
                    try await repository.end(id: id, at: at)
                    #expect(ok, "step \(step): end should have failed (seed \(seed))")
                } else if let id = existing {
                    _ = reference.remove(id)
                    try await repository.delete(id: id)
                }
            } catch let error as RepositoryError {
                switch error {
                case .validationFailed, .notFound, .alreadyExists: break  // the reference refused too (checked below)
                default: Issue.record("step \(step): unexpected \(error) (seed \(seed))")
                }
            }
            if step % 25 == 0 {
                let after = Int.random(in: 0..<(3), using: &random) == 0 ? nil : epoch.addingTimeInterval(Double(Int.random(in: 0..<(30 * 48), using: &random)) * 900)
                let before = Int.random(in: 0..<(3), using: &random) == 0 ? nil : after.map { $0.addingTimeInterval(Double(Int.random(in: 0..<(14), using: &random)) * day) }
                let filter: Set<ActivityType>? = Int.random(in: 0..<(2), using: &random) == 0 ? nil : Set(types.shuffled(using: &random).prefix(2))
                let query = ActivityQuery(afterDate: after, beforeDate: before, types: filter,
                                          limit: Int.random(in: 0..<(3), using: &random) == 0 ? nil : Int.random(in: 0..<(60), using: &random),
                                          sortOrder: Int.random(in: 0..<(2), using: &random) == 0 ? .newestFirst : .oldestFirst)
                #expect(try await repository.fetch(query: query) == (try reference.fetch(query)), "step \(step), seed \(seed), query \(query)")
                let lower = epoch.addingTimeInterval(Double(Int.random(in: 0..<(30 * 24), using: &random)) * 1_800)
                let upper = lower.addingTimeInterval(Double(Int.random(in: 0..<(48), using: &random)) * 3_600)
                #expect(try await repository.fetch(startingIn: lower...upper) == reference.fetch(startingIn: lower, upper, types: nil, order: .oldestFirst, limit: nil))
                #expect(try await repository.fetch(overlapping: lower...upper) == reference.fetch(overlapping: lower, upper, types: nil, order: .oldestFirst, limit: nil))
            }
        }
        #expect(repository.count == reference.items.count)
        #expect(repository.projection.integrityIssues.isEmpty)
        if kind != .inMemory {
            try await repository.close()
            let reopened = try await fixture.reopen()
            #expect(try reopened.activities(matching: ActivityQuery(sortOrder: .oldestFirst)) == reference.sorted(reference.items, .oldestFirst))
            try await reopened.close()
        }
    }

    @Test("reopen with a snapshot, without one, and with a corrupted one gives identical results")
    func reopenWithAndWithoutSnapshots() async throws {
        let fixture = try await RepositoryFixture(.durable, configuration: .init(log: .init(durability: .buffered)))
        let repository = fixture.repository
        var expected: [ActivityModel] = []
        for i in 0..<300 {
            let m = model(Double(i), i % 3 == 0 ? .tummyTime : .sleep)
            try await repository.add(m)
            expected.append(m)
        }
        for i in stride(from: 0, to: 300, by: 7) { try await repository.delete(id: expected[i].id) }
        expected = expected.enumerated().filter { $0.offset % 7 != 0 }.map(\.element)
        try await repository.close()

        let snapshots = fixture.directory.appending(path: "snapshots")
        let files = try FileManager.default.contentsOfDirectory(atPath: snapshots.path).filter { $0.hasSuffix(".snap") }
        #expect(!files.isEmpty, "close writes snapshots")
        let queries = [ActivityQuery(), ActivityQuery(types: [.tummyTime], limit: 10), ActivityQuery(afterDate: epoch.addingTimeInterval(50 * 3_600), sortOrder: .oldestFirst)]
        func results(_ repository: EventSourcedActivityRepository) throws -> [[ActivityModel]] {
            try queries.map { try repository.activities(matching: $0) }
        }
        let withSnapshot = try EventSourcedActivityRepository.open(at: fixture.directory, configuration: .init(log: .init(), snapshots: .never))
        let baseline = try results(withSnapshot)
        #expect(baseline[0] == expected.reversed())
        #expect(withSnapshot.count == expected.count)
        try await withSnapshot.close()

        // Corrupt every snapshot file: the store must notice and replay the log.
        for file in files {
            let url = snapshots.appending(path: file)
            var bytes = try Data(contentsOf: url)
            bytes[bytes.count / 2] ^= 0x5A
            try bytes.write(to: url)
        }
        let corrupted = try EventSourcedActivityRepository.open(at: fixture.directory, configuration: .init(log: .init(), snapshots: .never))
        #expect(try results(corrupted) == baseline)
        try await corrupted.close()

        try FileManager.default.removeItem(at: snapshots)
        let without = try EventSourcedActivityRepository.open(at: fixture.directory, configuration: .init(log: .init(), snapshots: .never))
        #expect(try results(without) == baseline)
        // Writes continue with version checks intact after a replay.
        await #expect(throws: RepositoryError.alreadyExists(.uuid(expected[0].id))) { try await without.add(expected[0]) }
        try await without.close()
    }

    @Test("observe yields the current result, then only changes that alter it", arguments: RepositoryKind.allCases)
    func observe(kind: RepositoryKind) async throws {
        let fixture = try await RepositoryFixture(kind)
        let repository = fixture.repository
        let first = model(0)
        try await repository.add(first)
        let stream = repository.observe(query: ActivityQuery(types: [.sleep], limit: 2))
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next() == [first])

        // A tummy-time activity does not pass the filter: no new result.
        try await repository.add(model(1, .tummyTime))
        let second = model(2)
        try await repository.add(second)
        #expect(await iterator.next() == [second, first], "the next value reflects the sleep, not the tummy time")

        // An older sleep falls outside limit 2: the result does not change, nothing is yielded.
        try await repository.add(model(-5))
        let third = model(3)
        try await repository.add(third)
        #expect(await iterator.next() == [third, second])

        try await repository.delete(id: third.id)
        #expect(await iterator.next() == [second, first])
        if kind != .inMemory { try await repository.close() }
    }

    @Test("an observer that stops is removed; many observers each see the change")
    func observerLifecycle() async throws {
        let repository = InMemoryActivityRepository()
        let streams = (0..<20).map { _ in repository.observe(query: ActivityQuery()) }
        var iterators = streams.map { $0.makeAsyncIterator() }
        for i in iterators.indices { #expect(await iterators[i].next() == []) }
        let m = model(0)
        try await repository.add(m)
        for i in iterators.indices { #expect(await iterators[i].next() == [m]) }
        // Consumers that stop release their observation.
        let consumer = Task {
            for await _ in repository.observe(query: ActivityQuery()) { break }
        }
        await consumer.value
    }

    @Test("time travel and entity history match a reference", arguments: [RepositoryKind.durable, .postgres])
    func timeTravel(kind: RepositoryKind) async throws {
        let fixture = try await RepositoryFixture(kind, configuration: .init(log: .init(durability: .buffered)))
        let repository = fixture.repository
        var reference = BruteForceActivityStore()
        var checkpoints: [(date: Date, position: LogPosition, state: [ActivityModel])] = []
        let tracked = model(0)
        for round in 0..<6 {
            for i in 0..<10 {
                let m = model(Double(round * 10 + i + 1))
                try await repository.add(m)
                _ = reference.insert(m)
            }
            switch round {
            case 0: try await repository.add(tracked); _ = reference.insert(tracked)
            case 1: var u = tracked; u.type = .tummyTime; try await repository.update(u); _ = reference.update(u)
            case 2: try await repository.end(id: tracked.id, at: tracked.startDate.addingTimeInterval(3_600)); _ = reference.end(tracked.id, tracked.startDate.addingTimeInterval(3_600))
            case 4: try await repository.delete(id: tracked.id); _ = reference.remove(tracked.id)
            default: break
            }
            try await Task.sleep(for: .milliseconds(5))
            checkpoints.append((Date(), repository.store.nextPosition - 1, reference.sorted(reference.items, .oldestFirst)))
            try await Task.sleep(for: .milliseconds(5))
            if round == 2 { try await repository.store.writeSnapshots() }
        }
        for checkpoint in checkpoints {
            #expect(try repository.activities(throughPosition: checkpoint.position).all(sortedBy: .oldestFirst) == checkpoint.state)
            #expect(try repository.activities(asOf: checkpoint.date).all(sortedBy: .oldestFirst) == checkpoint.state)
        }
        #expect(try repository.activities(asOf: epoch.addingTimeInterval(-1e9)).isEmpty)

        let history = try repository.history(of: tracked.id)
        #expect(history.map(\.entityVersion) == [1, 2, 3, 4])
        guard history.count == 4 else { return }
        #expect(history[0].event == .added(tracked))
        if case .updated(let u) = history[1].event { #expect(u.type == .tummyTime) } else { Issue.record("second event is not an update") }
        #expect(history[2].event == .ended(id: tracked.id, at: tracked.startDate.addingTimeInterval(3_600)))
        #expect(history[3].event == .deleted(id: tracked.id))
        #expect(history.map(\.position) == history.map(\.position).sorted())
        #expect(history.allSatisfy { $0.recordedAt <= Date() })
        try await repository.close()
    }

    @Test("concurrent adds of one id: exactly one succeeds; concurrent distinct writes all land", arguments: [RepositoryKind.durable, .postgres])
    func concurrentWrites(kind: RepositoryKind) async throws {
        let fixture = try await RepositoryFixture(kind)
        let repository = fixture.repository
        let contested = model(0)
        let outcomes = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 { group.addTask { (try? await repository.add(contested)) != nil } }
            var wins = 0
            for await won in group where won { wins += 1 }
            return wins
        }
        #expect(outcomes == 1)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<32 { group.addTask { for i in 0..<10 { try await repository.add(model(Double(t * 100 + i + 1))) } } }
            try await group.waitForAll()
        }
        #expect(repository.count == 321)
        #expect(repository.store.log.bounds.nextPosition == 321)
        try await repository.close()
    }

    @Test("a second durable repository on the same directory is refused while the first is open")
    func locked() async throws {
        let fixture = try await RepositoryFixture(.durable)
        #expect { _ = try EventSourcedActivityRepository.open(at: fixture.directory) } throws: {
            ($0 as? RepositoryError)?.logError?.code == .locked
        }
        let reader = try EventSourcedActivityRepository.openReadOnly(at: fixture.directory)
        try await fixture.repository.add(model(0))
        #expect(try reader.refresh() == 1)
        #expect(reader.count == 1)
        await #expect(throws: (any Error).self) { try await reader.add(model(1)) }
        try await fixture.repository.close()
    }

    @Test("the client forwards to its repository; in-memory and preview factories work")
    func client() async throws {
        let a = model(0)
        let client = try ActivityRepositoryClient.inMemory([a])
        #expect(try await client.fetch(ActivityQuery()) == [a])
        let b = model(1)
        try await client.add(b)
        try await client.end(b.id, b.startDate.addingTimeInterval(10))
        try await client.delete(a.id)
        #expect(try await client.fetch(ActivityQuery()).map(\.id) == [b.id])
        #expect(try await client.fetchRange(ActivityRangeQuery(.startingIn, from: epoch, to: epoch.addingTimeInterval(7_200))).map(\.id) == [b.id])
        #expect(!(try await ActivityRepositoryClient.preview.fetch(ActivityQuery())).isEmpty)
        await #expect(throws: RepositoryUnimplemented.self) { _ = try await ActivityRepositoryClient.unimplemented.fetch(ActivityQuery()) }
        #expect(throws: RepositoryError.alreadyExists(.uuid(a.id))) { _ = try InMemoryActivityRepository(validating: [a, a]) }
    }
}

