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
