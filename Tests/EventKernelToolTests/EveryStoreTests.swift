import Foundation
import Testing
import EventKernel
import EventKernelTestSupport
@testable import EventKernelTool

// MARK: - Stores written through EventSourcedRepository (a ledger and a forum)

struct LedgerAccount: Identifiable, Codable, Sendable, Equatable {
    var id: UUID
    var name: String
    var balance: Decimal
    var opened: Date
    var tags: [String]
    var overdraft: Double?
    var website: URL?
}

struct LedgerTransfer: Identifiable, Codable, Sendable, Equatable {
    var id: UUID
    var from: UUID
    var to: UUID
    var amount: Decimal
    var bookedAt: Date
    var receipt: Data?
    var rate: Float
}

struct ForumPost: Identifiable, Codable, Sendable, Equatable {
    struct Reply: Codable, Sendable, Equatable { var author: String; var text: String; var at: Date }
    var id: String
    var thread: Int
    var author: String
    var body: String
    var score: Int
    var edited: Bool
    var replies: [Reply]
    var reactions: [String: Int]
    /// A key that looks like the export's tags: rendered inside `$object`.
    var odd: [String: String]
}

/// A note kept by a hand-written payload codec: not self-describing.
struct OpaqueNote: Identifiable, Codable, Sendable, Equatable {
    var id: String
    var text: String
}

let opaqueNotes = EntitySchema<OpaqueNote>(version: 1, payload: EntityPayloadCodec(
    encode: { note, bytes in bytes.append(0x01); bytes.append(contentsOf: Array(note.text.utf8)) },
    decode: { payload, id, _ in
        guard case .string(let s) = id else { throw CocoaError(.coderInvalidValue) }
        return OpaqueNote(id: s, text: String(decoding: payload.dropFirst(), as: UTF8.self))
    }))

let day = 86_400.0
let accountIDs = (0..<3).map { UUID(uuidString: String(format: "10000000-0000-4000-8000-%012d", $0))! }

/// A ledger: accounts added, updated, one deleted, and transfers (binary codec, the default).
func writeLedger(_ directory: URL) async throws {
    let store = try EventStore.open(at: directory, snapshotPolicy: .never)
    let accounts = try EventSourcedRepository<LedgerAccount>(store: store, typeName: "Account")
    let transfers = try EventSourcedRepository<LedgerTransfer>(store: store, typeName: "Transfer")
    var a = LedgerAccount(id: accountIDs[0], name: "Alice", balance: Decimal(string: "100.25")!, opened: t0, tags: ["main"],
                          overdraft: nil, website: URL(string: "https://example.org/a"))
    let b = LedgerAccount(id: accountIDs[1], name: "Bob \"the\" builder\n", balance: 0, opened: t0.addingTimeInterval(0.125),
                          tags: [], overdraft: -50.5, website: nil)
    let c = LedgerAccount(id: accountIDs[2], name: "Carol", balance: Decimal(string: "-3.1")!, opened: t0.addingTimeInterval(day),
                          tags: ["x", "y"], overdraft: 0, website: nil)
    try await accounts.addAll([a, b, c])
    try await transfers.add(LedgerTransfer(id: accountIDs[2], from: a.id, to: b.id, amount: Decimal(string: "12.50")!,
                                           bookedAt: t0.addingTimeInterval(2 * day + 0.1), receipt: Data([0, 1, 2, 255]), rate: 1.5))
    a.balance = Decimal(string: "87.75")!
    a.tags.append("gold")
    try await accounts.update(a)
    try await accounts.delete(id: c.id)
    try await store.close()
}

/// A forum: posts with string ids, nested replies, dictionaries; one JSON-codec type and one
/// payload-codec type beside it.
func writeForum(_ directory: URL) async throws {
    let store = try EventStore.open(at: directory, snapshotPolicy: .never)
    let posts = try EventSourcedRepository<ForumPost>(store: store, typeName: "Post")
    let jsonPosts = try EventSourcedRepository<ForumPost>(store: store, typeName: "Draft", schema: EntitySchema(version: 3, codec: .json))
    var p = ForumPost(id: "post-1", thread: 7, author: "ann", body: "Hello ✓", score: -2, edited: false,
                      replies: [], reactions: ["👍": 2], odd: ["$date": "not a date"])
    try await posts.add(p)
    p.replies.append(.init(author: "bo", text: "hi", at: t0.addingTimeInterval(60)))
    p.score = 5
    p.edited = true
    try await posts.update(p)
    try await posts.add(ForumPost(id: "00000000-0000-4000-8000-000000000009", thread: 8, author: "cy", body: "", score: 0,
                                  edited: false, replies: [], reactions: [:], odd: [:]))
    try await jsonPosts.add(ForumPost(id: "draft-1", thread: 7, author: "ann", body: "draft", score: 0, edited: false,
                                      replies: [], reactions: [:], odd: [:]))
    try await store.close()
}

/// ``writeForum(_:)`` and then, in a second session, one entity of a payload-codec type
/// (`Note/n1`) whose bytes no tool can read without the application's codec.
func writeForumWithAnOpaqueNote(_ directory: URL) async throws {
    try await writeForum(directory)
    let store = try EventStore.open(at: directory, snapshotPolicy: .never)
    let notes = try EventSourcedRepository<OpaqueNote>(store: store, typeName: "Note", schema: opaqueNotes)
    try await notes.add(OpaqueNote(id: "n1", text: "secret"))
    try await store.close()
}

func exportLines(_ store: String) throws -> [String] {
    let result = try run("export", store)
    #expect(result.status == 0, "\(result.stderr)")
    return result.stdout.split(separator: "\n").map(String.init)
}

func object(_ line: String) throws -> [String: Any] {
    try #require(try jsonObject(line) as? [String: Any])
}

@Suite struct EveryStoreTests {
    @Test func exportWritesEveryEventOfAGenericStoreDecoded() async throws {
        let temp = TemporaryDirectory("ek-every")
        let store = temp.file("ledger")
        try await writeLedger(store)
        let lines = try exportLines(store.path)
        // 3 adds, 1 transfer, 1 update, 1 delete: every event, none skipped.
        #expect(lines.count == 6)
        let objects = try lines.map(object)
        #expect(objects.map { $0["position"] as? Int } == [0, 1, 2, 3, 4, 5])
        #expect(objects.map { $0["event"] as? String } == ["Account.added", "Account.added", "Account.added", "Transfer.added", "Account.updated", "Account.deleted"])
        #expect(objects.map { $0["version"] as? Int } == [1, 1, 1, 1, 2, 2])
        #expect(objects.map { $0["codec"] as? String } == ["binary", "binary", "binary", "binary", "binary", "none"])
        let stream = try #require(objects[0]["stream"] as? [String: Any])
        #expect(stream["type"] as? String == "Account")
        #expect(stream["id"] as? String == accountIDs[0].uuidString)
        #expect(stream["idType"] as? String == "uuid")
        // The decoded payload, with the typed values tagged and keys in the entity's order.
        #expect(lines[0].hasSuffix(",\"data\":{\"id\":{\"$uuid\":\"\(accountIDs[0].uuidString)\"},\"name\":\"Alice\",\"balance\":{\"$decimal\":\"100.25\"},\"opened\":{\"$date\":\"2025-01-01T00:00:00Z\"},\"tags\":[\"main\"],\"website\":{\"$url\":\"https://example.org/a\"}}}"), "\(lines[0])")
        let bob = try #require(objects[1]["data"] as? [String: Any])
        #expect(bob["name"] as? String == "Bob \"the\" builder\n")
        #expect(bob["opened"] as? [String: String] == ["$date": "2025-01-01T00:00:00.125Z"])
        #expect(lines[1].contains("\"overdraft\":-50.5"))
        #expect(lines[2].contains("\"overdraft\":0.0"), "a double always shows it is one: \(lines[2])")
        let transfer = try #require(objects[3]["data"] as? [String: Any])
        #expect(transfer["receipt"] as? [String: String] == ["$data": Data([0, 1, 2, 255]).base64EncodedString()])
        #expect(transfer["rate"] as? [String: Double] == ["$float": 1.5])
        #expect(transfer["amount"] as? [String: String] == ["$decimal": "12.5"])
        let updated = try #require(objects[4]["data"] as? [String: Any])
        #expect(updated["tags"] as? [String] == ["main", "gold"])
        #expect(objects[5]["data"] is NSNull)
    }

    @Test func exportImportRoundTripsALedgerStore() async throws {
        let temp = TemporaryDirectory("ek-every")
        let store = temp.file("ledger")
        try await writeLedger(store)
        let exported = temp.file("ledger.jsonl")
        #expect(try run("export", store.path, "--output", exported.path).status == 0)
        let copy = temp.file("copy")
        let imported = try run("import", copy.path, exported.path)
        #expect(imported.status == 0, "\(imported.stderr)")
        try await expectSameEvents(store, copy)
        // The application reads the imported store as it read the original.
        let reopened = try EventStore.open(at: copy, snapshotPolicy: .never)
        let accounts = try EventSourcedRepository<LedgerAccount>(store: reopened, typeName: "Account")
        let transfers = try EventSourcedRepository<LedgerTransfer>(store: reopened, typeName: "Transfer")
        let all = accounts.fetchAll()
        #expect(all.map(\.name) == ["Alice", "Bob \"the\" builder\n"])
        #expect(all.first?.balance == Decimal(string: "87.75"))
        #expect(all.first?.tags == ["main", "gold"])
        #expect(all.last?.overdraft == -50.5)
        #expect(transfers.fetchAll().first?.receipt == Data([0, 1, 2, 255]))
        #expect(transfers.fetchAll().first?.rate == 1.5)
        try await reopened.close()
    }

    @Test func exportImportRoundTripsAForumStoreWithJSONAndOpaquePayloads() async throws {
        let temp = TemporaryDirectory("ek-every")
        let store = temp.file("forum")
        try await writeForumWithAnOpaqueNote(store)
        let result = try run("export", store.path)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 5)
        let objects = try lines.map(object)
        // A string id that reads as a UUID stays a string.
        let third = try #require(objects[2]["stream"] as? [String: String])
        #expect(third == ["type": "Post", "id": "00000000-0000-4000-8000-000000000009", "idType": "string"])
        let updated = try #require(objects[1]["data"] as? [String: Any])
        let replies = try #require(updated["replies"] as? [[String: Any]])
        #expect(replies.first?["at"] as? [String: String] == ["$date": "2025-01-01T00:01:00Z"])
        #expect(updated["reactions"] as? [String: Int] == ["👍": 2])
        // A plain object whose one key starts with $ is wrapped, never read as a tag.
        #expect(updated["odd"] as? [String: [String: String]] == ["$object": ["$date": "not a date"]])
        // A JSON payload as it is.
        #expect(objects[3]["codec"] as? String == "json")
        #expect(objects[3]["schemaVersion"] as? Int == 3)
        #expect((objects[3]["data"] as? [String: Any])?["body"] as? String == "draft")
        // The payload codec's bytes: base64 with a reason, said on stderr, exit 0.
        #expect(objects[4]["codec"] as? String == "bytes")
        #expect(objects[4]["data"] is NSNull)
        #expect(objects[4]["base64"] as? String == Data([0x01] + Array("secret".utf8)).base64EncodedString())
        #expect((objects[4]["reason"] as? String)?.contains("not self-describing") == true)
        #expect(result.stderr.contains("1 event payload is not self-describing"), "\(result.stderr)")

        let exported = temp.file("forum.jsonl")
        try result.stdout.write(to: exported, atomically: true, encoding: .utf8)
        let copy = temp.file("copy")
        let imported = try run("import", copy.path, exported.path)
        #expect(imported.status == 0, "\(imported.stderr)")
        try await expectSameEvents(store, copy)
        let reopened = try EventStore.open(at: copy, snapshotPolicy: .never)
        let posts = try EventSourcedRepository<ForumPost>(store: reopened, typeName: "Post")
        let drafts = try EventSourcedRepository<ForumPost>(store: reopened, typeName: "Draft", schema: EntitySchema(version: 3, codec: .json))
        let notes = try EventSourcedRepository<OpaqueNote>(store: reopened, typeName: "Note", schema: opaqueNotes)
        #expect(posts.fetch(id: "post-1")?.replies.first?.text == "hi")
        #expect(posts.fetch(id: "post-1")?.odd == ["$date": "not a date"])
        #expect(drafts.fetch(id: "draft-1")?.body == "draft")
        #expect(notes.fetch(id: "n1")?.text == "secret")
        try await reopened.close()
    }

    @Test func exportImportRoundTripsAStoreMixingActivitiesAndEntities() async throws {
        let temp = TemporaryDirectory("ek-every")
        let store = try importedStore(temp)
        try await writeLedger(URL(filePath: store))
        let lines = try exportLines(store)
        #expect(lines.count == goodLines.count + 6)
        #expect(lines.prefix(goodLines.count).allSatisfy { $0.contains("\"activity\"") || $0.contains("\"ended\"") })
        let exported = temp.file("mixed.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(to: exported, atomically: true, encoding: .utf8)
        let copy = temp.file("copy")
        // Small batches: a batch never mixes activities and other events.
        let imported = try run("import", copy.path, exported.path, "--batch-size", "2")
        #expect(imported.status == 0, "\(imported.stderr)")
        // Activity events are recorded at the import's time, and so every event after them.
        try await expectSameEvents(URL(filePath: store), copy, times: false)
        #expect(imported.stderr.contains("6 events were recorded at the time of the import"), "\(imported.stderr)")
        #expect(try run("export", copy.path, "--format", "activities").stdout == (try run("export", store, "--format", "activities")).stdout)
        // Imported twice: recognised by content, nothing appended again.
        let again = try run("import", copy.path, exported.path)
        #expect(again.status == 0)
        #expect(try exportLines(copy.path).count == lines.count)
    }

    @Test func exportSaysWhenABinaryPayloadDoesNotDecode() async throws {
        let temp = TemporaryDirectory("ek-every")
        let directory = temp.file("damaged")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        // Starts as the binary format does, then a keyed container cut short.
        try await store.append(PendingEvent(EncodedEvent(eventType: "Thing.added", schemaVersion: 1,
                                                         stream: StreamID("Thing", .string("t1")), payload: [0xFF, 0x0B, 0x01, 0x05])))
        try await store.close()
        let result = try run("export", directory.path)
        #expect(result.status == 3, "\(result.stderr)")
        let line = try object(try #require(result.stdout.split(separator: "\n").first.map(String.init)))
        #expect(line["codec"] as? String == "bytes")
        #expect(line["base64"] as? String == Data([0xFF, 0x0B, 0x01, 0x05]).base64EncodedString())
        #expect((line["reason"] as? String)?.contains("does not decode") == true)
        #expect(result.stderr.contains("position 0 (Thing/t1, Thing.added)"), "\(result.stderr)")
    }

    @Test func importRefusesEntityLinesOutOfOrderOrMalformed() async throws {
        let temp = TemporaryDirectory("ek-every")
        let store = temp.file("ledger")
        try await writeLedger(store)
        let lines = try exportLines(store.path)
        func attempt(_ input: [String]) throws -> RunResult {
            let file = temp.file("in-\(UUID().uuidString).jsonl")
            try write(input, to: file)
            return try run("import", temp.file("target-\(UUID().uuidString)").path, file.path)
        }
        // The update (version 2) without its add (version 1).
        let gap = try attempt([lines[4]])
        #expect(gap.status == 1)
        #expect(gap.stderr.contains(":1: version 2 of Account/\(accountIDs[0].uuidString) does not follow its version 0"), "\(gap.stderr)")
        #expect(gap.stderr.contains("nothing was imported"))
        // Into the store that holds them already.
        let file = temp.file("again.jsonl")
        try write([lines[0]], to: file)
        let twice = try run("import", store.path, file.path)
        #expect(twice.status == 1)
        #expect(twice.stderr.contains("does not follow its version 2"), "\(twice.stderr)")
        let badTag = try attempt([lines[0].replacingOccurrences(of: "\"$decimal\"", with: "\"$money\"")])
        #expect(badTag.status == 1)
        #expect(badTag.stderr.contains("data.balance: unknown tag \"$money\""), "\(badTag.stderr)")
        let badCodec = try attempt([lines[0].replacingOccurrences(of: "\"codec\":\"binary\"", with: "\"codec\":\"yaml\"")])
        #expect(badCodec.status == 1)
        #expect(badCodec.stderr.contains("unknown codec \"yaml\""), "\(badCodec.stderr)")
        let activity = try attempt([lines[0].replacingOccurrences(of: "\"type\":\"Account\"", with: "\"type\":\"activity\"")])
        #expect(activity.status == 1)
        #expect(activity.stderr.contains("is the activities'"), "\(activity.stderr)")
        let twiceKey = try attempt([lines[0].replacingOccurrences(of: "\"name\":\"Alice\"", with: "\"name\":\"Alice\",\"name\":\"A\"")])
        #expect(twiceKey.status == 1)
        #expect(twiceKey.stderr.contains("key \"name\" given twice"), "\(twiceKey.stderr)")
    }

    @Test func streamsCountsTypesAndPagesTheStreamsOfOne() async throws {
        let temp = TemporaryDirectory("ek-every")
        let store = try importedStore(temp)
        try await writeLedger(URL(filePath: store))
        let types = try run("streams", store, "--json")
        #expect(types.status == 0, "\(types.stderr)")
        let rows = try #require(try jsonObject(types.stdout) as? [[String: Any]])
        #expect(rows.map { $0["type"] as? String } == ["Account", "Transfer", "activity"])
        #expect(rows.map { $0["events"] as? Int } == [5, 1, goodLines.count])
        #expect(rows.map { $0["streams"] as? Int } == [3, 1, 3])
        // One type's streams, in id order, a page at a time.
        let first = try run("streams", store, "Account", "--limit", "2", "--format", "jsonl")
        #expect(first.status == 0, "\(first.stderr)")
        let page = try first.stdout.split(separator: "\n").map { try object(String($0)) }
        #expect(page.map { $0["id"] as? String } == [accountIDs[0].uuidString, accountIDs[1].uuidString])
        #expect(page.map { $0["version"] as? Int } == [2, 1])
        #expect(page.map { $0["events"] as? Int } == [2, 1])
        #expect(page.map { $0["lastEvent"] as? String } == ["Account.updated", "Account.added"])
        #expect(first.stderr.contains("1 more; the next page: --after \(accountIDs[1].uuidString)"), "\(first.stderr)")
        let next = try run("streams", "--dir", store, "Account", "--after", accountIDs[1].uuidString, "--json")
        let rest = try #require(try jsonObject(next.stdout) as? [[String: Any]])
        #expect(rest.map { $0["id"] as? String } == [accountIDs[2].uuidString])
        #expect(rest.first?["lastEvent"] as? String == "Account.deleted")
        #expect(!next.stderr.contains("more"))
        let table = try run("streams", store, "Transfer")
        #expect(table.stdout.hasPrefix("Streams of Transfer: 1 in all\n"), "\(table.stdout)")
        // Failure paths: an unknown type names the types there are; --after needs a type.
        let unknown = try run("streams", store, "Acount")
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("no events of entity type \"Acount\" in \(URL(filePath: store).standardizedFileURL.path); its entity types: Account, Transfer, activity"), "\(unknown.stderr)")
        #expect(try run("streams", store, "--after", "x").status == 1)
        #expect(try run("streams", temp.file("none").path).status == 2)
    }

    @Test func historyOfAnyStreamShowsEachStateAndWhatChanged() async throws {
        let temp = TemporaryDirectory("ek-every")
        let store = temp.file("ledger").path
        try await writeLedger(URL(filePath: store))
        let id = accountIDs[0].uuidString
        let result = try run("history", store, "Account", id, "--json")
        #expect(result.status == 0, "\(result.stderr)")
        let events = try #require(try jsonObject(result.stdout) as? [[String: Any]])
        #expect(events.map { $0["event"] as? String } == ["Account.added", "Account.updated"])
        #expect(events.map { $0["version"] as? Int } == [1, 2])
        let state = try #require(events[1]["state"] as? [String: Any])
        #expect(state["balance"] as? [String: String] == ["$decimal": "87.75"])
        #expect(state["tags"] as? [String] == ["main", "gold"])
        let changes = try #require(events[1]["changes"] as? [[String: Any]])
        #expect(changes.count == 2)
        #expect(changes[0]["path"] as? String == "balance")
        #expect(changes[0]["op"] as? String == "changed")
        #expect(changes[0]["from"] as? [String: String] == ["$decimal": "100.25"])
        #expect(changes[0]["to"] as? [String: String] == ["$decimal": "87.75"])
        #expect(changes[1]["path"] as? String == "tags[1]")
        #expect(changes[1]["op"] as? String == "added")
        #expect(changes[1]["to"] as? String == "gold")
        // CSV has the same changes, as the JSON array in their column (a newcomer's probe:
        // the column was missing).
        let csv = try run("history", store, "Account", id, "--format", "csv")
        #expect(csv.status == 0, "\(csv.stderr)")
        let header = csv.stdout.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        #expect(header == "position,recordedAt,version,event,schemaVersion,codec,state,data,changes", "\(header)")
        #expect(csv.stdout.contains("tags[1]") && csv.stdout.contains("100.25"), "\(csv.stdout)")
        // The add: every field added.
        let added = try #require(events[0]["changes"] as? [[String: Any]])
        #expect(added.map { $0["path"] as? String } == ["id", "name", "balance", "opened", "tags", "website"])
        #expect(added.allSatisfy { $0["op"] as? String == "added" })
        // A delete: no state, every field removed; the table says it in words.
        let deleted = try run("history", "--dir", store, "Account", accountIDs[2].uuidString)
        #expect(deleted.status == 0, "\(deleted.stderr)")
        let lines = deleted.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "History of Account/\(accountIDs[2].uuidString)")
        #expect(lines.contains { $0.contains("Account.deleted") && $0.contains("name: − \"Carol\"") }, "\(deleted.stdout)")
        #expect(lines.contains { $0.contains("Account.added") && $0.contains("balance: + {\"$decimal\":\"-3.1\"}") }, "\(deleted.stdout)")
        // Activities' history is unchanged.
        let activities = try importedStore(temp)
        let activity = try run("history", activities, ids[1].uuidString, "--format", "jsonl")
        #expect(activity.status == 0)
        #expect(activity.stdout.split(separator: "\n").first?.contains("\"event\":\"added\",\"activity\":") == true, "\(activity.stdout)")
        // Failure paths: unknown type, unknown id, too many arguments with --dir.
        let noType = try run("history", store, "Acount", id)
        #expect(noType.status == 1)
        #expect(noType.stderr.contains("its entity types: Account, Transfer"), "\(noType.stderr)")
        let noID = try run("history", store, "Account", "nobody")
        #expect(noID.status == 1)
        #expect(noID.stderr.contains("no stream Account/nobody in"), "\(noID.stderr)")
        #expect(try run("history", store, "Account", id, "--dir", store).status != 0)
    }

    @Test func historyOfAStringStreamAndAnOpaquePayload() async throws {
        let temp = TemporaryDirectory("ek-every")
        let store = temp.file("forum")
        try await writeForumWithAnOpaqueNote(store)
        let post = try run("history", store.path, "Post", "post-1", "--json")
        #expect(post.status == 0, "\(post.stderr)")
        let events = try #require(try jsonObject(post.stdout) as? [[String: Any]])
        let changes = try #require(events.last?["changes"] as? [[String: Any]])
        #expect(changes.map { $0["path"] as? String } == ["score", "edited", "replies[0]"])
        #expect(changes[0]["from"] as? Int == -2)
        #expect(changes[0]["to"] as? Int == 5)
        // A string id shaped like a UUID finds its stream.
        let uuidShaped = try run("history", store.path, "Post", "00000000-0000-4000-8000-000000000009")
        #expect(uuidShaped.status == 0, "\(uuidShaped.stderr)")
        // An opaque payload: shown as bytes with the reason, never a guessed state.
        let note = try run("history", store.path, "Note", "n1", "--json")
        #expect(note.status == 0)
        let noteEvents = try #require(try jsonObject(note.stdout) as? [[String: Any]])
        #expect(noteEvents.first?["codec"] as? String == "bytes")
        #expect(noteEvents.first?["state"] is NSNull)
        #expect((noteEvents.first?["reason"] as? String)?.contains("not self-describing") == true)
        #expect(note.stderr.contains("not self-describing"))
    }

    @Test func tailShowsEveryEventDecoded() async throws {
        let temp = TemporaryDirectory("ek-every")
        let store = temp.file("ledger").path
        try await writeLedger(URL(filePath: store))
        // JSON Lines: the export lines, every event with its data.
        let json = try run("tail", store, "--from", "0", "--json")
        #expect(json.status == 0, "\(json.stderr)")
        #expect(json.stdout.split(separator: "\n").map(String.init) == (try exportLines(store)))
        let table = try run("tail", store, "-n", "2")
        let lines = table.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2)
        #expect(lines[0].contains("Account.updated") && lines[0].contains("Account/\(accountIDs[0].uuidString)") && lines[0].contains("\"balance\":{\"$decimal\":\"87.75\"}"), "\(lines[0])")
        #expect(lines[1].contains("Account.deleted"), "\(lines[1])")
        // An activity event that does not decode is shown with its bytes, and is damage (exit 3).
        let damaged = temp.file("damaged")
        let events = try EventStore.open(at: damaged, snapshotPolicy: .never)
        try await events.append(PendingEvent(EncodedEvent(eventType: "activity.added", schemaVersion: 1,
                                                          stream: StreamID("activity", .uuid(ids[0])), payload: [9, 9])))
        try await events.close()
        let bad = try run("tail", damaged.path, "--json")
        #expect(bad.status == 3, "\(bad.stderr)")
        #expect(bad.stderr.contains("the activity event at position 0 does not decode"), "\(bad.stderr)")
        #expect(bad.stdout.contains("\"codec\":\"bytes\",\"data\":null,\"base64\":\"CQk=\""), "\(bad.stdout)")
    }

    @Test func replayGivesAGenericTypesEntitiesThen() async throws {
        let temp = TemporaryDirectory("ek-every")
        let store = temp.file("ledger").path
        try await writeLedger(URL(filePath: store))
        func replay(_ arguments: String...) throws -> [String: Any] {
            let result = try run(["replay", store, "--entity", "Account"] + arguments + ["--json"])
            #expect(result.status == 0, "\(result.stderr)")
            return try object(result.stdout)
        }
        let early = try replay("--position", "2")
        #expect(early["entities"] as? Int == 3)
        let earlyRows = try #require(early["rows"] as? [[String: Any]])
        #expect(earlyRows.map { $0["id"] as? String } == accountIDs.map(\.uuidString))
        #expect((earlyRows[0]["state"] as? [String: Any])?["balance"] as? [String: String] == ["$decimal": "100.25"])
        // By recording time: as recorded when the transfer was (position 3), before the update.
        let recorded = try #require(try object(exportLines(store)[3])["recordedAt"] as? String)
        let asOf = try replay("--as-of", recorded)
        let asOfRows = try #require(asOf["rows"] as? [[String: Any]])
        #expect(asOfRows.count == 3)
        #expect(asOfRows[0]["version"] as? Int == 1)
        let now = try replay("--position", "5")
        let nowRows = try #require(now["rows"] as? [[String: Any]])
        #expect(nowRows.map { $0["id"] as? String } == [accountIDs[0].uuidString, accountIDs[1].uuidString], "the deleted one is gone")
        #expect((nowRows[0]["state"] as? [String: Any])?["balance"] as? [String: String] == ["$decimal": "87.75"])
        #expect(nowRows[0]["version"] as? Int == 2)
        let before = try run("replay", store, "--entity", "Account", "--as-of", "2001-01-01")
        #expect(before.status == 0)
        #expect(before.stdout.hasPrefix("Account as recorded at or before 2001-01-01 (the whole day, UTC): 0 entities"), "\(before.stdout)")
        #expect(before.stderr.contains("before the first event was recorded"))
        // Failure paths: an unknown type, query flags, events that are not a repository's.
        let unknown = try run("replay", store, "--entity", "Acount", "--position", "0")
        #expect(unknown.status == 1 && unknown.stderr.contains("its entity types: Account, Transfer"), "\(unknown.stderr)")
        #expect(try run("replay", store, "--entity", "Account", "--position", "0", "--type", "sleep").status == 1)
        let custom = temp.file("custom")
        let events = try EventStore.open(at: custom, snapshotPolicy: .never)
        try await events.append(PendingEvent(EncodedEvent(eventType: "Person.renamed", schemaVersion: 1,
                                                          stream: StreamID("Person", .string("p")), payload: Array("{\"name\":\"x\"}".utf8))))
        try await events.close()
        let foreign = try run("replay", custom.path, "--entity", "Person", "--position", "0")
        #expect(foreign.status == 1)
        #expect(foreign.stderr.contains("Person's events are not a generic repository's (Person.renamed at position 0"), "\(foreign.stderr)")
    }

    @Test func positionalArgumentsOfStreamsAndHistory() throws {
        func streams(_ arguments: String...) throws -> StreamsCommand {
            try #require(try EventKernelCommand.parseAsRoot(["streams"] + arguments) as? StreamsCommand)
        }
        func history(_ arguments: String...) throws -> HistoryCommand {
            try #require(try EventKernelCommand.parseAsRoot(["history"] + arguments) as? HistoryCommand)
        }
        #expect(try streams("ledger").store.operand == nil)
        #expect(try streams("ledger").store.url.lastPathComponent == "ledger")
        #expect(try streams("ledger", "Account").store.operand == "Account")
        #expect(try streams("--dir", "ledger", "Account").store.operand == "Account")
        #expect(try streams("--postgres", "postgres://u@h/db", "Account").store.operand == "Account")
        #expect(try streams("postgres://u@h/db", "Account").store.postgresURL == "postgres://u@h/db")
        let three = try history("ledger", "Account", "a1")
        #expect(three.target.type == "Account" && three.target.id == "a1")
        #expect(three.store.url.lastPathComponent == "ledger")
        let dir = try history("--dir", "ledger", "Account", "a1")
        #expect(dir.target.type == "Account" && dir.target.id == "a1")
        let postgres = try history("--postgres", "postgres://u@h/db", "Thread", "10")
        #expect(postgres.target.type == "Thread" && postgres.target.id == "10")
        // Two arguments without an option are still STORE ID (activities), one is the ID.
        let activity = try history("demo", "00000000-0000-4000-8000-000000000001")
        #expect(activity.target.type == nil && activity.store.url.lastPathComponent == "demo")
        #expect(try history("00000000-0000-4000-8000-000000000001").target.type == nil)
        #expect(throws: (any Error).self) { try history("--dir", "ledger", "ledger", "Account", "a1") }
        #expect(throws: (any Error).self) { try history("/tmp", "x", "--dir", "ledger") }
    }

    @Test func importContinuesAStreamOfAStoreWhoseSnapshotHoldsItsRepository() async throws {
        let temp = TemporaryDirectory("ek-every")
        let store = temp.file("ledger")
        try await writeLedger(store)
        do {
            // The application's snapshot records the repository's table and versions.
            let events = try EventStore.open(at: store, snapshotPolicy: .never)
            _ = try EventSourcedRepository<LedgerAccount>(store: events, typeName: "Account")
            _ = try EventSourcedRepository<LedgerTransfer>(store: events, typeName: "Transfer")
            try await events.writeSnapshots()
            try await events.close()
        }
        let lines = try exportLines(store.path)
        // Alice's update again, as version 3: the next version of her stream.
        let next = lines[4].replacingOccurrences(of: "\"version\":2", with: "\"version\":3").replacingOccurrences(of: "\"Alice\"", with: "\"Alicia\"")
        let file = temp.file("next.jsonl")
        try write([next], to: file)
        let imported = try run("import", store.path, file.path)
        #expect(imported.status == 0, "\(imported.stderr)")
        // The same file again: recognised by its marker, nothing appended twice.
        let again = try run("import", store.path, file.path)
        #expect(again.status == 0 && again.stdout.contains("nothing to import"), "\(again.stdout)")
        let events = try EventStore.open(at: store, snapshotPolicy: .never)
        let accounts = try EventSourcedRepository<LedgerAccount>(store: events, typeName: "Account")
        #expect(accounts.fetch(id: accountIDs[0])?.name == "Alicia")
        #expect(accounts.version(of: accountIDs[0]) == 3)
        try await events.close()
    }

    @Test func renderingIsLosslessForEveryTag() throws {
        let values: [BinaryEntityValue] = [
            .null, .bool(true), .int(-5), .int(7), .uint(0), .uint(5), .uint(UInt64.max), .double(1), .double(-0.0), .double(1e-300),
            .double(.nan), .double(Double(bitPattern: 0xfff8_0000_0000_0000)), .double(Double(bitPattern: 0x7ff4_0000_0000_0001)),
            .double(.infinity), .float(0.1), .float(-.infinity), .float(.nan), .float(Float(bitPattern: 0xffc0_0000)),
            .string("$x \"q\""), .uuid(accountIDs[1]),
            .date(Date(timeIntervalSinceReferenceDate: 0.1)), .date(Date(timeIntervalSinceReferenceDate: 1e300)),
            .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: 0xfff8_0000_0000_0000))),
            // Parts form, and the text form (0x0D) of a significand beyond 64 bits.
            .data([]), .decimal(Decimal(string: "-0.001")!), .decimal(Decimal(string: "123456789012345678901234567890.5")!), .decimal(.nan),
            .url("https://a.b/c?d=e"),
            .keyed([("$date", .int(1))]), .keyed([]), .unkeyed([.keyed([("a", .null), ("b", .unkeyed([]))])]),
        ]
        for value in values {
            let original = try value.encoded()
            let text = EntityJSON.json(try BinaryEntityValue.decode(original)).text
            let back = try EntityJSON.binary(JSONParser.parse(Array(text.utf8)))
            #expect(back == value, "\(text)")
            // Byte for byte: the tag (uint, not int), a NaN's sign and payload, the decimal's form.
            #expect(try back.encoded() == original, "\(text)")
        }
        #expect(EntityJSON.json(.uint(5)).text == "{\"$uint\":5}")
        #expect(EntityJSON.json(.double(Double(bitPattern: 0xfff8_0000_0000_0000))).text == "{\"$double\":\"nan:fff8000000000000\"}")
    }
}
