import Foundation
import Testing
import EventLog
import EventKernel
import EventKernelTestSupport

// One entity, two shapes: version 2 added a non-optional property.
struct TaskV1: Identifiable, Codable, Sendable, Equatable { var id: UUID; var title: String }
struct TaskV2: Identifiable, Codable, Sendable, Hashable { var id: UUID; var title: String; var priority: Int }

@Suite struct SchemaEvolutionTests {
    static let v2 = EntitySchema<TaskV2>(version: 2)
    static let v2WithUpcaster = EntitySchema<TaskV2>(version: 2)
        .upcasting(from: 1, decoding: TaskV1.self) { TaskV2(id: $0.id, title: $0.title, priority: 3) }

    /// The bytes of every file of a store (to prove a failed open changed nothing).
    static func contents(of directory: URL) throws -> [String: Data] {
        var out: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
        while let url = enumerator?.nextObject() as? URL {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue,
               url.lastPathComponent != "LOCK" {
                out[url.path] = try Data(contentsOf: url)
            }
        }
        return out
    }

    @Test func migrationStory() async throws {
        let temporary = TemporaryDirectory("ek-migrate")
        let dir = temporary.url
        // Version 1 writes 50 tasks and closes (a snapshot of the v1 state is written).
        let tasks = (0..<50).map { TaskV1(id: UUID(), title: "task \($0)") }
        do {
            let store = try EventStore(log: SegmentedLog.open(at: dir), directory: dir)
            let repository = try EventSourcedRepository<TaskV1>(store: store, typeName: "Task")
            try await repository.addAll(Array(tasks[0..<30]))
            for task in tasks[30...] { try await repository.add(task) }
            try await store.close()
        }
        let before = try Self.contents(of: dir)
        #expect(before.keys.contains { $0.contains("snapshots/") }, "a snapshot of the v1 state exists")

        // Version 2 without an upcaster: a clear error naming the event; nothing lost on disk.
        do {
            let store = try EventStore(log: SegmentedLog.open(at: dir), directory: dir)
            #expect {
                _ = try EventSourcedRepository<TaskV2>(store: store, typeName: "Task", schema: Self.v2)
            } throws: { error in
                guard case .undecodableEvent(let failure) = error as? RepositoryError else { return false }
                return failure.position == 0 && failure.eventType == "Task.added" && failure.schemaVersion == 1
                    && failure.projection == "repository:Task" && failure.cause is EntitySchemaError
                    && failure.description.contains("upcaster")
            }
            try await store.close()
        }
        // The same code without bumping the version: the decode failure itself is reported.
        do {
            let store = try EventStore(log: SegmentedLog.open(at: dir), directory: dir)
            #expect {
                _ = try EventSourcedRepository<TaskV2>(store: store, typeName: "Task")
            } throws: { error in
                guard case .undecodableEvent(let failure) = error as? RepositoryError else { return false }
                return failure.position == 0 && failure.cause is DecodingError
            }
            try await store.close()
        }
        let after = try Self.contents(of: dir)
        #expect(after.filter { $0.key.contains("repository") } == before.filter { $0.key.contains("repository") },
                "the repository's snapshot was neither rewritten nor removed")
        #expect(after.filter { $0.key.hasSuffix(".log") } == before.filter { $0.key.hasSuffix(".log") })

        // With the upcaster: every task is back, restored from the v1 snapshot (upcast) ...
        do {
            let store = try EventStore(log: SegmentedLog.open(at: dir), directory: dir)
            let repository = try EventSourcedRepository<TaskV2>(store: store, typeName: "Task", schema: Self.v2WithUpcaster)
            #expect(repository.projection.eventsApplied == 0, "restored from the snapshot, not replayed")
            #expect(Set(repository.fetchAll()) == Set(tasks.map { TaskV2(id: $0.id, title: $0.title, priority: 3) }))
            // New writes are version 2; the history keeps what was written.
            var first = try #require(repository.fetch(id: tasks[0].id))
            first.priority = 1
            try await repository.update(first)
            #expect(try repository.history(of: first.id).map(\.schemaVersion) == [1, 2])
            try await store.close()
        }
        // ... and from the log alone (the upcaster runs on replay too).
        try FileManager.default.removeItem(at: dir.appending(path: "snapshots"))
        do {
            let store = try EventStore(log: SegmentedLog.open(at: dir), directory: dir)
            let repository = try EventSourcedRepository<TaskV2>(store: store, typeName: "Task", schema: Self.v2WithUpcaster)
            #expect(repository.projection.eventsApplied == 51)
            #expect(repository.count == 50)
            #expect(repository.fetch(id: tasks[0].id)?.priority == 1)
            #expect(repository.fetch(id: tasks[1].id)?.priority == 3)
            try await store.close()
        }
        // A build older than the data refuses it too, and says why.
        do {
            let store = try EventStore(log: SegmentedLog.open(at: dir), directory: dir)
            #expect {
                _ = try EventSourcedRepository<TaskV1>(store: store, typeName: "Task")
            } throws: { error in
                guard case .undecodableEvent(let failure) = error as? RepositoryError else { return false }
                return failure.schemaVersion == 2 && "\(failure.cause)".contains("newer than this build")
            }
            try await store.close()
        }
    }

    @Test func aFailedProjectionIsNeverSnapshotted() async throws {
        let temporary = TemporaryDirectory("ek-failed")
        let dir = temporary.url
        struct Refused: Error {}
        // A reducer that cannot fold an event the store committed (a bug in live code).
        let picky = ProjectedState<Int>(name: "picky", schemaVersion: 1, initial: 0) { state, envelope in
            if envelope.payload == [9] { throw Refused() }
            state += 1
        }
        let store = try EventStore(log: InMemoryLog(), directory: dir, projections: [picky], snapshotPolicy: .never)
        let stream = StreamID("Thing", .string("a"))
        for value: UInt8 in [1, 9, 2] {
            try await store.append(PendingEvent(EncodedEvent(eventType: "Thing.changed", schemaVersion: 1, stream: stream, payload: [value])))
        }
        #expect(picky.state == 1, "nothing after the failed event is folded")
        let failure = try #require(picky.failure)
        #expect(failure.position == 1 && failure.cause is Refused)
        try await store.writeSnapshots()
        #expect(SnapshotDirectory(storeDirectory: dir).files(for: "picky").isEmpty)
        #expect(!SnapshotDirectory(storeDirectory: dir).files(for: "$entity-versions").isEmpty)
    }
}
