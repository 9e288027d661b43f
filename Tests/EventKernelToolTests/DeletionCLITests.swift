import Activities
import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// `eventkernel delete` and `eventkernel purge` (issue 27 items 1 and 6), and the read commands
/// on the tombstones they write.
@Suite struct DeletionCLITests {
    private struct Note: Identifiable, Codable, Sendable, Equatable {
        var id: String
        var text: String
    }

    private static let activityIDs = (0..<5).map { UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", $0 + 100))! }

    /// A store with five activities and three notes (n0, n1, n2; n2 deleted by its repository).
    private static func makeStore() async throws -> TemporaryDirectory {
        let directory = TemporaryDirectory("ek-delete-cli")
        let repository = try EventSourcedActivityRepository.open(at: directory.url)
        for (i, id) in activityIDs.enumerated() {
            try await repository.add(ActivityModel(id: id, startDate: Date(timeIntervalSince1970: 1_735_689_600 + Double(i) * 3_600), endDate: nil, type: .sleep))
        }
        let notes = try EventSourcedRepository<Note>(store: repository.store, typeName: "Note")
        for i in 0..<3 { try await notes.add(Note(id: "n\(i)", text: "t\(i)")) }
        try await notes.delete(id: "n2")
        try await repository.close()
        return directory
    }

    /// Runs the tool with `stdin` as its standard input.
    private static func runWithInput(_ arguments: [String], stdin: String) throws -> RunResult {
        let temp = TemporaryDirectory("ekcli-in")
        let input = temp.file("stdin")
        try Data(stdin.utf8).write(to: input)
        return try run(arguments, stdin: input)
    }

    private static func json(_ text: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    private static func openStore(_ directory: TemporaryDirectory) throws -> EventSourcedActivityRepository {
        try EventSourcedActivityRepository.openReadOnly(at: directory.url)
    }

    @Test func deleteActivitiesByArgumentWithJSONAndUnknownIDs() async throws {
        let store = try await Self.makeStore()
        let unknown = UUID(uuidString: "00000000-0000-4000-8000-0000000009AA")!
        let result = try run(["delete", store.url.path, Self.activityIDs[0].uuidString, unknown.uuidString,
                              "--actor", "ops", "--correlation-id", "ticket-7", "--json"])
        #expect(result.status == 1, "an unknown id is exit 1: \(result.stderr)")
        #expect(result.stderr.contains(unknown.uuidString))
        let report = try Self.json(result.stdout)
        #expect(report["event"] as? String == "$deleted")
        let deleted = try #require(report["deleted"] as? [[String: Any]])
        #expect(deleted.count == 1 && deleted[0]["id"] as? String == Self.activityIDs[0].uuidString && deleted[0]["version"] as? Int == 2)
        #expect(report["unknown"] as? [String] == [unknown.uuidString])
        let repository = try Self.openStore(store)
        #expect(repository.activity(id: Self.activityIDs[0]) == nil && repository.count == 4)
        let history = try repository.history(of: Self.activityIDs[0])
        let last = try #require(history.last)
        #expect(last.tombstone == .deleted && last.metadata == EventMetadata(correlationID: "ticket-7", actor: "ops"))
        #expect(last.position == UInt64(try #require(deleted[0]["position"] as? Int)))
        try await repository.close()
        // Deleting it again: nothing to delete, reported unknown, nothing written.
        let again = try run(["delete", "--dir", store.url.path, Self.activityIDs[0].uuidString])
        #expect(again.status == 1 && again.stdout.contains("1 unknown"))
        // Soft: adding it again through the library continues the stream.
        let writer = try EventSourcedActivityRepository.open(at: store.url)
        try await writer.add(ActivityModel(id: Self.activityIDs[0], startDate: Date(timeIntervalSince1970: 0), endDate: nil, type: .sleep))
        #expect(try writer.store.version(of: ActivityEventCodec.stream(of: Self.activityIDs[0])) == 3)
        try await writer.close()
    }

    @Test func purgeRefusesWithoutYesAndWritesNothing() async throws {
        let store = try await Self.makeStore()
        let before = try FileManager.default.contentsOfDirectory(atPath: store.url.path).sorted()
        let result = try run(["purge", store.url.path, Self.activityIDs[1].uuidString])
        #expect(result.status == 1)
        #expect(result.stderr.contains("--yes"))
        let repository = try Self.openStore(store)
        #expect(repository.activity(id: Self.activityIDs[1]) != nil && repository.store.purgedStreamCount == 0)
        try await repository.close()
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.url.path).sorted() == before)
    }

    @Test func purgeFromAFileAndStandardInputThenReAddFailsEverywhere() async throws {
        let store = try await Self.makeStore()
        let list = store.file("ids.txt")
        try Data("\(Self.activityIDs[1].uuidString)\n\n  \(Self.activityIDs[2].uuidString)\r\n".utf8).write(to: list)
        let fromFile = try run(["purge", "--dir", store.url.path, "--ids", list.path, "--yes", "--json"])
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        let report = try Self.json(fromFile.stdout)
        #expect((report["purged"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [Self.activityIDs[1].uuidString, Self.activityIDs[2].uuidString])
        // Standard input, with one purged already and one new.
        let fromStdin = try Self.runWithInput(["purge", store.url.path, "--ids", "-", "--yes", "--json"],
                                     stdin: "\(Self.activityIDs[2].uuidString)\n\(Self.activityIDs[3].uuidString)\n")
        #expect(fromStdin.status == 0, "already purged is not unknown: \(fromStdin.stderr)")
        let second = try Self.json(fromStdin.stdout)
        #expect(second["alreadyPurged"] as? [String] == [Self.activityIDs[2].uuidString])
        #expect((second["purged"] as? [[String: Any]])?.count == 1)
        // inspect counts them.
        let inspect = try run(["inspect", store.url.path, "--json"])
        #expect(try Self.json(inspect.stdout)["purgedStreams"] as? Int == 3)
        // Re-adding a purged id fails through import (checked before anything is written).
        let line = "{\"event\":\"added\",\"activity\":{\"id\":\"\(Self.activityIDs[1].uuidString)\",\"startDate\":\"2025-01-01T00:00:00Z\",\"endDate\":null,\"type\":\"sleep\"}}"
        let input = store.file("re-add.jsonl")
        try Data((line + "\n").utf8).write(to: input)
        let reimport = try run(["import", store.url.path, input.path])
        #expect(reimport.status == 1 && reimport.stderr.contains("purged"), "\(reimport.stderr)")
        // ... and through the library, after the reopen.
        let writer = try EventSourcedActivityRepository.open(at: store.url)
        await #expect(throws: RepositoryError.streamPurged(ActivityEventCodec.stream(of: Self.activityIDs[3]))) {
            try await writer.add(ActivityModel(id: Self.activityIDs[3], startDate: Date(timeIntervalSince1970: 0), endDate: nil, type: .sleep))
        }
        try await writer.close()
    }

    @Test func otherEntityTypesWithType() async throws {
        let store = try await Self.makeStore()
        // A type's ids are not UUIDs: without --type they are refused before anything is written.
        let notUUID = try run(["delete", store.url.path, "n0"])
        #expect(notUUID.status == 1 && notUUID.stderr.contains("not a UUID"))
        // n2 was deleted by its repository: a soft delete finds no live entity.
        let deleted = try run(["delete", store.url.path, "n0", "n2", "--type", "Note", "--json"])
        #expect(deleted.status == 1)
        let report = try Self.json(deleted.stdout)
        #expect((report["deleted"] as? [[String: Any]])?.first?["id"] as? String == "n0")
        #expect(report["unknown"] as? [String] == ["n2"])
        // A misspelt type: every id unknown, and the store's types said (a newcomer's probe).
        let misspelt = try run(["delete", store.url.path, "n0", "--type", "Nots"])
        #expect(misspelt.status == 1 && misspelt.stderr.contains("the store holds no events of type \"Nots\"; its entity types: ") && misspelt.stderr.contains("\"Note\""), "\(misspelt.stderr)")
        // A purge releases a soft-deleted entity's history.
        let purged = try run(["purge", store.url.path, "n2", "n1", "nobody", "--type", "Note", "--yes", "--json"])
        #expect(purged.status == 1)
        let purgeReport = try Self.json(purged.stdout)
        #expect((purgeReport["purged"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["n2", "n1"])
        #expect(purgeReport["unknown"] as? [String] == ["nobody"])
        // The repository of the type sees them gone and cannot revive the purged ones.
        let repository = try EventSourcedActivityRepository.open(at: store.url)
        let notes = try EventSourcedRepository<Note>(store: repository.store, typeName: "Note")
        #expect(notes.fetchAll().isEmpty)
        await #expect(throws: RepositoryError.streamPurged(StreamID("Note", .string("n1")))) { try await notes.add(Note(id: "n1", text: "x")) }
        try await notes.add(Note(id: "n0", text: "back"))
        #expect(notes.version(of: "n0") == 3)
        try await repository.close()
        // history and streams show the tombstones.
        let history = try run(["history", store.url.path, "Note", "n1", "--format", "jsonl"])
        #expect(history.status == 0 && history.stdout.contains("\"event\":\"$purged\""), "\(history.stdout)\(history.stderr)")
    }

    @Test func readCommandsShowTombstonesAndExportImportRoundTripsAPurge() async throws {
        let store = try await Self.makeStore()
        let purged = Self.activityIDs[4]
        #expect(try run(["delete", store.url.path, purged.uuidString]).status == 0)
        #expect(try run(["purge", store.url.path, purged.uuidString, "--yes"]).status == 0)
        let history = try run(["history", store.url.path, purged.uuidString, "--format", "jsonl"])
        #expect(history.status == 0)
        let events = history.stdout.split(separator: "\n").map(String.init)
        #expect(events.count == 3 && events[1].contains("\"event\":\"$deleted\"") && events[2].contains("\"event\":\"$purged\""), "\(history.stdout)")
        let tail = try run(["tail", store.url.path, "--format", "jsonl"])
        #expect(tail.stdout.contains("\"event\":\"$purged\""), "\(tail.stdout)\(tail.stderr)")
        #expect(try run(["verify", store.url.path]).status == 0)
        let streams = try run(["streams", store.url.path, "activity", "--format", "jsonl"])
        #expect(streams.status == 0 && streams.stdout.contains("$purged"), "\(streams.stdout)\(streams.stderr)")
        // export → import: the copy has the same tombstones, the purge included.
        let export = try run(["export", store.url.path])
        #expect(export.status == 0 && export.stdout.contains("\"event\":\"$purged\""))
        let copy = TemporaryDirectory("ek-delete-cli-copy")
        let file = copy.file("events.jsonl")
        try Data(export.stdout.utf8).write(to: file)
        let imported = try run(["import", copy.file("store").path, file.path])
        #expect(imported.status == 0, "\(imported.stderr)")
        let repository = try EventSourcedActivityRepository.openReadOnly(at: copy.file("store"))
        #expect(repository.store.isPurged(ActivityEventCodec.stream(of: purged)))
        #expect(try repository.history(of: purged).map(\.tombstone) == [nil, .deleted, .purged])
        #expect(repository.count == 4)
        try await repository.close()
    }
}
