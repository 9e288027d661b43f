import EventKernel
@testable import EventLog
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
import EventKernelTestSupport

@Suite("eventkernel consumers and tail --consumer (issue 29)")
struct ConsumersCLITests {
    /// The first column of each line: the position.
    private func positions(_ result: RunResult) -> [String] {
        result.stdout.split(separator: "\n").map { $0.split(separator: " ").first.map(String.init) ?? "" }
    }

    @Test func tailWithAConsumerResumesWhereItLeftOffAndConsumersListsIt() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)   // 5 events
        let first = try run("tail", store, "--consumer", "feed")
        #expect(first.status == 0, "\(first.stderr)")
        #expect(positions(first) == ["0", "1", "2", "3", "4"])
        // Committed: a second tail prints nothing new.
        #expect(try run("tail", store, "--consumer", "feed").stdout.isEmpty)
        #expect(try ConsumerDirectory(storeDirectory: URL(filePath: store)).checkpoint(named: "feed")?.committed == 5)

        // A new consumer starts at --from.
        #expect(positions(try run("tail", store, "--consumer", "late", "--from", "3")) == ["3", "4"])

        let list = try run("consumers", store, "--json")
        #expect(list.status == 0, "\(list.stderr)")
        let rows = try #require(try jsonObject(list.stdout) as? [[String: Any]])
        #expect(rows.map { $0["name"] as? String } == ["feed", "late"])
        #expect(rows.map { $0["committed"] as? Int } == [5, 5])
        #expect(rows.map { $0["lag"] as? Int } == [0, 0])
        #expect(rows.map { $0["parked"] as? Int } == [0, 0])
        #expect(try run("consumers", "list", store).stdout.contains("feed"))

        // Reset, then tail again from there.
        let reset = try run("consumers", "reset", store, "feed", "--to", "2")
        #expect(reset.status == 0, "\(reset.stderr)")
        #expect(reset.stdout.contains("5 -> 2"), "\(reset.stdout)")
        #expect(positions(try run("tail", store, "--consumer", "feed")) == ["2", "3", "4"])
        #expect(try run("consumers", "reset", store, "feed", "--to", "beginning").status == 0)
        #expect(try ConsumerDirectory(storeDirectory: URL(filePath: store)).checkpoint(named: "feed")?.committed == 0)
        #expect(try run("consumers", "reset", store, "feed", "--to", "2099-01-01").status == 0)
        #expect(try ConsumerDirectory(storeDirectory: URL(filePath: store)).checkpoint(named: "feed")?.committed == 5)

        // Bad input: a position past the end, a name with "/", -n with --consumer.
        let past = try run("consumers", "reset", store, "feed", "--to", "6")
        #expect(past.status == 1 && past.stderr.contains("past the log's end"), "\(past.stderr)")
        let slash = try run("tail", store, "--consumer", "a/b")
        #expect(slash.status == 1 && slash.stderr.contains("consumer name"), "\(slash.stderr)")
        #expect(try run("consumers", "reset", store, "a/b", "--to", "0").status == 1)
        #expect(try run("tail", store, "--consumer", "feed", "-n", "2").status == 1)
        let nonsense = try run("consumers", "reset", store, "feed", "--to", "yesterday")
        #expect(nonsense.status == 1 && nonsense.stderr.contains("--to"), "\(nonsense.stderr)")
        // A negative position reaches the check (not read as a flag: "Missing value").
        let negative = try run("consumers", "reset", store, "feed", "--to", "-1")
        #expect(negative.status == 1 && negative.stderr.contains("--to \"-1\" is not a position"), "\(negative.stderr)")
    }

    @Test func aTailKilledBetweenItsFlushAndItsCommitPrintsThoseEventsAgain() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)   // positions 0...4
        let checkpoints = ConsumerDirectory(storeDirectory: URL(filePath: store))
        // A first tail commits 0...4.
        #expect(positions(try run("tail", store, "--consumer", "feed")) == ["0", "1", "2", "3", "4"])
        let more = temp.file("more.jsonl")
        try write([activityLine(3, start: "2025-01-04T10:00:00Z", end: nil, type: "bath"),
                   activityLine(4, start: "2025-01-05T10:00:00Z", end: nil, type: "bath")], to: more)
        #expect(try run("import", store, more.path).status == 0)

        // The tool pauses after the flush, before the commit: killed there, 5 and 6 were
        // printed and not committed.
        let out = temp.file("follow.out"), err = temp.file("follow.err")
        let follower = try makeProcess(["tail", store, "--consumer", "feed", "--follow", "--json"], stdout: out, stderr: err)
        follower.environment?["EVENTKERNEL_TEST_TAIL_PAUSE_BEFORE_COMMIT"] = "30"
        try follower.run()
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline, ((try? String(contentsOf: out, encoding: .utf8)) ?? "").split(separator: "\n").count < 2 { usleep(10_000) }
        kill(follower.processIdentifier, SIGKILL)
        follower.waitUntilExit()
        closeOutputFiles(of: follower)
        #expect(try String(contentsOf: out, encoding: .utf8).split(separator: "\n").count == 2)
        #expect(try checkpoints.checkpoint(named: "feed")?.committed == 5)
        // The next tail prints them again: nothing printed-but-uncommitted is lost.
        #expect(positions(try run("tail", store, "--consumer", "feed")) == ["5", "6"])
        #expect(try checkpoints.checkpoint(named: "feed")?.committed == 7)
    }

    @Test func aTailPrintsAndCommitsAtMostAThousandEventsAtATime() async throws {
        let temp = TemporaryDirectory()
        let directory = temp.file("store")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        for batch in 0..<25 {
            try await store.append((0..<100).map { i in
                PendingEvent(EncodedEvent(eventType: "Counted", schemaVersion: 1, stream: StreamID("Counted", .string("e\(batch * 100 + i)")), payload: [1]))
            })
        }
        try await store.close()
        // Paused after its first chunk: that chunk, and only it, was read and printed.
        let out = temp.file("chunk.out"), err = temp.file("chunk.err")
        let tail = try makeProcess(["tail", directory.path, "--consumer", "feed", "--json"], stdout: out, stderr: err)
        tail.environment?["EVENTKERNEL_TEST_TAIL_PAUSE_BEFORE_COMMIT"] = "30"
        try tail.run()
        let lines = { ((try? String(contentsOf: out, encoding: .utf8)) ?? "").split(separator: "\n").count }
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline, lines() < 1000 { usleep(10_000) }
        usleep(300_000)
        kill(tail.processIdentifier, SIGKILL)
        tail.waitUntilExit()
        closeOutputFiles(of: tail)
        #expect(lines() == 1000)
        let checkpoints = ConsumerDirectory(storeDirectory: directory)
        #expect(try checkpoints.checkpoint(named: "feed")?.committed == 0)
        // Unpaused, it prints and commits everything, chunk by chunk.
        let all = try run("tail", directory.path, "--consumer", "feed")
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.stdout.split(separator: "\n").count == 2500)
        #expect(try checkpoints.checkpoint(named: "feed")?.committed == 2500)
    }

    @Test func aTailWhoseOutputFailsCommitsNothingAndFails() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let err = temp.file("err")
        let process = try makeProcess(["tail", store, "--consumer", "feed", "--from", "0"], stdout: temp.file("unused"), stderr: err)
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/full")
        try process.run()
        process.waitUntilExit()
        closeOutputFiles(of: process)
        let stderr = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        #expect(process.terminationStatus == 4, "\(stderr)")
        #expect(stderr.contains("standard output"), "\(stderr)")
        // Created at 0 (before anything was printed), never advanced.
        #expect(try ConsumerDirectory(storeDirectory: URL(filePath: store)).checkpoint(named: "feed")?.committed == 0)
    }

    /// A newcomer's probe: with standard output a pipe whose reader has gone, `tail --consumer`
    /// exited 0 (its SIGPIPE handler ended the process as a plain tail's does), where the docs
    /// promise exit 4 and nothing committed; a plain tail writing to a full disk exited 0 too.
    @Test func aTailWritingToAClosedPipeOrAFullDiskFails() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let err = temp.file("err")
        let pipe = Pipe()
        try pipe.fileHandleForReading.close()
        let process = try makeProcess(["tail", store, "--consumer", "feed", "--from", "0"], stdout: temp.file("unused"), stderr: err)
        process.standardOutput = pipe.fileHandleForWriting
        try process.run()
        try pipe.fileHandleForWriting.close()
        process.waitUntilExit()
        closeOutputFiles(of: process)
        let stderr = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        #expect(process.terminationReason == .exit && process.terminationStatus == 4, "\(process.terminationReason) \(process.terminationStatus): \(stderr)")
        #expect(stderr.contains("standard output"), "\(stderr)")
        #expect(try ConsumerDirectory(storeDirectory: URL(filePath: store)).checkpoint(named: "feed")?.committed == 0)
        // A plain tail to a full disk: exit 4, saying so.
        let full = try makeProcess(["tail", store], stdout: temp.file("unused2"), stderr: err)
        full.standardOutput = FileHandle(forWritingAtPath: "/dev/full")
        try full.run()
        full.waitUntilExit()
        closeOutputFiles(of: full)
        let fullError = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        #expect(full.terminationStatus == 4 && fullError.contains("standard output"), "\(full.terminationStatus): \(fullError)")
    }

    @Test func aConsumerInUseRefusesTheCLIsResetSkipAndTail() async throws {
        let temp = TemporaryDirectory()
        let storePath = try importedStore(temp)
        let store = try EventStore.open(at: URL(filePath: storePath), snapshotPolicy: .never)
        _ = try store.consumer(named: "app")
        for arguments in [["consumers", "reset", storePath, "app", "--to", "0"], ["consumers", "parked", storePath, "app", "--skip", "1"],
                          ["consumers", "parked", storePath, "app", "--retry", "all"], ["tail", storePath, "--consumer", "app"]] {
            let refused = try run(arguments)
            #expect(refused.status == 2 && refused.stderr.contains("in use"), "\(arguments): \(refused.stderr)")
        }
        try await store.close()
        // Closed: the lock is released.
        #expect(try run("consumers", "reset", storePath, "app", "--to", "0").status == 0)
    }

    @Test func verifyAndTailReportACheckpointOfAnotherHistory() throws {
        let temp = TemporaryDirectory()
        let storePath = try importedStore(temp)   // 5 events
        // A checkpoint committed after a different event at position 4 (as the log before a cut
        // that lost 4 and grew again): same end, other history.
        // The same import, at another time: the event at 4 has another timestamp.
        let other = TemporaryDirectory()
        let otherPath = try importedStore(other)
        #expect(try run("tail", otherPath, "--consumer", "feed").status == 0)
        try FileManager.default.createDirectory(atPath: storePath + "/consumers", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: otherPath + "/consumers/feed.checkpoint", toPath: storePath + "/consumers/feed.checkpoint")
        let verify = try run("verify", storePath)
        #expect(verify.status == 3 && verify.stdout.contains("another history"), "\(verify.stdout)")
        let tail = try run("tail", storePath, "--consumer", "feed")
        #expect(tail.status == 3 && tail.stderr.contains("another history") && tail.stdout.isEmpty, "\(tail.stderr)")
        #expect(try run("consumers", "reset", storePath, "feed", "--to", "4").status == 0)
        #expect(positions(try run("tail", storePath, "--consumer", "feed")) == ["4"])
    }

    @Test func parkedEventsAreListedAndSkipped() async throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let directory = ConsumerDirectory(storeDirectory: URL(filePath: store))
        try directory.write(ConsumerCheckpoint(name: "mailer", committed: 5, committedAt: .now()))
        try directory.writeParked([
            ParkedEvent(position: 1, stream: "activity/x", eventType: "added", errorType: "Mail.Error", error: "smtp down", attempts: 5, parkedAt: .now()),
            ParkedEvent(position: 3, stream: "activity/y", eventType: "ended", errorType: "Mail.Error", error: "bad address", attempts: 5, parkedAt: .now()),
        ], named: "mailer")
        let listed = try run("consumers", "parked", store, "mailer", "--format", "jsonl")
        #expect(listed.status == 0, "\(listed.stderr)")
        let lines = listed.stdout.split(separator: "\n").compactMap { try? jsonObject(String($0)) as? [String: Any] }
        #expect(lines.map { $0["position"] as? Int } == [1, 3])
        #expect(lines.map { $0["error"] as? String } == ["smtp down", "bad address"])
        #expect(lines.allSatisfy { $0["attempts"] as? Int == 5 })
        #expect((try jsonObject(try run("consumers", store, "--json").stdout) as? [[String: Any]])?.first?["parked"] as? Int == 2)

        let skipped = try run("consumers", "parked", store, "mailer", "--skip", "1")
        #expect(skipped.status == 0, "\(skipped.stderr)")
        #expect(try directory.parked(named: "mailer").map(\.position) == [3])
        let again = try run("consumers", "parked", store, "mailer", "--skip", "1")
        #expect(again.status == 1 && again.stderr.contains("no parked event at position 1"), "\(again.stderr)")
        #expect(try run("consumers", "parked", store, "mailer", "--skip", "3").status == 0)
        #expect(try run("consumers", "parked", store, "mailer").stdout.contains("no parked events"))
    }

    /// `--retry` marks parked events (the handler is the application's); the application's
    /// next run hands them to its handler, and what it takes leaves the list.
    @Test func parkedEventsAreMarkedForRetryAndTheNextRunRetriesThem() async throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)   // 5 events
        let directory = ConsumerDirectory(storeDirectory: URL(filePath: store))
        try directory.write(ConsumerCheckpoint.bound(name: "mailer", committed: 5, in: SegmentedLog.openReadOnly(at: URL(filePath: store))))
        // Parked as a consumer parks them: the events at 1, 2 and 3 as the log holds them.
        let reading = try EventStore.open(at: URL(filePath: store), snapshotPolicy: .never)
        try directory.writeParked(try reading.read(from: 1, limit: 3).map {
            ParkedEvent(position: $0.position, stream: $0.stream.description, eventType: $0.eventType, errorType: "Mail.Error",
                        error: "smtp down", attempts: 5, parkedAt: .now())
        }, named: "mailer")
        try await reading.close()

        let marked = try run("consumers", "parked", store, "mailer", "--retry", "3")
        #expect(marked.status == 0 && marked.stdout.contains("marked the parked event at position 3 for a retry; 1 of 3"), "\(marked.stdout)\(marked.stderr)")
        #expect(try run("consumers", "parked", store, "mailer", "--retry", "3").stdout.contains("already marked"))
        // A mistyped consumer is no consumer: exit 1, not "0 marked".
        let mistyped = try run("consumers", "parked", store, "mailre", "--retry", "all")
        #expect(mistyped.status == 1 && mistyped.stderr.contains("no consumer named \"mailre\""), "\(mistyped.stderr)")
        // Listing it too (a newcomer's probe: "consumer mailre has no parked events", exit 0).
        let listedMistyped = try run("consumers", "parked", store, "mailre")
        #expect(listedMistyped.status == 1 && listedMistyped.stderr.contains("no consumer named \"mailre\""), "\(listedMistyped.stdout)\(listedMistyped.stderr)")
        #expect(try directory.parked(named: "mailer").map(\.retryRequested) == [false, false, true])
        let listed = try run("consumers", "parked", store, "mailer", "--format", "jsonl")
        let lines = listed.stdout.split(separator: "\n").compactMap { try? jsonObject(String($0)) as? [String: Any] }
        #expect(lines.map { $0["retry_requested"] as? Bool } == [false, false, true])
        #expect(try run("consumers", "parked", store, "mailer").stdout.contains("requested"))

        // Refused: a position not parked (exit 1, nothing changed), a bad value and both flags (usage).
        let unknown = try run("consumers", "parked", store, "mailer", "--retry", "4")
        #expect(unknown.status == 1 && unknown.stderr.contains("no parked event at position 4"), "\(unknown.stderr)")
        for arguments in [["--retry", "three"], ["--retry", "all", "--skip", "1"]] {
            let refused = try run(["consumers", "parked", store, "mailer"] + arguments)
            #expect(refused.status == 1 && refused.stderr.contains("--retry"), "\(arguments): \(refused.stderr)")
        }
        #expect(try directory.parked(named: "mailer").map(\.retryRequested) == [false, false, true])

        // --retry all with --json prints the list as changed.
        let all = try run("consumers", "parked", store, "mailer", "--retry", "all", "--json")
        #expect(all.status == 0, "\(all.stderr)")
        #expect((try jsonObject(all.stdout) as? [[String: Any]])?.map { $0["retry_requested"] as? Bool } == [true, true, true])

        // The application's next run: its handler takes 1 and 3 and still refuses 2.
        let opened = try EventStore.open(at: URL(filePath: store), snapshotPolicy: .never)
        let consumer = try opened.consumer(named: "mailer", options: ConsumerOptions(retry: quickRetry))
        let seen = Seen()
        try await runUntil(consumer, seen: seen, { (try? consumer.parked())?.allSatisfy { !$0.retryRequested } ?? false }) { batch in
            if batch.contains(where: { $0.position == 2 }) { throw Refused(position: 2) }
        }
        #expect(seen.positions == [1, 3])
        let left = try consumer.parked()
        #expect(left.map(\.position) == [2] && left[0].attempts == 8 && left[0].error == "refused 2" && !left[0].retryRequested)
        try await opened.close()
    }

    @Test func verifyReportsADamagedCheckpointAndOneAheadOfTheLog() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let directory = ConsumerDirectory(storeDirectory: URL(filePath: store))
        try directory.write(ConsumerCheckpoint(name: "ok", committed: 5, committedAt: .now()))
        #expect(try run("verify", store).status == 0)

        try directory.write(ConsumerCheckpoint(name: "ahead", committed: 9, committedAt: .now()))
        let ahead = try run("verify", store)
        #expect(ahead.status == 3, "\(ahead.stdout)")
        #expect(ahead.stdout.contains("consumer \"ahead\" committed position 9, past the log's end (5)"), "\(ahead.stdout)")
        // The list shows it, exit 3; tail --consumer refuses it; reset repairs it.
        #expect(try run("consumers", store).status == 3)
        let tail = try run("tail", store, "--consumer", "ahead")
        #expect(tail.status == 3 && tail.stderr.contains("past the log's end"), "\(tail.stderr)")
        #expect(try run("consumers", "reset", store, "ahead", "--to", "end").status == 0)
        #expect(try run("verify", store).status == 0)

        try flipBit(in: directory.url.appending(path: "ok.checkpoint").path, at: 10)
        let damaged = try run("verify", store, "--format", "jsonl")
        #expect(damaged.status == 3)
        #expect(damaged.stdout.contains("ok.checkpoint") && damaged.stdout.contains("CRC-32C"), "\(damaged.stdout)")
        let tailDamaged = try run("tail", store, "--consumer", "ok")
        #expect(tailDamaged.status == 3 && tailDamaged.stderr.contains("ok.checkpoint"), "\(tailDamaged.stderr)")
    }
}
