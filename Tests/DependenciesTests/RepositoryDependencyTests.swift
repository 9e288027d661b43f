import Activities
import ActivitiesDependencies
import Dependencies
import EventKernel
import EventKernelDependencies
import EventKernelTestSupport
import Foundation
import Testing

/// A generic domain for the tests: notes with a date index.
struct Note: Identifiable, Codable, Sendable, Equatable, RepositoryEntity {
    var id: Int
    var text: String
    var createdAt: Date

    static let repository = RepositoryDefinition<Note>(
        typeName: "Note", indexes: [.on(\.createdAt)], defaultOrder: [.ascending(\.createdAt)],
        validate: { note in
            guard !note.text.isEmpty else { throw RepositoryError.validationFailed("note \(note.id) is empty") }
        })

    static var previewEntities: [Note] {
        (1...3).map { Note(id: $0, text: "preview \($0)", createdAt: Date(timeIntervalSince1970: Double($0) * 3_600)) }
    }
}

/// `RepositoryClient<Entity>` as a swift-dependencies value (`@Dependency(RepositoryClient<Note>.self)`)
/// and the shared `\.eventStore`.
@Suite("Dependencies: RepositoryClient and the shared store")
struct RepositoryDependencyTests {
    /// A seed that fails validation fails every call with its own error (the repository is
    /// opened once; the seed is tried again), never with the store refusing a second
    /// registration of the repository.
    @Test func aSeedThatFailsValidationReportsItsOwnErrorOnEveryCall() async throws {
        let notes = RepositoryClient<Note>.inMemory([Note(id: 1, text: "", createdAt: .now)])
        for _ in 0..<3 {
            await #expect(throws: RepositoryError.validationFailed("note 1 is empty")) { _ = try await notes.fetchID(1) }
        }
    }

    @Test func liveValuesShareTheConfiguredStore() async throws {
        let directory = TemporaryDirectory("ek-deps")
        let (notes, activities, eventStore) = withDependencies {
            $0.context = .live
            $0.eventStore = .open(at: directory.url)
        } operation: {
            @Dependency(RepositoryClient<Note>.self) var notes
            @Dependency(\.activityRepository) var activities
            @Dependency(\.eventStore) var eventStore
            return (notes, activities, eventStore)
        }
        let first = Note(id: 1, text: "hello", createdAt: Date(timeIntervalSince1970: 100))
        var feed = notes.observe(EntityQuery<Note>().where(\.createdAt, greaterThan: Date(timeIntervalSince1970: 50))).makeAsyncIterator()
        #expect(await feed.next() == [])
        try await notes.add(first)
        #expect(await feed.next() == [first], "the live feed did not yield the add")
        try await activities.add(crashModel(1))
        await #expect(throws: RepositoryError.validationFailed("note 2 is empty")) {
            try await notes.add(Note(id: 2, text: "", createdAt: .now))
        }
        await #expect(throws: RepositoryError.alreadyExists(.string("1"))) { try await notes.add(first) }
        try await notes.save(Note(id: 2, text: "two", createdAt: Date(timeIntervalSince1970: 200)))
        #expect(try await notes.fetchID(2)?.text == "two")
        #expect(try await notes.count(EntityQuery()) == 2)
        #expect(try await notes.fetch(EntityQuery<Note>().limit(1)) == [first])
        #expect(try await notes.delete(2))

        // One store for both: one lock, one log (2 note events... and the activity in between).
        let store = try await eventStore.store()
        #expect(store.nextPosition == 4)
        try await eventStore.close()
        let reopened = try EventStore.open(at: directory.url)
        let reopenedNotes = try Note.repository.open(on: reopened)
        let reopenedActivities = try EventSourcedActivityRepository(store: reopened)
        #expect(reopenedNotes.fetchAll() == [first])
        #expect(reopenedActivities.count == 1)
        try await reopened.close()
    }

    @Test func testValuesFailLoudly() async throws {
        let (notes, eventStore) = withDependencies { _ in } operation: {
            @Dependency(RepositoryClient<Note>.self) var notes
            @Dependency(\.eventStore) var eventStore
            return (notes, eventStore)
        }
        let note = Note(id: 1, text: "x", createdAt: .now)
        await withKnownIssue { _ = try await notes.fetchID(1) }
        await withKnownIssue { _ = try await notes.fetch(EntityQuery()) }
        await withKnownIssue { _ = try await notes.fetchPage(EntityQuery()) }
        await withKnownIssue { _ = try await notes.count(EntityQuery()) }
        await withKnownIssue { try await notes.add(note) }
        await withKnownIssue { try await notes.update(note) }
        await withKnownIssue { try await notes.save(note) }
        await withKnownIssue { _ = try await notes.delete(1) }
        await withKnownIssue {
            var feed = notes.observe(EntityQuery()).makeAsyncIterator()
            #expect(await feed.next() == nil)
        }
        await withKnownIssue { _ = try await eventStore.store() }
        await withKnownIssue { try await eventStore.close() }
    }

    @Test func previewValueSeedsThePreviewStore() async throws {
        let notes = withDependencies { $0.context = .preview } operation: {
            @Dependency(RepositoryClient<Note>.self) var notes
            return notes
        }
        #expect(try await notes.fetch(EntityQuery()) == Note.previewEntities)
        try await notes.add(Note(id: 9, text: "new", createdAt: .now))
        #expect(try await notes.count(EntityQuery()) == 4)
        // An in-memory client of its own, for tests that want the real engine.
        let scratch = RepositoryClient<Note>.inMemory([Note(id: 5, text: "five", createdAt: .now)])
        #expect(try await scratch.fetchID(5)?.text == "five")
        await #expect(throws: RepositoryError.alreadyExists(.string("5"))) { try await scratch.add(Note(id: 5, text: "again", createdAt: .now)) }
    }
}
