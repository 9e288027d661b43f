import Foundation
import Testing
import EventLog
import EventKernel
import EventKernelTestSupport

/// A repository's projection keeps its streams' versions (the store does not keep them a second
/// time): versions must be exactly the log's, whatever the path to them (live commits, a
/// snapshot, a full replay, a store opened before its repository registered).
@Suite struct VersionSourceTests {
    private struct Note: Identifiable, Codable, Sendable, Equatable {
        var id: String
        var text: String
    }

    /// Each stream's last version in the log: the reference every path must agree with.
    private static func versionsInLog(_ store: EventStore, type: String) throws -> [StreamID: UInt64] {
        var versions: [StreamID: UInt64] = [:]
        try store.forEachEnvelope(from: 0, through: nil) { envelope in
            if envelope.stream.entityType == type { versions[envelope.stream] = envelope.entityVersion }
            return true
        }
        return versions
    }

    /// Adds, updates, deletes and re-adds notes so that every kind of version history exists:
    /// live (1, 2, 5 events), deleted (2, 3 events), deleted and added again (4 events).
    private static func writeHistory(_ notes: EventSourcedRepository<Note>) async throws {
        for i in 0..<30 { try await notes.add(Note(id: "n\(i)", text: "first")) }
        for i in 0..<30 where i % 2 == 0 { try await notes.update(Note(id: "n\(i)", text: "second")) }
        for i in 0..<30 where i % 5 == 0 { try await notes.save(Note(id: "n\(i)", text: "third")) }
        for i in 0..<30 where i % 3 == 0 { try await notes.delete(id: "n\(i)") }
        for i in 0..<30 where i % 9 == 0 { try await notes.add(Note(id: "n\(i)", text: "again")) }
    }

    private static func check(_ notes: EventSourcedRepository<Note>, _ store: EventStore, against reference: [StreamID: UInt64]) throws {
        #expect(reference.count == 30)
        for (stream, version) in reference {
            guard case .string(let id) = stream.entityID else { Issue.record("unexpected id \(stream)"); continue }
            #expect(notes.version(of: id) == version, "\(stream) through the repository")
            #expect(try store.version(of: stream) == version, "\(stream) through the store")
        }
        #expect(notes.version(of: "never") == 0)
    }

    @Test func versionsSurviveDeleteReAddSnapshotsAndReplays() async throws {
        let directory = TemporaryDirectory("ek-versions")
        var reference: [StreamID: UInt64] = [:]
        do {
            let store = try EventStore.open(at: directory.url, log: .init(durability: .buffered))
            let notes = try EventSourcedRepository<Note>(store: store, typeName: "Note")
            try await Self.writeHistory(notes)
            reference = try Self.versionsInLog(store, type: "Note")
            try Self.check(notes, store, against: reference)
            // A deleted note's stream continues: a re-add expects its deletion's version.
            #expect(notes.version(of: "n3") == 2 && notes.fetch(id: "n3") == nil)
            #expect(notes.version(of: "n0") == 5 && notes.fetch(id: "n0")?.text == "again")
            try await store.close()  // writes snapshots
        }
        // From the snapshots.
        do {
            let store = try EventStore.open(at: directory.url)
            let notes = try EventSourcedRepository<Note>(store: store, typeName: "Note")
            #expect(notes.projection.eventsApplied == 0, "restored from its snapshot, not replayed")
            try Self.check(notes, store, against: reference)
            // Writes continue each stream where it was.
            try await notes.add(Note(id: "n3", text: "back"))
            #expect(notes.version(of: "n3") == 3)
            await #expect(throws: RepositoryError.self) { try await notes.update(Note(id: "n3", text: "x"), expectedVersion: 2) }
            try await notes.update(Note(id: "n3", text: "x"), expectedVersion: 3)
            reference = try Self.versionsInLog(store, type: "Note")
            try await store.close()
        }
        // From the log alone.
        try FileManager.default.removeItem(at: directory.file("snapshots"))
        let store = try EventStore.open(at: directory.url, snapshotPolicy: .never)
        let notes = try EventSourcedRepository<Note>(store: store, typeName: "Note")
        #expect(notes.projection.eventsApplied > 0)
        try Self.check(notes, store, against: reference)
        try await store.close()
    }

    /// The version snapshot leaves out the streams a repository keeps; a process that opens the
    /// store and writes those streams before creating the repository must still get the log's
    /// versions (read from the log), and the repository created afterwards agrees.
    @Test func streamsOfARepositoryNotYetRegisteredAreReadFromTheLog() async throws {
        let directory = TemporaryDirectory("ek-versions-await")
        do {
            let store = try EventStore.open(at: directory.url, log: .init(durability: .buffered))
            let notes = try EventSourcedRepository<Note>(store: store, typeName: "Note")
            try await Self.writeHistory(notes)
            try await store.close()
        }
        let store = try EventStore.open(at: directory.url)
        let reference = try Self.versionsInLog(store, type: "Note")
        let stream = StreamID("Note", .string("n4"))
        #expect(try store.version(of: stream) == reference[stream])
        #expect(try store.version(of: StreamID("Note", .string("never"))) == 0)
        // An append that expects the log's version succeeds; one that expects anything else conflicts.
        let updated = EncodedEvent(eventType: "Note.updated", schemaVersion: 1, stream: stream,
                                   payload: try BinaryEntityEncoder().encode(Note(id: "n4", text: "raw")))
        await #expect(throws: RepositoryError.self) {
            try await store.append(PendingEvent(updated, expectedVersion: reference[stream]! - 1))
        }
        let written = try await store.append(PendingEvent(updated, expectedVersion: reference[stream]!))
        #expect(written.entityVersion == reference[stream]! + 1)
        // The repository, created now, keeps the versions from here on.
        let notes = try EventSourcedRepository<Note>(store: store, typeName: "Note")
        try Self.check(notes, store, against: try Self.versionsInLog(store, type: "Note"))
        #expect(notes.fetch(id: "n4")?.text == "raw")
        try await notes.update(Note(id: "n4", text: "through the repository"), expectedVersion: reference[stream]! + 1)
        try await store.close()
    }

    /// Commands that read before a concurrent commit must not take the fast path: every
    /// increment of one counter from many tasks lands, on the store and after a reopen.
    @Test func concurrentIncrementsAllLandThroughSources() async throws {
        struct Tally: Identifiable, Codable, Sendable { var id: UUID; var count: Int }
        let directory = TemporaryDirectory("ek-versions-race")
        let id = UUID()
        let rounds = testScale.pick(400, small: 60)
        do {
            let store = try EventStore.open(at: directory.url)
            let tallies = try EventSourcedRepository<Tally>(store: store, typeName: "Tally")
            try await tallies.add(Tally(id: id, count: 0))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        var done = 0
                        while done < rounds / 8 {
                            do {
                                try await store.execute { command in
                                    guard var tally = try command.read(tallies.stream(of: id), { tallies.fetch(id: id) }) else { return }
                                    tally.count += 1
                                    try tallies.update(tally, in: &command)
                                }
                                done += 1
                            } catch RepositoryError.conflict {
                                // Every attempt lost to the other writers (possible under
                                // sustained contention): nothing was written; try again.
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(tallies.fetch(id: id)?.count == rounds / 8 * 8)
            #expect(tallies.version(of: id) == UInt64(rounds / 8 * 8 + 1))
            try await store.close()
        }
        let store = try EventStore.open(at: directory.url)
        let tallies = try EventSourcedRepository<Tally>(store: store, typeName: "Tally")
        #expect(tallies.fetch(id: id)?.count == rounds / 8 * 8)
        #expect(try store.version(of: tallies.stream(of: id)) == UInt64(rounds / 8 * 8 + 1))
        try await store.close()
    }
}
