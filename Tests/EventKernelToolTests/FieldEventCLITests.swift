import Foundation
import Testing
import EventKernel
import EventKernelTestSupport
@testable import EventKernelTool

/// A job whose end a field event sets (`Job.ended`), beside the repository's own events.
struct FieldJob: Identifiable, Codable, Sendable, Equatable {
    var id: UUID
    var title: String
    var start: Date
    var end: Date?
}

let jobEnded = FieldEvent<FieldJob, Date?>("ended", sets: \.end)
let jobIDs = (0..<3).map { UUID(uuidString: String(format: "20000000-0000-4000-8000-%012d", $0))! }

/// Jobs: job 0 added, ended, then renamed (an update holding the whole entity); job 1 added and
/// ended; job 2 added and deleted.
func writeJobs(_ directory: URL) async throws {
    let store = try EventStore.open(at: directory, snapshotPolicy: .never)
    let jobs = try EventSourcedRepository<FieldJob>(store: store, typeName: "Job", schema: EntitySchema().recording(jobEnded))
    var a = FieldJob(id: jobIDs[0], title: "build", start: t0, end: nil)
    try await jobs.add(a)
    try await jobs.apply(jobEnded, t0.addingTimeInterval(3_600), to: a.id)
    a.end = t0.addingTimeInterval(3_600)
    a.title = "build all"
    try await jobs.update(a)
    try await jobs.add(FieldJob(id: jobIDs[1], title: "test", start: t0.addingTimeInterval(day), end: nil))
    try await jobs.apply(jobEnded, t0.addingTimeInterval(day + 60), to: jobIDs[1])
    try await jobs.add(FieldJob(id: jobIDs[2], title: "lint", start: t0, end: nil))
    try await jobs.delete(id: jobIDs[2])
    try await store.close()
}

@Suite struct FieldEventCLITests {
    @Test func importRefusesAFieldEventWithoutItsEntity() async throws {
        let temp = TemporaryDirectory("ek-field")
        let store = temp.file("jobs")
        try await writeJobs(store)
        let lines = try exportLines(store.path)
        try #require(lines.count == 7)
        let ended = lines[1]
        #expect(ended.contains("\"event\":\"Job.ended\""), "\(ended)")
        func attempt(_ input: [String], into target: URL? = nil) throws -> RunResult {
            let file = temp.file("in-\(UUID().uuidString).jsonl")
            try write(input, to: file)
            return try run("import", (target ?? temp.file("target-\(UUID().uuidString)")).path, file.path)
        }
        // The field event as the stream's first event (a line without its version, or one
        // edited to version 1): the application's open would fail on it.
        for line in [ended.replacingOccurrences(of: "\"version\":2,", with: ""),
                     ended.replacingOccurrences(of: "\"version\":2,", with: "\"version\":1,")] {
            #expect(line != ended)
            // Job is a repository's type only by the evidence of job 1's add in the input.
            let refused = try attempt([lines[3], line])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains(":2: Job.ended is a field event (Job is a generic repository's type)"), "\(refused.stderr)")
            #expect(refused.stderr.contains("Job/\(jobIDs[0].uuidString) has no entity at that point"), "\(refused.stderr)")
            #expect(refused.stderr.contains("nothing was imported"))
        }
        // After the entity's delete, in a type the input shows is a repository's.
        let deleted = lines[6]
        #expect(deleted.contains("Job.deleted"))
        let afterDelete = ended.replacingOccurrences(of: jobIDs[0].uuidString, with: jobIDs[2].uuidString)
            .replacingOccurrences(of: "\"version\":2,", with: "\"version\":3,")
        let late = try attempt([lines[5], deleted, afterDelete])
        #expect(late.status == 1)
        #expect(late.stderr.contains(":3: Job.ended is a field event (Job is a generic repository's type)"), "\(late.stderr)")
        // After the entity's delete in the store.
        let afterStoredDelete = try attempt([afterDelete], into: store)
        #expect(afterStoredDelete.status == 1)
        #expect(afterStoredDelete.stderr.contains(":1: Job.ended is a field event (Job is a generic repository's type)"), "\(afterStoredDelete.stderr)")
        #expect(try exportLines(store.path) == lines, "nothing imported")
        // Whole, in order, the export imports back, and into a store holding the add.
        let whole = temp.file("whole")
        let all = try attempt(lines, into: whole)
        #expect(all.status == 0, "\(all.stderr)")
        try await expectSameEvents(store, whole)
        // The application opens what was imported.
        let reopened = try EventStore.open(at: whole, snapshotPolicy: .never)
        let jobs = try EventSourcedRepository<FieldJob>(store: reopened, typeName: "Job", schema: EntitySchema().recording(jobEnded))
        #expect(jobs.fetchAll().map(\.end) == [t0.addingTimeInterval(3_600), t0.addingTimeInterval(day + 60)])
        try await reopened.close()
        let partial = temp.file("partial")
        #expect(try attempt([lines[0]], into: partial).status == 0)
        let continued = try attempt([ended], into: partial)
        #expect(continued.status == 0, "\(continued.stderr)")
        // An application's own event (not a repository's type, not a field event's payload)
        // may start a stream.
        let own = "{\"position\":0,\"recordedAt\":null,\"stream\":{\"type\":\"Person\",\"id\":\"p\"},\"version\":1,\"event\":\"Person.renamed\",\"schemaVersion\":1,\"codec\":\"json\",\"data\":{\"name\":\"x\"}}"
        let foreign = try attempt([own])
        #expect(foreign.status == 0, "\(foreign.stderr)")
    }
}

extension FieldEventCLITests {
    @Test func historyShowsAFieldEventAndDiffsTheNextStateAgainstTheLastKnown() async throws {
        let temp = TemporaryDirectory("ek-field")
        let store = temp.file("jobs").path
        try await writeJobs(URL(filePath: store))
        let result = try run("history", store, "Job", jobIDs[0].uuidString, "--json")
        #expect(result.status == 0, "\(result.stderr)")
        let events = try #require(try jsonObject(result.stdout) as? [[String: Any]])
        #expect(events.map { $0["event"] as? String } == ["Job.added", "Job.ended", "Job.updated"])
        // The field event: its data, no state (not a guessed one), and why.
        #expect(events[1]["state"] is NSNull)
        #expect((events[1]["data"] as? [String: Any])?["value"] != nil)
        #expect((events[1]["reason"] as? String)?.contains("not which property") == true)
        // The update after it: diffed against the add's state, not against nothing.
        let changes = try #require(events[2]["changes"] as? [[String: Any]])
        #expect(changes.map { $0["path"] as? String } == ["title", "end"])
        #expect(changes[0]["op"] as? String == "changed")
        #expect(changes[1]["op"] as? String == "added")
        #expect(events[2]["changesSince"] as? Int == 1)
        #expect(events[0]["changesSince"] == nil)
        // The table says so in words, and that job 1's state after its field event is unknown.
        let table = try run("history", store, "Job", jobIDs[1].uuidString)
        #expect(table.status == 0, "\(table.stderr)")
        #expect(table.stdout.contains("field event \"ended\""), "\(table.stdout)")
        #expect(table.stdout.contains("State after version 2: unknown (see above); the last state known is version 1's"), "\(table.stdout)")
        let first = try run("history", store, "Job", jobIDs[0].uuidString)
        #expect(first.stdout.contains("since version 1, the last state known: title: \"build\" → \"build all\""), "\(first.stdout)")
    }

    @Test func replayFoldsATypeWithFieldEventsOrSaysWhichEntityItCannot() async throws {
        let temp = TemporaryDirectory("ek-field")
        let store = temp.file("jobs").path
        try await writeJobs(URL(filePath: store))
        // Job 0 updated after its field event: its whole state is known.
        let known = try run("replay", store, "--entity", "Job", "--position", "2", "--json")
        #expect(known.status == 0, "\(known.stderr)")
        let rows = try #require(try object(known.stdout)["rows"] as? [[String: Any]])
        #expect(rows.count == 1)
        #expect((rows.first?["state"] as? [String: Any])?["title"] as? String == "build all")
        #expect(rows.first?["version"] as? Int == 3)
        // Job 0 right after its field event, and job 1 after its own: refused, naming them.
        let afterField = try run("replay", store, "--entity", "Job", "--position", "1")
        #expect(afterField.status == 1)
        #expect(afterField.stderr.contains("Job/\(jobIDs[0].uuidString): its last event through position 1 is the field event Job.ended at position 1"), "\(afterField.stderr)")
        #expect(afterField.stderr.contains("its last whole state is version 1 (position 0)"), "\(afterField.stderr)")
        #expect(afterField.stdout.isEmpty)
        let now = try run("replay", store, "--entity", "Job", "--position", "6")
        #expect(now.status == 1)
        #expect(now.stderr.contains("Job/\(jobIDs[1].uuidString): its last event through position 6 is the field event Job.ended at position 4"), "\(now.stderr)")
    }
}

extension FieldEventCLITests {
    /// An application's own events named `Person.created` and `Person.deleted` (a JSON codec's
    /// vocabulary): `.deleted` is a repository's event name, but names alone do not make the
    /// type a repository's, so the store's export imports back.
    @Test func importTakesBackAnOwnVocabularyWithADeleteName() async throws {
        let temp = TemporaryDirectory("ek-own")
        let id = "\"stream\":{\"type\":\"Person\",\"id\":\"p1\",\"idType\":\"string\"}"
        let input = [
            "{\"position\":0,\"recordedAt\":null,\(id),\"version\":1,\"event\":\"Person.created\",\"schemaVersion\":1,\"codec\":\"json\",\"data\":{\"name\":\"Ann\"}}",
            "{\"position\":1,\"recordedAt\":null,\(id),\"version\":2,\"event\":\"Person.renamed\",\"schemaVersion\":1,\"codec\":\"json\",\"data\":{\"name\":\"Bo\"}}",
            "{\"position\":2,\"recordedAt\":null,\(id),\"version\":3,\"event\":\"Person.deleted\",\"schemaVersion\":1,\"codec\":\"none\",\"data\":null}",
        ]
        let file = temp.file("in.jsonl")
        try write(input, to: file)
        let first = temp.file("first")
        let imported = try run("import", first.path, file.path)
        #expect(imported.status == 0, "\(imported.stderr)")
        // Its export, into a new store and into a store of its own: the round trip.
        let exported = try exportLines(first.path)
        #expect(exported.count == 3)
        // Nor do history and replay take the rename for a field event of a repository's type.
        let history = try run("history", first.path, "Person", "p1")
        #expect(history.status == 0, "\(history.stderr)")
        #expect(!history.stdout.contains("field event"), "\(history.stdout)")
        let replay = try run("replay", first.path, "--position", "1", "--entity", "Person")
        #expect(replay.status == 1)
        #expect(replay.stderr.contains("Person's events are not a generic repository's (Person.created at position 0"), "\(replay.stderr)")
        let again = temp.file("again.jsonl")
        try write(exported, to: again)
        let second = temp.file("second")
        let back = try run("import", second.path, again.path)
        #expect(back.status == 0, "\(back.stderr)")
        try await expectSameEvents(first, second, times: false)
    }
}

extension FieldEventCLITests {
    /// A payload shaped as a field event's is no evidence alone: an application's own binary
    /// `Counter.set {"value":3}` starts a stream (said on stderr), while `Job.ended` (with a nil
    /// value here) is refused where the store shows Job is a repository's type.
    @Test func importJudgesAFieldEventByItsTypeNotItsPayloadAlone() async throws {
        let temp = TemporaryDirectory("ek-shape")
        let counter = "{\"position\":0,\"recordedAt\":null,\"stream\":{\"type\":\"Counter\",\"id\":\"c\",\"idType\":\"string\"},\"version\":1,\"event\":\"Counter.set\",\"schemaVersion\":1,\"codec\":\"binary\",\"data\":{\"value\":3}}"
        let file = temp.file("counter.jsonl")
        try write([counter], to: file)
        let own = try run("import", temp.file("counters").path, file.path)
        #expect(own.status == 0, "\(own.stderr)")
        #expect(own.stderr.contains("warning: \(file.path):1: Counter.set has a field event's payload"), "\(own.stderr)")
        #expect(try exportLines(temp.file("counters").path).count == 1)
        // Many streams starting so: one warning for the type, not one per stream.
        let many = (0..<3).map { counter.replacingOccurrences(of: "\"id\":\"c\"", with: "\"id\":\"m\($0)\"") }
        let manyFile = temp.file("many.jsonl")
        try write(many, to: manyFile)
        let summary = try run("import", temp.file("many").path, manyFile.path)
        #expect(summary.status == 0, "\(summary.stderr)")
        #expect(summary.stderr.components(separatedBy: "has a field event's payload").count == 2, "\(summary.stderr)")
        #expect(summary.stderr.contains("\(manyFile.path):1: Counter.set has a field event's payload ({\"value\": …}) and is the first event of Counter/m0 (or follows its delete) (and 2 more lines of Counter like it)"), "\(summary.stderr)")

        // A nil field event.
        let store = temp.file("jobs")
        do {
            let events = try EventStore.open(at: store, snapshotPolicy: .never)
            let jobs = try EventSourcedRepository<FieldJob>(store: events, typeName: "Job", schema: EntitySchema().recording(jobEnded))
            try await jobs.add(FieldJob(id: jobIDs[0], title: "build", start: t0, end: nil))
            try await jobs.apply(jobEnded, nil, to: jobIDs[0])
            try await events.close()
        }
        let lines = try exportLines(store.path)
        try #require(lines.count == 2)
        #expect(lines[1].contains("\"data\":{\"value\":null}"), "\(lines[1])")
        let first = lines[1].replacingOccurrences(of: jobIDs[0].uuidString, with: jobIDs[1].uuidString)
            .replacingOccurrences(of: "\"version\":2,", with: "\"version\":1,")
        let input = temp.file("nil.jsonl")
        try write([first], to: input)
        let refused = try run("import", store.path, input.path)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains(":1: Job.ended is a field event (Job is a generic repository's type)"), "\(refused.stderr)")
        // Alone, nothing shows Job is a repository's: imported, and said.
        let alone = try run("import", temp.file("alone").path, input.path)
        #expect(alone.status == 0, "\(alone.stderr)")
        #expect(alone.stderr.contains("Job.ended has a field event's payload"), "\(alone.stderr)")
    }
}

extension FieldEventCLITests {
    /// An application's own JSON vocabulary `Person.created`, `.updated` (a partial change) and
    /// `.deleted`: a JSON payload is never a field event's (a `Codable` field event's is binary),
    /// so import takes it and its export back; `history` calls `created` no field event and
    /// shows no state; `query` does not take the partial `updated {"age":4}` for the entity.
    @Test func ownJSONVocabularyWithUpdateIsNoRepositoryType() async throws {
        let temp = TemporaryDirectory("ek-own-upd")
        func line(_ position: Int, _ entity: String, _ version: Int, _ event: String, _ data: String) -> String {
            let codec = data == "null" ? "none" : "json"
            return "{\"position\":\(position),\"recordedAt\":null,\"stream\":{\"type\":\"Person\",\"id\":\"\(entity)\",\"idType\":\"string\"},\"version\":\(version),\"event\":\"Person.\(event)\",\"schemaVersion\":1,\"codec\":\"\(codec)\",\"data\":\(data)}"
        }
        let input = [
            line(0, "p1", 1, "created", "{\"name\":\"E\",\"age\":3}"),
            line(1, "p1", 2, "updated", "{\"age\":4}"),
            line(2, "p2", 1, "created", "{\"name\":\"C\"}"),
            line(3, "p2", 2, "updated", "{\"name\":\"D\"}"),
            line(4, "p2", 3, "deleted", "null"),
        ]
        let file = temp.file("in.jsonl")
        try write(input, to: file)
        let first = temp.file("first")
        let imported = try run("import", first.path, file.path)
        #expect(imported.status == 0, "\(imported.stderr)")
        let exported = try exportLines(first.path)
        #expect(exported.count == 5)
        let again = temp.file("again.jsonl")
        try write(exported, to: again)
        let second = temp.file("second")
        let back = try run("import", second.path, again.path)
        #expect(back.status == 0, "\(back.stderr)")
        try await expectSameEvents(first, second, times: false)

        let history = try run("history", first.path, "Person", "p1")
        #expect(history.status == 0, "\(history.stderr)")
        #expect(!history.stdout.contains("field event"), "\(history.stdout)")
        #expect(!history.stdout.contains("State after"), "\(history.stdout)")

        // Not a wrong answer with exit 0: the type's events are not a repository's.
        let query = try run("query", first.path, "--type", "Person")
        #expect(query.status != 0)
        #expect(query.stderr.contains("Person's events are not a generic repository's (Person.created at position 0, whose payload is JSON"), "\(query.stderr)")
        let filtered = try run("query", first.path, "--type", "Person", "--where", "name=E")
        #expect(filtered.status != 0)
        #expect(!filtered.stdout.contains("\"age\":4"), "\(filtered.stdout)")
    }
}
