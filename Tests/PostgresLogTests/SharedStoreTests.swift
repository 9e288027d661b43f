import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import PostgresLog
import Testing

struct Item: Identifiable, Codable, Sendable, Equatable {
    var id: Int
    var name: String
    var count: Int
}

/// One service instance: a store over the shared log, and a repository of items.
struct Instance {
    let store: EventStore
    let items: EventSourcedRepository<Item>

    static func open(_ configuration: PostgresLog.Configuration, snapshotsIn directory: URL? = nil,
                     snapshotPolicy: SnapshotPolicy = .never) async throws -> Instance {
        let store = try await EventStore.open(postgres: configuration, snapshotsIn: directory, snapshotPolicy: snapshotPolicy)
        return Instance(store: store, items: try EventSourcedRepository<Item>(store: store, typeName: "Item", indexes: [.on(\.name)]))
    }

    func close() async throws { try await store.close() }
}

/// Waits until `condition` holds (checked every 5 ms), for at most 10 s.
func eventually(_ condition: () throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + .seconds(10)
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        try await Task.sleep(for: .milliseconds(5))
    }
    return try condition()
}

@Suite("Stores sharing a PostgreSQL log")
struct SharedStoreTests {
    @Test("observe on one instance sees a commit made on another")
    func observeAcrossInstances() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let a = try await Instance.open(configuration)
        let b = try await Instance.open(configuration)
        var results = try b.items.observe(EntityQuery<Item>().where(\.name, equals: "watched")).makeAsyncIterator()
        #expect(await results.next() == [])
        try await a.items.add(Item(id: 1, name: "watched", count: 0))
        try await a.items.add(Item(id: 2, name: "other", count: 0))
        #expect(await results.next() == [Item(id: 1, name: "watched", count: 0)])
        #expect(b.items.fetch(id: 1) == Item(id: 1, name: "watched", count: 0))
        #expect(try await eventually { b.store.nextPosition == 2 })
        try await a.close()
        try await b.close()
    }

    @Test("concurrent adds of one id on two instances: exactly one wins, the other sees alreadyExists")
    func concurrentAddsAcrossInstances() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let instances = [try await Instance.open(configuration), try await Instance.open(configuration)]
        let trials = testScale.pick(200, small: 40)
        for trial in 0..<trials {
            let outcomes = await withTaskGroup(of: Result<Void, any Error>.self) { group in
                for (writer, instance) in instances.enumerated() {
                    group.addTask {
                        do {
                            try await instance.items.add(Item(id: trial, name: "w\(writer)", count: writer))
                            return .success(())
                        } catch { return .failure(error) }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let wins = outcomes.filter { if case .success = $0 { true } else { false } }.count
            #expect(wins == 1, "trial \(trial): \(outcomes)")
            for case .failure(let error) in outcomes {
                #expect(error as? RepositoryError == .alreadyExists(.string("\(trial)")), "trial \(trial)")
            }
        }
        // Both instances hold the same items, each at version 1.
        for instance in instances { #expect(try await eventually { instance.store.nextPosition == UInt64(trials) }) }
        #expect(try instances[0].items.fetch(EntityQuery()) == instances[1].items.fetch(EntityQuery()))
        for instance in instances { try await instance.close() }
    }

    @Test("a command on an instance that has not yet seen another's change conflicts, catches up and decides again")
    func staleInstanceCatchesUp() async throws {
        var configuration = try PostgresTestDatabase.configuration()
        defer { Task { [configuration] in await PostgresTestDatabase.drop(configuration) } }
        let a = try await Instance.open(configuration)
        // b learns of a's commits only when it asks: no notifications, no polls in the test's time.
        configuration.listensForNotifications = false
        configuration.pollInterval = .seconds(3_600)
        let b = try await Instance.open(configuration)
        try await a.items.add(Item(id: 7, name: "seven", count: 1))
        #expect(try b.store.refresh() == 1)
        try await a.items.update(Item(id: 7, name: "seven", count: 2))
        #expect(b.items.version(of: 7) == 1)
        // b's update expects version 1; the log holds 2: refused, b catches up, decides again.
        try await b.store.execute { command in
            guard var item = command.read(b.items.stream(of: 7), { b.items.fetch(id: 7) }) else { throw RepositoryError.notFound(.string("7")) }
            item.count += 10
            try b.items.update(item, in: &command)
        }
        #expect(b.items.fetch(id: 7)?.count == 12)
        #expect(b.items.version(of: 7) == 3)
        #expect(try await eventually { a.items.fetch(id: 7)?.count == 12 })
        // An explicit expected version that no longer holds is the caller's conflict, not retried.
        await #expect(throws: RepositoryError.conflict(stream: StreamID("Item", .string("7")), expected: 2, actual: 3)) {
            try await a.items.update(Item(id: 7, name: "seven", count: 0), expectedVersion: 2)
        }
        try await a.close()
        try await b.close()
    }

    @Test("appends interleaved from two instances fold into identical projections, in position order")
    func interleavedAppendsFoldIdentically() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let a = try await Instance.open(configuration)
        let b = try await Instance.open(configuration)
        let perInstance = testScale.pick(400, small: 100)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, instance) in [a, b].enumerated() {
                for writer in 0..<8 {
                    group.addTask {
                        for i in stride(from: writer, to: perInstance, by: 8) {
                            try await instance.items.add(Item(id: index * 100_000 + i, name: "n\(i % 5)", count: i))
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let total = UInt64(2 * perInstance)
        #expect(try await eventually { a.store.nextPosition == total && b.store.nextPosition == total })
        #expect(try a.items.fetch(EntityQuery()) == b.items.fetch(EntityQuery()))
        #expect(try a.items.fetch(EntityQuery().where(\.name, equals: "n3")) == b.items.fetch(EntityQuery().where(\.name, equals: "n3")))
        #expect(try a.store.read().map(\.position) == Array(0..<total))
        try await a.close()
        try await b.close()
    }

    @Test("snapshots stay local: a restarted instance replays only the tail from the server")
    func snapshotsStayLocal() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let directory = TemporaryDirectory("pg-snapshots")
        let a = try await Instance.open(configuration, snapshotsIn: directory.url)
        for i in 0..<50 { try await a.items.add(Item(id: i, name: "x", count: i)) }
        try await a.store.writeSnapshots()
        for i in 50..<60 { try await a.items.add(Item(id: i, name: "y", count: i)) }
        try await a.close()
        // Positions 0...48 vanish from the server: a store that replayed more than the tail
        // after its snapshot (and its anchor record, position 49) would fail.
        _ = try await sql(configuration, #"DELETE FROM "\#(configuration.schema)".events WHERE position < 49 RETURNING 1"#, as: Int32.self)
        let store = try await EventStore.open(postgres: configuration, snapshotsIn: directory.url, snapshotPolicy: .never)
        let items = try EventSourcedRepository<Item>(store: store, typeName: "Item", indexes: [.on(\.name)])
        #expect(try items.fetch(EntityQuery()).count == 60)
        #expect(items.fetch(id: 55) == Item(id: 55, name: "y", count: 55))
        // A projection with no snapshot replays from position 0, which is gone: an error that
        // names the position, never a silent gap.
        let folded = ProjectedState<Int>(name: "folded", schemaVersion: 1, initial: 0) { count, _ in count += 1 }
        #expect { try store.register(folded) } throws: { error in
            (error as? RepositoryError)?.logError?.code == .corruption && (error as? RepositoryError)?.logError?.position == 0
        }
        try await store.close()
    }
}
