import Activities
import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

// A store written by the release before streams (envelope format 1, entity versions keyed by id
// alone, version-table snapshot schema 1): Tests/Fixtures/format1-store. It must open with every
// value, version, history entry and metadata intact, from its snapshots and from the log alone.

struct FixtureAccount: Identifiable, Codable, Sendable, Equatable { var id: UUID; var name: String; var balance: Int }
struct FixtureNote: Identifiable, Codable, Sendable, Equatable { var id: String; var text: String }

@Suite struct FormatOneFixtureTests {
    static let base = Date(timeIntervalSinceReferenceDate: 800_000_000.125)

    static func activityID(_ i: Int) -> UUID {
        i == 0 ? UUID(uuidString: "10000000-0000-4000-8000-000000000000")!
            : UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", i))!
    }

    /// What the fixture's writer did, replayed on plain values.
    static var expectedActivities: [UUID: ActivityModel] {
        var models: [UUID: ActivityModel] = [:]
        for i in 0..<60 {
            let start = base + Double(i) * 3600
            models[activityID(i)] = ActivityModel(
                id: activityID(i), startDate: start, endDate: i % 3 == 0 ? nil : start + 1800,
                type: ActivityType(rawValue: ["sleep", "feeding", "walk"][i % 3]))
        }
        for i in stride(from: 0, to: 60, by: 7) { models[activityID(i)]!.endDate = base + Double(i) * 3600 + 900 }
        for i in stride(from: 1, to: 60, by: 11) { models[activityID(i)] = nil }
        return models
    }

    static func accountID(_ i: Int) -> UUID { UUID(uuidString: String(format: "20000000-0000-4000-8000-%012d", i))! }

    static func check(_ directory: URL, fromSnapshots: Bool) async throws {
        let store = try EventStore(log: SegmentedLog.open(at: directory), directory: directory, snapshotPolicy: .never)
        let activities = try EventSourcedActivityRepository(store: store)
        let accounts = try EventSourcedRepository<FixtureAccount>(store: store, typeName: "Account")
        let notes = try EventSourcedRepository<FixtureNote>(store: store, typeName: "Note")
        #expect(store.nextPosition == 114)
        // The generic repositories' format-1 snapshots (layout 1, without stream versions) and
        // the version table's (schema 1) are not restored: both are rebuilt from the log.
        #expect(accounts.projection.eventsApplied == 114)
        #expect(notes.projection.eventsApplied == 114)
        _ = fromSnapshots

        // Activities: every value, and the versions each stream reached.
        let expected = Self.expectedActivities
        #expect(activities.count == 54)
        for (id, model) in expected { #expect(activities.activity(id: id) == model) }
        for i in 0..<60 {
            let id = activityID(i)
            let deleted = (i - 1) % 11 == 0 && i >= 1
            let ended = i % 7 == 0
            #expect(try store.version(of: ActivityEventCodec.stream(of: id)) == UInt64(1 + (ended ? 1 : 0) + (deleted ? 1 : 0)), "activity \(i)")
        }
        let history = try activities.history(of: activityID(56))
        #expect(history.map(\.entityVersion) == [1, 2, 3])
        #expect(history.map(\.event.activityID) == [activityID(56), activityID(56), activityID(56)])

        // Accounts: renamed every third, the last deleted; the first add's metadata kept.
        #expect(accounts.count == 19)
        for i in 0..<19 {
            let renamed = i % 3 == 0
            #expect(accounts.fetch(id: accountID(i)) == FixtureAccount(
                id: accountID(i), name: renamed ? "account \(i) renamed" : "account \(i)", balance: renamed ? -i : i * 100))
            #expect(accounts.version(of: accountID(i)) == (renamed ? 2 : 1))
        }
        #expect(accounts.fetch(id: accountID(19)) == nil && accounts.version(of: accountID(19)) == 2)
        let accountHistory = try accounts.history(of: accountID(3))
        #expect(accountHistory.map(\.eventType) == ["Account.added", "Account.updated"])
        #expect(accountHistory.map(\.stream) == [StreamID("Account", .uuid(accountID(3))), StreamID("Account", .uuid(accountID(3)))])
        #expect(accountHistory.first?.metadata == EventMetadata(correlationID: "c3", actor: "fixture"))
        #expect(accountHistory.last?.metadata == EventMetadata.none)

        // Notes: string ids, one edited.
        #expect(notes.count == 10)
        #expect(notes.fetch(id: "note-2") == FixtureNote(id: "note-2", text: "edited"))
        #expect(notes.fetch(id: "note-7") == FixtureNote(id: "note-7", text: "text 7"))
        #expect(notes.version(of: "note-2") == 2 && notes.version(of: "note-3") == 1)

        // New writes continue the old streams' versions.
        var note = try #require(notes.fetch(id: "note-3"))
        note.text = "after the upgrade"
        try await notes.update(note, expectedVersion: 1)
        #expect(notes.version(of: "note-3") == 2)
        try await activities.end(id: activityID(2), at: base + 2 * 3600 + 60)
        #expect(try store.version(of: ActivityEventCodec.stream(of: activityID(2))) == 2)
        try await store.close()
    }

    @Test func opensFromItsSnapshots() async throws {
        let copy = try copyOfFixture("format1-store")
        try await Self.check(copy.url, fromSnapshots: true)
    }

    @Test func opensFromTheLogAlone() async throws {
        let copy = try copyOfFixture("format1-store")
        try FileManager.default.removeItem(at: copy.file("snapshots"))
        try await Self.check(copy.url, fromSnapshots: false)
    }
}
