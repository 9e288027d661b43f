import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import Testing

/// The entity the multi-instance suites write.
struct SharedItem: Identifiable, Codable, Sendable, Equatable {
    var id: Int
    var name: String
    var count: Int
}

/// The item repository of an instance (a store over the shared log).
func sharedItems(_ store: EventStore) throws -> EventSourcedRepository<SharedItem> {
    try EventSourcedRepository<SharedItem>(store: store, typeName: "Item", indexes: [.on(\.name)])
}

/// Several instances (stores) on one shared log: one suite body for a log shared in memory
/// and for the PostgreSQL log (`SharedBackend`).
@Suite("Stores sharing a log")
struct SharedLogStoreTests {
    @Test("observe on one instance sees a commit made on another", arguments: SharedBackend.allCases)
    func observeAcrossInstances(backend: SharedBackend) async throws {
        try await backend.withInstances([true, true]) { stores in
            let a = try sharedItems(stores[0]), b = try sharedItems(stores[1])
            var results = try b.observe(EntityQuery<SharedItem>().where(\.name, equals: "watched")).makeAsyncIterator()
            #expect(await results.next() == [])
            try await a.add(SharedItem(id: 1, name: "watched", count: 0))
            try await a.add(SharedItem(id: 2, name: "other", count: 0))
            #expect(await results.next() == [SharedItem(id: 1, name: "watched", count: 0)])
            #expect(b.fetch(id: 1) == SharedItem(id: 1, name: "watched", count: 0))
            #expect(try await eventually { stores[1].nextPosition == 2 })
        }
    }

    @Test("concurrent adds of one id on two instances: exactly one wins, the other sees alreadyExists", arguments: SharedBackend.allCases)
    func concurrentAddsAcrossInstances(backend: SharedBackend) async throws {
        try await backend.withInstances([true, true]) { stores in
            let repositories = try stores.map(sharedItems)
            let trials = testScale.pick(200, small: 40)
            for trial in 0..<trials {
                let outcomes = await withTaskGroup(of: Result<Void, any Error>.self) { group in
                    for (writer, items) in repositories.enumerated() {
                        group.addTask {
                            do {
                                try await items.add(SharedItem(id: trial, name: "w\(writer)", count: writer))
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
            for store in stores { #expect(try await eventually { store.nextPosition == UInt64(trials) }) }
            #expect(try repositories[0].fetch(EntityQuery()) == repositories[1].fetch(EntityQuery()))
        }
    }

    @Test("a command on an instance that has not yet seen another's change conflicts, catches up and decides again", arguments: SharedBackend.allCases)
    func staleInstanceCatchesUp(backend: SharedBackend) async throws {
        // b learns of a's commits only when it asks.
        try await backend.withInstances([true, false]) { stores in
            let a = try sharedItems(stores[0]), b = try sharedItems(stores[1])
            try await a.add(SharedItem(id: 7, name: "seven", count: 1))
            #expect(try stores[1].refresh() == 1)
            try await a.update(SharedItem(id: 7, name: "seven", count: 2))
            #expect(b.version(of: 7) == 1)
            // b's update expects version 1; the log holds 2: refused, b catches up, decides again.
            try await stores[1].execute { command in
                guard var item = try command.read(b.stream(of: 7), { b.fetch(id: 7) }) else { throw RepositoryError.notFound(.string("7")) }
                item.count += 10
                try b.update(item, in: &command)
            }
            #expect(b.fetch(id: 7)?.count == 12)
            #expect(b.version(of: 7) == 3)
            #expect(try await eventually { a.fetch(id: 7)?.count == 12 })
            // An explicit expected version that no longer holds is the caller's conflict, not retried.
            await #expect(throws: RepositoryError.conflict(stream: StreamID("Item", .string("7")), expected: 2, actual: 3)) {
                try await a.update(SharedItem(id: 7, name: "seven", count: 0), expectedVersion: 2)
            }
        }
    }

    @Test("appends interleaved from two instances fold into identical projections, in position order", arguments: SharedBackend.allCases)
    func interleavedAppendsFoldIdentically(backend: SharedBackend) async throws {
        try await backend.withInstances([true, true]) { stores in
            let repositories = try stores.map(sharedItems)
            let perInstance = testScale.pick(400, small: 100)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, items) in repositories.enumerated() {
                    for writer in 0..<8 {
                        group.addTask {
                            for i in stride(from: writer, to: perInstance, by: 8) {
                                try await items.add(SharedItem(id: index * 100_000 + i, name: "n\(i % 5)", count: i))
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            let total = UInt64(2 * perInstance)
            #expect(try await eventually { stores.allSatisfy { $0.nextPosition == total } })
            #expect(try repositories[0].fetch(EntityQuery()) == repositories[1].fetch(EntityQuery()))
            #expect(try repositories[0].fetch(EntityQuery().where(\.name, equals: "n3")) == repositories[1].fetch(EntityQuery().where(\.name, equals: "n3")))
            #expect(try stores[0].read().map(\.position) == Array(0..<total))
            // Each instance's subscribers saw every event once, in order (the subscription of
            // a store that folded both its own and the other's commits).
            var seen: [LogPosition] = []
            for try await envelope in stores[1].subscribe(from: 0) {
                seen.append(envelope.position)
                if seen.count == Int(total) { break }
            }
            #expect(seen == Array(0..<total))
        }
    }
}
