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
            let refused = try attempt([line])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains(":1: Job.ended is a field event (its payload is a field event's"), "\(refused.stderr)")
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
