import Activities
import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// `eventkernel compact` (issue 27, items 3 and 6): purged streams of any entity type leave the
/// log, the read commands show receipts in their place, and `inspect` says what is left to do.
@Suite struct CompactCLITests {
    private struct Note: Identifiable, Codable, Sendable, Equatable {
        var id: String
        var text: String
    }

    @Test func compactForgetsPurgedNotesAndActivitiesAndTheReadCommandsShowReceipts() async throws {
        let directory = TemporaryDirectory("ek-compact-cli")
        var configuration = EventStore.Configuration()
        configuration.log = SegmentedLog.Configuration(segmentSize: 4_096, compression: .none)
        let repository = try EventSourcedActivityRepository.open(at: directory.url, configuration: configuration)
        let notes = try EventSourcedRepository<Note>(store: repository.store, typeName: "Note")
        let secret = "secret-\(UUID().uuidString)"
        for i in 0..<60 { try await notes.add(Note(id: i == 7 ? secret : "n\(i)", text: String(repeating: "x", count: 50))) }
        let activity = UUID()
        try await repository.add(ActivityModel(id: activity, startDate: Date(timeIntervalSince1970: 1_735_689_600), endDate: nil, type: .sleep))
        try await repository.close()

        #expect(try run(["purge", directory.url.path, secret, "--type", "Note", "--yes", "--actor", "dpo"]).status == 0)
        #expect(try run(["purge", directory.url.path, activity.uuidString, "--yes"]).status == 0)
        // More events after the purges: their segment is sealed.
        let writer = try EventSourcedActivityRepository.open(at: directory.url, configuration: configuration)
        let more = try EventSourcedRepository<Note>(store: writer.store, typeName: "Note")
        for i in 60..<120 { try await more.add(Note(id: "n\(i)", text: String(repeating: "y", count: 50))) }
        try await writer.close()

        let inspect = try run(["inspect", directory.url.path, "--json"])
        let before = try #require(try JSONSerialization.jsonObject(with: Data(inspect.stdout.utf8)) as? [String: Any])
        #expect(before["purgedStreams"] as? Int == 2)
        let plan = try #require(before["compaction"] as? [String: Int], "\(inspect.stdout)")
        #expect(plan["forgotten"] == 0 && plan["ready"].map { $0 + (plan["waiting"] ?? 0) } == 2, "\(inspect.stdout)")

        let refused = try run(["compact", directory.url.path])
        #expect(refused.status != 0 && refused.stderr.contains("--yes"))
        let compact = try run(["compact", directory.url.path, "--yes", "--json"])
        #expect(compact.status == 0, "\(compact.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(compact.stdout.utf8)) as? [String: Any])
        #expect(report["streamsForgotten"] as? Int == 2 && report["receiptsWritten"] as? Int == 2 && report["eventsRemoved"] as? Int == 2)
        #expect((report["bytesAfter"] as? Int ?? .max) < (report["bytesBefore"] as? Int ?? 0))

        let export = try run(["export", directory.url.path])
        #expect(export.status == 0)
        #expect(!export.stdout.contains(secret) && !export.stdout.contains(activity.uuidString.lowercased()) && !export.stdout.contains(activity.uuidString))
        let receipts = export.stdout.split(separator: "\n").filter { $0.contains("\"$forgotten\"") }
        #expect(receipts.count == 2, "\(export.stdout.prefix(2_000))")
        #expect(receipts.contains { $0.contains("\"entityType\":\"Note\"") && $0.contains("dpo") })
        #expect(receipts.contains { $0.contains("\"entityType\":\"activity\"") })
        let verify = try run(["verify", directory.url.path])
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        let after = try #require(try JSONSerialization.jsonObject(with: Data(try run(["inspect", directory.url.path, "--json"]).stdout.utf8)) as? [String: Any])
        #expect(after["purgedStreams"] as? Int == 2)
        #expect((after["compaction"] as? [String: Int]) == ["forgotten": 2, "ready": 0, "waiting": 0])
        // The ids stay refused, through the CLI's own writes too.
        let again = try run(["purge", directory.url.path, secret, "--type", "Note", "--yes", "--json"])
        #expect(again.status == 1 || again.stdout.contains("alreadyPurged"), "\(again.stdout)\(again.stderr)")
        let reopened = try EventSourcedActivityRepository.open(at: directory.url, configuration: configuration)
        await #expect(throws: RepositoryError.self) {
            try await reopened.add(ActivityModel(id: activity, startDate: Date(timeIntervalSince1970: 0), endDate: nil, type: .sleep))
        }
        try await reopened.close()
    }
}

/// SIGKILL of `eventkernel compact` at random instants (issue 27's crash bar): after each kill
/// the store verifies, every live entity answers as before, every purged id is refused, and
/// the next compaction finishes the work, leaving no byte of a purged id in the directory.
@Suite("eventkernel compact killed")
struct CompactKillTests {
    private struct Note: Identifiable, Codable, Sendable, Equatable {
        var id: String
        var text: String
    }

    private static let configuration: EventStore.Configuration = {
        var configuration = EventStore.Configuration()
        configuration.log = SegmentedLog.Configuration(segmentSize: 4_096, compression: .none)
        return configuration
    }()

    /// Opens the store with the notes' repository: its live notes, and whether each purged id
    /// is refused.
    private static func check(_ store: URL, live: [Note], purged: [String], round: Int) async throws {
        let repository = try EventSourcedActivityRepository.open(at: store, configuration: configuration)
        let notes = try EventSourcedRepository<Note>(store: repository.store, typeName: "Note")
        #expect(notes.fetchAll().sorted { $0.id < $1.id } == live, "round \(round): the live notes")
        for id in purged { #expect(repository.store.isPurged(StreamID("Note", .string(id))), "round \(round): \(id) is not refused") }
        try await repository.close()
    }

    @Test func killedCompactionsLoseNothingLiveAndForgetEverythingOnceFinished() async throws {
        let temp = TemporaryDirectory("ek-compact-kill")
        let template = temp.file("template")
        var purged: [String] = []
        let live: [Note]
        do {
            // The one snapshot is written before the purges (as a periodic one would be): after a
            // crash midway through a compaction it must not bring a purged note back. Notes are
            // updated later in segments after their add, so that a rewrite removing a stream's
            // first events before its later ones would leave an update with no add to fold.
            var configuration = Self.configuration
            configuration.snapshots = SnapshotPolicy(everyEvents: nil, onClose: false)
            let repository = try EventSourcedActivityRepository.open(at: template, configuration: configuration)
            let notes = try EventSourcedRepository<Note>(store: repository.store, typeName: "Note")
            var ids: [String] = []
            for i in 0..<400 {
                let id = "person-\(i)-\(UUID().uuidString)"
                try await notes.add(Note(id: id, text: String(repeating: "k", count: 40 + i % 20)))
                ids.append(id)
                if i % 2 == 0 { purged.append(id) }
            }
            try await repository.store.writeSnapshots()
            for id in ids where id.hasPrefix("person-1") || id.hasPrefix("person-2") {
                try await notes.update(Note(id: id, text: "updated " + String(repeating: "u", count: 40)))
            }
            for id in purged { _ = try await notes.purge(id: id) }
            for i in 400..<500 { try await notes.add(Note(id: "late-\(i)", text: String(repeating: "l", count: 50))) }
            live = notes.fetchAll().sorted { $0.id < $1.id }
            try await repository.close()
        }
        // An unkilled compaction's duration, on a copy: the kills are spread over it.
        let probe = temp.file("probe")
        // Processes are waited for, and files scanned, on a thread of their own: a test that
        // holds a cooperative thread that long starves every other test's tasks (2 cores).
        let (whole, duration) = try await onOwnThread { () throws -> (RunResult, Duration) in
            try FileManager.default.copyItem(at: template, to: probe)
            let started = ContinuousClock.now
            let whole = try run(["compact", probe.path, "--yes"])
            return (whole, ContinuousClock.now - started)
        }
        var delays = KillDelays(measured: duration, seed: 27)
        #expect(whole.status == 0, "\(whole.stderr)")
        let purgedIDs = purged
        #expect(try await onOwnThread { try purgedIDs.prefix(20).allSatisfy { try files(in: probe, holding: $0.utf8).isEmpty } })

        var killedMidway = 0
        // At least eight rounds, and on until three kills have landed midway (at most thirty);
        // under sanitizers (each round two compactions, a verify and a reopen, 5-20x slower)
        // three rounds, and on until one kill landed midway (at most twelve).
        let (minimumRounds, kills, maximumRounds) = testScale.pick((8, 3, 30), small: (3, 1, 12))
        for round in 0..<maximumRounds where round < minimumRounds || killedMidway < kills {
            let store = temp.file("store\(round)")
            let delay = delays.next()
            let (killed, ran, verify) = try await onOwnThread { () throws -> (Bool, Duration, RunResult) in
                try FileManager.default.copyItem(at: template, to: store)
                let (killed, ran) = try runKilled(["compact", store.path, "--yes"], after: delay,
                                                  stdout: temp.file("out\(round)"), stderr: temp.file("err\(round)"))
                return (killed, ran, try run(["verify", store.path]))
            }
            delays.record(killed: killed, ran: ran)
            if killed { killedMidway += 1 }
            #expect(verify.status == 0, "round \(round): \(verify.stdout)\(verify.stderr)")
            try await Self.check(store, live: live, purged: purged, round: round)
            let again = try await onOwnThread { try run(["compact", store.path, "--yes"]) }
            #expect(again.status == 0, "round \(round): \(again.stderr)")
            try await Self.check(store, live: live, purged: purged, round: round)
            let left = try await onOwnThread { try purgedIDs.filter { try !files(in: store, holding: $0.utf8).isEmpty } }
            #expect(left.isEmpty, "round \(round): \(left.count) purged ids left in the store")
            try FileManager.default.removeItem(at: store)
        }
        #expect(killedMidway > 0, "no kill landed while a compaction ran")
    }
}
