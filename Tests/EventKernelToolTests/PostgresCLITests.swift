#if PostgreSQL
import Activities
import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import PostgresLog
import Testing

/// The CLI on a PostgreSQL log: `copy` between a directory and the server, and the read
/// commands with `--postgres URL`.
@Suite("eventkernel on PostgreSQL")
struct PostgresCLITests {
    /// The test server's URL for `schema`.
    func url(_ configuration: PostgresLog.Configuration) throws -> String {
        let base = try #require(PostgresTestDatabase.url)
        return base + (base.contains("?") ? "&" : "?") + "schema=\(configuration.schema)"
    }

    @Test("copy round trip local → PostgreSQL → local: identical exports, verify intact, the same answers to --postgres")
    func copyRoundTrip() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let temp = TemporaryDirectory("ekcli-pg")
        let source = temp.file("source").path, back = temp.file("back").path
        let postgres = try url(configuration)
        #expect(try run("demo", "--dir", source, "--activities", "1500", "--repetitions", "5").status == 0)
        let toServer = try run("copy", "--from", source, "--to", postgres, "--batch", "500")
        #expect(toServer.status == 0, "\(toServer.stderr)")
        #expect(toServer.stderr.contains("copied"))
        let toDirectory = try run("copy", "--from", postgres, "--to", back)
        #expect(toDirectory.status == 0, "\(toDirectory.stderr)")

        for format in ["events", "activities"] {
            let original = try run("export", "--dir", source, "--format", format)
            #expect(original.status == 0 && !original.stdout.isEmpty)
            #expect(try run("export", "--postgres", postgres, "--format", format).stdout == original.stdout, "\(format)")
            #expect(try run("export", "--dir", back, "--format", format).stdout == original.stdout, "\(format)")
        }
        let verified = try run("verify", "--dir", back)
        #expect(verified.status == 0 && verified.stdout.contains("intact"), "\(verified.stdout)")
        let verifiedServer = try run("verify", "--postgres", postgres, "--json")
        #expect(verifiedServer.status == 0, "\(verifiedServer.stdout) \(verifiedServer.stderr)")
        #expect((try jsonObject(verifiedServer.stdout) as? [String: Any])?["intact"] as? Bool == true)

        // The read commands answer from the server as from the directory.
        for arguments in [["query", "--type", "sleep", "--limit", "20", "--json"], ["replay", "--position", "700", "--json"],
                          ["replay", "--as-of", "2025-06-01", "--type", "feeding", "--json"], ["tail", "--from", "1200", "--json"]] {
            let local = try run(arguments + ["--dir", source])
            let server = try run(arguments + ["--postgres", postgres])
            #expect(local.status == 0 && server.status == 0, "\(arguments): \(server.stderr)")
            #expect(server.stdout == local.stdout, "\(arguments)")
        }
        let someID = try #require((try jsonObject(try run("query", "--dir", source, "--limit", "1", "--json").stdout) as? [[String: Any]])?.first?["id"] as? String)
        #expect(try run("history", "--postgres", postgres, someID).stdout == run("history", "--dir", source, someID).stdout)
        let inspected = try run("inspect", "--postgres", postgres, "--json")
        #expect(inspected.status == 0)
        let totals = (try jsonObject(inspected.stdout) as? [String: Any])?["totals"] as? [String: Any]
        let events = try SegmentedLog.openReadOnly(at: URL(filePath: source)).bounds.nextPosition
        #expect(totals?["events"] as? Int == Int(events))

        // A copy never writes into a store that holds events.
        let again = try run("copy", "--from", source, "--to", postgres)
        #expect(again.status == 1 && again.stderr.contains("already holds"), "\(again.stderr)")
        let intoFull = try run("copy", "--from", postgres, "--to", back)
        #expect(intoFull.status == 1 && intoFull.stderr.contains("not empty"), "\(intoFull.stderr)")
    }

    /// Atomic appends of 1 to 5 events (each one batch of the local log): a copy to the server
    /// with --batch 4 gathers whole appends only (the five-event ones alone), and a restore
    /// from the server (issue 28 item 4) at its end, at a position inside an append (rounded
    /// down to its start, said) and at a recording time holds exactly that prefix, verifies
    /// and exports as the source does.
    @Test("restore from PostgreSQL at its end, a position and a time; copy never splits an atomic append")
    func restoreFromPostgres() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let temp = TemporaryDirectory("ekcli-pg-restore")
        let source = temp.file("source")
        let base = Date(timeIntervalSince1970: 1_800_000_000)
        var appends: [Range<LogPosition>] = []
        do {
            let store = try EventStore.open(at: source, snapshotPolicy: .never)
            var next: LogPosition = 0
            for index in 0..<30 {
                let size = index % 5 + 1
                let events = (0..<size).map { offset in
                    PendingEvent(EncodedEvent(eventType: "Counted", schemaVersion: 1, stream: StreamID("Counted", .string("c\(index)-\(offset)")),
                                              payload: Array("event \(index).\(offset)".utf8)), recordedAt: base + Double(index))
                }
                let written = try await store.append(events)
                #expect(written.first?.position == next && written.count == size)
                appends.append(next..<next + LogPosition(size))
                next += LogPosition(size)
            }
            try await store.close()
        }
        let postgres = try url(configuration)
        let copied = try run("copy", "--from", source.path, "--to", postgres, "--batch", "4")
        #expect(copied.status == 0, "\(copied.stderr)")
        let log = try await PostgresLog.open(configuration)
        let chunks = try await log.batches(endingAtOrBefore: .max, atMost: 1)
        try await log.close()
        let starts = Set(appends.map(\.lowerBound))
        #expect(chunks.allSatisfy { starts.contains($0.lowerBound) }, "a copied chunk begins inside an append: \(chunks)")
        #expect(chunks.allSatisfy { $0.count <= 4 || appends.contains($0) }, "\(chunks)")

        let whole = temp.file("whole")
        let atEnd = try run("restore", postgres, whole.path, "--json")
        #expect(atEnd.status == 0, "\(atEnd.stderr)")
        #expect(try run("verify", whole.path).status == 0)
        #expect(try run("export", "--dir", whole.path, "--format", "events").stdout == run("export", "--dir", source.path, "--format", "events").stdout)

        // Inside the append of five at index 4 (positions 10..<15).
        let five = appends[4]
        #expect(five.count == 5)
        let inside = temp.file("inside")
        let rounded = try run("restore", postgres, "--to", inside.path, "--position", "\(five.lowerBound + 2)", "--json")
        #expect(rounded.status == 0, "\(rounded.stderr)")
        #expect(rounded.stderr.contains("inside an atomic append that starts at \(five.lowerBound)"), "\(rounded.stderr)")
        let object = try #require(try jsonObject(rounded.stdout) as? [String: Any])
        #expect(object["position"] as? Int == Int(five.lowerBound))
        #expect(object["requestedPosition"] as? Int == Int(five.lowerBound + 2))
        #expect(try SegmentedLog.openReadOnly(at: inside).bounds.nextPosition == five.lowerBound)

        // At the recording time of index 7: every append up to it, whole.
        let timed = temp.file("timed")
        let atTime = try run("restore", postgres, timed.path, "--as-of", "2027-01-15T08:00:07Z", "--json")
        #expect(atTime.status == 0, "\(atTime.stderr)")
        #expect(try SegmentedLog.openReadOnly(at: timed).bounds.nextPosition == appends[7].upperBound)

        // Past the end, and into a directory that is not empty: exit 1, nothing written.
        let past = try run("restore", postgres, temp.file("past").path, "--position", "10000")
        #expect(past.status == 1 && past.stderr.contains("past the end"), "\(past.stderr)")
        #expect(!FileManager.default.fileExists(atPath: temp.file("past").path))
        let full = try run("restore", postgres, whole.path)
        #expect(full.status == 1 && full.stderr.contains("not empty"), "\(full.stderr)")
    }

    /// `copy` into a directory is a restore of the whole log: SIGKILL at random instants leaves
    /// either no destination or the whole copy (never a prefix that opens as a shorter store),
    /// and a copy keeps the source's events, positions and batch boundaries.
    @Test("copy into a directory: killed, it leaves no destination or the whole copy")
    func killedLocalCopiesLeaveNoDestinationOrTheWholeCopy() throws {
        let temp = TemporaryDirectory("ekcli-copy-kill")
        let source = temp.file("demo").path
        #expect(try run("demo", "--dir", source, "--activities", "10000", "--repetitions", "10").status == 0)
        let expected = try run("export", "--dir", source, "--format", "events").stdout
        #expect(!expected.isEmpty)
        let probe = temp.file("probe")
        let started = ContinuousClock.now
        let copied = try run("copy", "--from", source, "--to", probe.path, "--batch", "64")
        #expect(copied.status == 0, "\(copied.stderr)")
        var delays = KillDelays(measured: ContinuousClock.now - started, seed: 31)
        #expect(try run("export", "--dir", probe.path, "--format", "events").stdout == expected)
        // Whole atomic appends, as the source holds them: every batch of the copy begins where one
        // of the source's does.
        let sourceBatches = Set(try SegmentedLog.openReadOnly(at: URL(filePath: source)).batches(endingAtOrBefore: .max, atMost: 1).map(\.lowerBound))
        let copyBatches = try SegmentedLog.openReadOnly(at: probe).batches(endingAtOrBefore: .max, atMost: 1)
        #expect(copyBatches.count > 1 && copyBatches.allSatisfy { sourceBatches.contains($0.lowerBound) }, "a copied batch begins inside an append")
        // Into a directory that holds something: exit 1, nothing written.
        let intoFull = try run("copy", "--from", source, "--to", probe.path)
        #expect(intoFull.status == 1 && intoFull.stderr.contains("not empty"), "\(intoFull.stderr)")

        var killedMidway = 0
        // At least six rounds, and on until a kill has landed midway (at most forty).
        for round in 0..<40 where round < 6 || killedMidway == 0 {
            let dest = temp.file("copy\(round)")
            let (killed, ran) = try runKilled(["copy", "--from", source, "--to", dest.path, "--batch", "64"], after: delays.next(),
                                              stdout: temp.file("out\(round)"), stderr: temp.file("err\(round)"))
            delays.record(killed: killed, ran: ran)
            if killed { killedMidway += 1 }
            guard FileManager.default.fileExists(atPath: dest.path) else { continue }
            #expect(try run("verify", dest.path).status == 0)
            #expect(try run("export", "--dir", dest.path, "--format", "events").stdout == expected, "a killed copy left a store of another length")
        }
        #expect(killedMidway > 0, "no kill landed while a copy ran")
    }

    @Test("tail --follow --postgres prints what an instance appends")
    func tailFollowsTheServer() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let temp = TemporaryDirectory("ekcli-pg-tail")
        let writer = try EventSourcedActivityRepository(store: try await EventStore.open(postgres: configuration))
        try await writer.add(ActivityModel(id: ids[0], startDate: t0, type: "sleep"))
        let out = temp.file("tail.out")
        let process = try makeProcess(["tail", "--postgres", try url(configuration), "--follow", "--json"], stdout: out, stderr: temp.file("tail.err"))
        try process.run()
        func output() -> String { (try? String(contentsOf: out, encoding: .utf8)) ?? "" }
        #expect(try await eventually(every: .milliseconds(50)) { output().contains(ids[0].uuidString) })
        try await writer.add(ActivityModel(id: ids[5], startDate: t0 + 86_400, type: "bath"))
        #expect(try await eventually(every: .milliseconds(50)) { output().contains(ids[5].uuidString) }, "\(output())")
        process.terminate()
        process.waitUntilExit()
        closeOutputFiles(of: process)
        try await writer.close()
        #expect(output().split(separator: "\n").count == 2)
    }

    @Test("an unreachable server: exit status 2, the host named")
    func unreachable() throws {
        _ = try PostgresTestDatabase.configuration()
        let result = try run("query", "--postgres", "postgres://nobody@127.0.0.1:1/nothing?sslmode=disable")
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("127.0.0.1:1"), "\(result.stderr)")
        let both = try run("query", "--postgres", "postgres://x@y/z", "--dir", "/tmp")
        #expect(both.status == 1 && both.stderr.contains("not both"), "\(both.stderr)")
    }
}
#endif
