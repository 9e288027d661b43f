import Foundation
import Testing
import EventLog
import EventKernel
import EventKernelTestSupport

/// Stream deletion (issue 27 item 1): soft deletes and purges as the kernel's tombstone events,
/// on the store and the generic repository. A purged stream is refused for good, whatever the
/// path to the store's state (live, a snapshot, a full replay).
@Suite struct StreamDeletionTests {
    private struct Note: Identifiable, Codable, Sendable, Equatable {
        var id: String
        var text: String
        var rank: Int = 0
    }

    private static let who = EventMetadata(correlationID: "ticket-42", actor: "alice")

    private static func notes(_ store: EventStore) throws -> EventSourcedRepository<Note> {
        try EventSourcedRepository<Note>(store: store, typeName: "Note", indexes: [.on(\.rank)])
    }

    private static func expectPurged(_ stream: StreamID, _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) async {
        do {
            try await body()
            Issue.record("\(stream): the write was accepted", sourceLocation: sourceLocation)
        } catch let error as RepositoryError {
            #expect(error == .streamPurged(stream), sourceLocation: sourceLocation)
            #expect(error.description.contains("\(stream)"), sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(stream): \(error)", sourceLocation: sourceLocation)
        }
    }

    /// Every way of writing to a purged note's stream is refused, naming it.
    private static func expectEveryWriteRefused(_ notes: EventSourcedRepository<Note>, _ store: EventStore, id: String) async throws {
        let stream = StreamID("Note", .string(id))
        #expect(store.isPurged(stream))
        await expectPurged(stream) { try await notes.add(Note(id: id, text: "revived")) }
        await expectPurged(stream) { try await notes.save(Note(id: id, text: "revived")) }
        await expectPurged(stream) { try await notes.addAll([Note(id: "fresh-\(UUID())", text: "ok"), Note(id: id, text: "revived")]) }
        await expectPurged(stream) {
            try await store.append(PendingEvent(EncodedEvent(eventType: "Note.added", schemaVersion: 1, stream: stream, payload: [])))
        }
        #expect(try await store.purge(stream: stream) == .alreadyPurged)
        #expect(try await store.delete(stream: stream) == .alreadyPurged)
        #expect(try await notes.purge(id: id) == .alreadyPurged)
        #expect(notes.fetch(id: id) == nil)
    }

    @Test func softDeleteFromTheStoreWritesATombstoneAndReAddContinuesTheStream() async throws {
        let store = try EventStore(log: InMemoryLog())
        let notes = try Self.notes(store)
        try await notes.add(Note(id: "a", text: "one"))
        try await notes.update(Note(id: "a", text: "two"))
        let stream = StreamID("Note", .string("a"))
        let deletion = try await store.delete(stream: stream, metadata: Self.who)
        guard case .written(let tombstone) = deletion else { Issue.record("not written: \(deletion)"); return }
        #expect(tombstone.eventType == "$deleted" && tombstone.entityVersion == 3 && tombstone.payload.isEmpty)
        #expect(tombstone.metadata == Self.who)
        #expect(tombstone.schemaVersion == Tombstone.schemaVersion)
        #expect(notes.fetch(id: "a") == nil)
        #expect(notes.fetchAll().isEmpty)
        // The entity is gone: a second delete writes nothing (the repository says so).
        #expect(try await store.delete(stream: stream) == .absent)
        #expect(try await notes.delete(id: "a") == false)
        // Not purged: re-adding continues the stream.
        #expect(!store.isPurged(stream))
        try await notes.add(Note(id: "a", text: "back"))
        #expect(notes.version(of: "a") == 4)
        #expect(try notes.history(of: "a").map(\.eventType) == ["Note.added", "Note.updated", "$deleted", "Note.added"])
        // An unknown stream: nothing written.
        #expect(try await store.delete(stream: StreamID("Note", .string("never"))) == .absent)
        #expect(try store.history(of: StreamID("Note", .string("never"))).isEmpty)
        // The repository's own delete is unchanged: it writes its own event.
        try await notes.delete(id: "a")
        #expect(try notes.history(of: "a").last?.eventType == "Note.deleted")
    }

    @Test func softDeleteOfAStreamNoRepositoryKeeps() async throws {
        let store = try EventStore(log: InMemoryLog())
        let stream = StreamID("Raw", .string("r7"))
        try await store.append(PendingEvent(EncodedEvent(eventType: "Raw.happened", schemaVersion: 1, stream: stream, payload: [1])))
        #expect(try await store.delete(stream: stream).envelope?.entityVersion == 2)
        // Continues: not purged.
        try await store.append(PendingEvent(EncodedEvent(eventType: "Raw.happened", schemaVersion: 1, stream: stream, payload: [2]), expectedVersion: 2))
        #expect(try store.version(of: stream) == 3)
    }

    @Test func purgeRefusesEveryLaterWriteLiveAfterSnapshotReopenAndFullReplay() async throws {
        let directory = TemporaryDirectory("ek-purge")
        let purgedPosition: LogPosition
        do {
            let store = try EventStore.open(at: directory.url, log: .init(durability: .buffered))
            let notes = try Self.notes(store)
            for i in 0..<10 { try await notes.add(Note(id: "n\(i)", text: "t", rank: i)) }
            try await notes.delete(id: "n2")
            // A live entity, a soft-deleted one (releasing its history), an unknown id.
            #expect(try await notes.purge(id: "n1", metadata: Self.who).envelope?.metadata == Self.who)
            #expect(try await notes.purge(id: "n2").envelope != nil)
            #expect(try await notes.purge(id: "never") == .absent)
            // Nothing marked for an unknown id: it can be added.
            try await notes.add(Note(id: "never", text: "fine"))
            let history = try notes.history(of: "n1")
            #expect(history.map(\.eventType) == ["Note.added", "$purged"])
            #expect(history.last?.metadata == Self.who && history.last?.entityVersion == 2)
            purgedPosition = history.last!.position
            #expect(store.purgedStreams == [StreamID("Note", .string("n1")): purgedPosition,
                                           StreamID("Note", .string("n2")): try notes.history(of: "n2").last!.position])
            #expect(store.purgedStreamCount == 2)
            #expect(notes.count == 9)
            #expect(try notes.fetch(EntityQuery<Note>().where(\.rank, equals: 1)).isEmpty)
            try await Self.expectEveryWriteRefused(notes, store, id: "n1")
            try await Self.expectEveryWriteRefused(notes, store, id: "n2")
            try await store.writeSnapshots()
            try await store.close()
        }
        // From the snapshots.
        do {
            let store = try EventStore.open(at: directory.url)
            let notes = try Self.notes(store)
            #expect(notes.projection.eventsApplied == 0, "restored from its snapshot")
            #expect(store.purgedStreams[StreamID("Note", .string("n1"))] == purgedPosition)
            try await Self.expectEveryWriteRefused(notes, store, id: "n1")
            try await store.close()
        }
        // Before the repository registers (its type's versions await their source).
        do {
            let store = try EventStore.open(at: directory.url, snapshotPolicy: .never)
            await Self.expectPurged(StreamID("Note", .string("n2"))) {
                try await store.append(PendingEvent(EncodedEvent(eventType: "Note.added", schemaVersion: 1, stream: StreamID("Note", .string("n2")), payload: [])))
            }
            try await store.close()
        }
        // From the log alone: a full replay never revives them.
        try FileManager.default.removeItem(at: directory.file("snapshots"))
        let store = try EventStore.open(at: directory.url, snapshotPolicy: .never)
        let notes = try Self.notes(store)
        #expect(notes.projection.eventsApplied > 0)
        #expect(notes.count == 9 && notes.fetch(id: "never") != nil)
        #expect(store.purgedStreamCount == 2)
        try await Self.expectEveryWriteRefused(notes, store, id: "n1")
        try await Self.expectEveryWriteRefused(notes, store, id: "n2")
        try await store.close()
    }

    @Test func purgeAllIsOneBatchAndAPurgedStreamCannotBePurgedInTheSameCommandTwice() async throws {
        let store = try EventStore(log: InMemoryLog())
        let notes = try Self.notes(store)
        for i in 0..<5 { try await notes.add(Note(id: "n\(i)", text: "t")) }
        let before = store.nextPosition
        #expect(try await notes.purgeAll(ids: ["n0", "n1", "missing", "n3"]) == 3)
        #expect(store.nextPosition == before + 3)
        #expect(notes.fetchAll().map(\.id).sorted() == ["n2", "n4"])
        await #expect(throws: RepositoryError.self) { try await notes.purgeAll(ids: ["n2", "n2"]) }
        #expect(notes.fetch(id: "n2") != nil, "nothing written by the refused batch")
        // A raw batch that purges a stream and then appends to it is refused whole.
        let stream = StreamID("Note", .string("n4"))
        await Self.expectPurged(stream) {
            try await store.append([PendingEvent(Tombstone.purged.event(for: stream)),
                                    PendingEvent(EncodedEvent(eventType: "Note.updated", schemaVersion: 1, stream: stream, payload: []))])
        }
        #expect(!store.isPurged(stream) && notes.fetch(id: "n4") != nil)
    }

    @Test func observersSeeAPurgedEntityLeave() async throws {
        let store = try EventStore(log: InMemoryLog())
        let notes = try Self.notes(store)
        try await notes.add(Note(id: "a", text: "t"))
        try await notes.add(Note(id: "b", text: "t"))
        var updates = notes.observe(where: { _ in true }).makeAsyncIterator()
        #expect(await updates.next()?.map(\.id).sorted() == ["a", "b"])
        try await notes.purge(id: "a")
        #expect(await updates.next()?.map(\.id) == ["b"])
        // Time travel still shows the past (compaction is what will remove it).
        #expect(try notes.entities(throughPosition: 1).map(\.id).sorted() == ["a", "b"])
    }

    /// A purge and an add of one soft-deleted id, racing: the add either commits before the
    /// purge (then the purge ends the re-added entity) or fails with `streamPurged`; never
    /// both live after a purge, and the log says which.
    @Test func racingPurgeAndAddOfOneID() async throws {
        let trials = testScale.pick(1_000, small: 300)
        let store = try EventStore(log: InMemoryLog())
        let notes = try Self.notes(store)
        var addsFirst = 0, purgesFirst = 0
        for trial in 0..<trials {
            let id = "t\(trial)"
            try await notes.add(Note(id: id, text: "first"))
            try await notes.delete(id: id)
            async let added: Bool = {
                do { try await notes.add(Note(id: id, text: "again")); return true } catch RepositoryError.streamPurged { return false }
            }()
            async let purged = notes.purge(id: id)
            let (didAdd, didPurge) = try await (added, purged)
            #expect(didPurge.envelope != nil, "trial \(trial): a stream with events is always purged")
            let types = try notes.history(of: id).map(\.eventType)
            if didAdd {
                addsFirst += 1
                #expect(types == ["Note.added", "Note.deleted", "Note.added", "$purged"], "trial \(trial)")
            } else {
                purgesFirst += 1
                #expect(types == ["Note.added", "Note.deleted", "$purged"], "trial \(trial)")
            }
            #expect(notes.fetch(id: id) == nil && store.isPurged(StreamID("Note", .string(id))), "trial \(trial)")
            #expect(notes.version(of: id) == UInt64(types.count), "trial \(trial)")
        }
        #expect(addsFirst + purgesFirst == trials)
    }
}
