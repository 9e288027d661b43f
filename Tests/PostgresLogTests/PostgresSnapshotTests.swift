#if PostgreSQL
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

@Suite("A PostgreSQL instance's local snapshots")
struct PostgresSnapshotTests {
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
#endif
