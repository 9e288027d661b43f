import Activities
@testable import EventLog
import EventKernel
import Foundation
import Testing
import EventKernelTestSupport

// MARK: - Support

struct RunResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// A `Process` for `eventkernel` with `arguments`, its standard output and error going to the
/// files `stdout` and `stderr`, its input empty; a caller that waits for its end calls
/// ``closeOutputFiles(of:)`` then.
func makeProcess(_ arguments: [String], stdout: URL, stderr: URL) throws -> Process {
    let process = Process()
    process.executableURL = builtExecutable("eventkernel")
    process.arguments = arguments
    var environment = ProcessInfo.processInfo.environment
    environment.removeValue(forKey: "EVENTKERNEL_STORE")
    process.environment = environment
    _ = FileManager.default.createFile(atPath: stdout.path, contents: nil)
    _ = FileManager.default.createFile(atPath: stderr.path, contents: nil)
    process.standardOutput = try FileHandle(forWritingTo: stdout)
    process.standardError = try FileHandle(forWritingTo: stderr)
    process.standardInput = FileHandle.nullDevice
    return process
}

/// Closes this process's handles of the files its child was given: Foundation keeps them open
/// for as long as it keeps the `Process` (on Linux, past its end), and a test process holding
/// hundreds of descriptors makes `Process.run()` crash (swift-corelibs-foundation#5472: its scan
/// of `/proc/self/fd` reads past the end of a full buffer). Measured: 1,555 descriptors open in
/// the tool suites, 1,514 of them such files of finished children.
func closeOutputFiles(of process: Process) {
    // Never the test process's own standard streams, a `Process`'s default (nor the null
    // device, which has no descriptor): only files opened for the child.
    for handle in [process.standardOutput, process.standardError, process.standardInput] {
        if let handle = handle as? FileHandle, handle.fileDescriptor > 2 { try? handle.close() }
    }
}

/// Runs `eventkernel` with `arguments` to completion.
func run(_ arguments: String...) throws -> RunResult {
    try run(arguments)
}

/// Runs `eventkernel` with `arguments` to completion.
/// - Parameters:
///   - stdin: A file for its standard input (none by default).
///   - directory: Its working directory (the tests' own by default).
///   - environment: Variables set for it, over the tests' environment without `EVENTKERNEL_STORE`.
func run(_ arguments: [String], stdin: URL? = nil, in directory: URL? = nil, environment: [String: String] = [:]) throws -> RunResult {
    let temp = TemporaryDirectory("ekcli-out")
    let out = temp.file("stdout"), err = temp.file("stderr")
    let process = try makeProcess(arguments, stdout: out, stderr: err)
    if let stdin { process.standardInput = try FileHandle(forReadingFrom: stdin) }
    if let directory { process.currentDirectoryURL = directory }
    for (name, value) in environment { process.environment?[name] = value }
    try process.run()
    process.waitUntilExit()
    closeOutputFiles(of: process)
    return RunResult(status: process.terminationStatus,
                     stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
                     stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
}

/// Runs `eventkernel` with `arguments`, sends it SIGKILL after `delay`, and waits for its end.
/// - Returns: Whether the kill ended it (rather than its own exit first), and how long it ran.
func runKilled(_ arguments: [String], after delay: Duration, stdout: URL, stderr: URL) throws -> (killed: Bool, ran: Duration) {
    let process = try makeProcess(arguments, stdout: stdout, stderr: stderr)
    let started = ContinuousClock.now
    try process.run()
    // Until the delay or the child's own end: its running time is then measured, not the
    // delay, and a child already gone (its pid free for reuse) is sent nothing.
    let wake = started + delay
    while ContinuousClock.now < wake && process.isRunning { usleep(200) }
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
    closeOutputFiles(of: process)
    return (process.terminationReason == .uncaughtSignal, ContinuousClock.now - started)
}

/// The delays of a kill test's rounds, spread over the duration of the operation it kills:
/// each is drawn from `0..<bound`, and `bound`, first one measured run's duration, is lowered to
/// the running time of any round that ended before its kill. A busy machine can make the one
/// measured run slow and the later ones fast; with a fixed bound, the project's CI once saw forty
/// rounds of an AddressSanitizer run in which no kill landed.
struct KillDelays {
    /// The bound the next delay is drawn under.
    private(set) var bound: Duration
    private var random: SplitMix64

    /// Delays under `measured` (at least 20 ms), drawn from a generator seeded with `seed`.
    init(measured: Duration, seed: UInt64) {
        bound = max(measured, .milliseconds(20))
        random = SplitMix64(seed: seed)
    }

    /// The next round's delay.
    mutating func next() -> Duration {
        bound * (Double(random.next() % 1_000) / 1_000)
    }

    /// Takes in how a round went: one that ended by itself after `ran` lowers the bound to it.
    mutating func record(killed: Bool, ran: Duration) {
        if !killed { bound = max(min(bound, ran), .milliseconds(1)) }
    }
}

let t0 = Date(timeIntervalSince1970: 1_735_689_600)  // 2025-01-01T00:00:00Z
let ids = (0..<6).map { UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", $0))! }

func activityLine(_ i: Int, start: String, end: String?, type: String) -> String {
    "{\"id\":\"\(ids[i].uuidString)\",\"startDate\":\"\(start)\",\"endDate\":\(end.map { "\"\($0)\"" } ?? "null"),\"type\":\"\(type)\"}"
}

/// Five good lines: three adds (one active), an end, an update.
let goodLines = [
    "{\"event\":\"added\",\"activity\":" + activityLine(0, start: "2025-01-01T20:00:00Z", end: "2025-01-02T06:30:00Z", type: "sleep") + "}",
    "{\"event\":\"added\",\"activity\":" + activityLine(1, start: "2025-01-02T08:00:00.250Z", end: "2025-01-02T08:20:00Z", type: "feeding") + "}",
    activityLine(2, start: "2025-01-03T10:00:00Z", end: nil, type: "Tummy time"),
    "{\"event\":\"ended\",\"id\":\"\(ids[2].uuidString)\",\"at\":\"2025-01-03T10:15:00Z\"}",
    "{\"event\":\"updated\",\"activity\":" + activityLine(1, start: "2025-01-02T08:00:00.250Z", end: "2025-01-02T08:25:00Z", type: "feeding") + "}",
]

func write(_ lines: [String], to url: URL) throws {
    try (lines.joined(separator: "\n") + "\n").write(to: url, atomically: true, encoding: .utf8)
}

/// A store with the good lines imported.
func importedStore(_ temp: TemporaryDirectory) throws -> String {
    let file = temp.file("good.jsonl")
    try write(goodLines, to: file)
    let store = temp.file("store").path
    let result = try run("import", file.path, "--dir", store)
    #expect(result.status == 0, "\(result.stderr)")
    return store
}

func jsonObject(_ text: String) throws -> Any {
    try JSONSerialization.jsonObject(with: Data(text.utf8))
}

// MARK: - Tests

@Suite("eventkernel CLI")
struct CLITests {
    @Test func demoPrintsTheSummary() throws {
        let temp = TemporaryDirectory()
        let store = temp.file("demo").path
        let result = try run("demo", "--dir", store, "--activities", "2000", "--repetitions", "20")
        #expect(result.status == 0, "\(result.stderr)")
        for expected in ["activities (live)", "events", "compression ratio", "append rate", "startup from snapshot",
                         "startup by full replay", "replay / snapshot", "7-day window, newest 50", "overlapping", "intact"] {
            #expect(result.stdout.contains(expected), "missing \(expected) in \(result.stdout)")
        }
        // A second run refuses the non-empty store; --reset allows it.
        let again = try run("demo", "--dir", store, "--activities", "100")
        #expect(again.status == 1)
        #expect(again.stderr.contains("--reset"))
        #expect(try run("demo", "--dir", store, "--activities", "100", "--repetitions", "5", "--reset").status == 0)
    }

    @Test func importThenQuery() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let all = try run("query", "--dir", store, "--json", "--oldest-first")
        #expect(all.status == 0)
        let array = try #require(try jsonObject(all.stdout) as? [[String: Any]])
        #expect(array.map { $0["id"] as? String } == [ids[0], ids[1], ids[2]].map(\.uuidString))
        #expect(array[1]["endDate"] as? String == "2025-01-02T08:25:00Z")
        #expect(array[1]["startDate"] as? String == "2025-01-02T08:00:00.25Z")
        #expect(array[2]["endDate"] as? String == "2025-01-03T10:15:00Z")
        let sleep = try run("query", "--dir", store, "--json", "--type", "sleep", "--after", "2025-01-01", "--before", "2025-01-02T00:00Z")
        #expect((try jsonObject(sleep.stdout) as? [Any])?.count == 1)
        let range = try run("query", "--dir", store, "--overlapping", "2025-01-02T06:00:00Z...2025-01-02T07:00:00Z")
        #expect(range.stdout.contains(ids[0].uuidString) && !range.stdout.contains(ids[1].uuidString))
        let bad = try run("query", "--dir", store, "--after", "yesterday")
        #expect(bad.status == 1 && bad.stderr.contains("eventkernel: error:"))
    }

    @Test(arguments: [
        ("{\"event\":\"added\",", "bad JSON"),
        ("{\"event\":\"started\",\"id\":\"x\"}", "unknown event"),
        ("{\"event\":\"added\",\"activity\":{\"id\":\"00000000-0000-4000-8000-000000000009\",\"type\":\"bath\"}}", "missing field \"startDate\""),
        ("{\"id\":\"00000000-0000-4000-8000-000000000009\",\"startDate\":\"2025-13-01\",\"type\":\"bath\"}", "bad date"),
        ("{\"id\":\"00000000-0000-4000-8000-000000000009\",\"startDate\":\"2025-01-05T10:00:00Z\",\"endDate\":\"2025-01-05T09:00:00Z\",\"type\":\"bath\"}", "end before start"),
        ("{\"id\":\"00000000-0000-4000-8000-000000000000\",\"startDate\":\"2025-01-05T10:00:00Z\",\"type\":\"bath\"}", "duplicate id"),
        ("{\"event\":\"deleted\",\"id\":\"00000000-0000-4000-8000-000000000009\"}", "unknown id"),
    ])
    func malformedLineIsRejectedAndNothingIsImported(line: String, problem: String) throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let before = try run("export", "--dir", store)
        // Two good new lines, then the bad one at line 3.
        let file = temp.file("bad.jsonl")
        try write([
            activityLine(3, start: "2025-01-04T10:00:00Z", end: "2025-01-04T10:30:00Z", type: "bath"),
            activityLine(4, start: "2025-01-04T11:00:00Z", end: nil, type: "nap"),
            line,
        ], to: file)
        let result = try run("import", file.path, "--dir", store)
        #expect(result.status == 1)
        #expect(result.stderr.contains("bad.jsonl:3:"), "\(result.stderr)")
        #expect(result.stderr.contains(problem), "\(result.stderr)")
        #expect(result.stderr.contains("nothing was imported"))
        #expect(try run("export", "--dir", store).stdout == before.stdout)
    }

    @Test func exportImportRoundTrip() throws {
        let temp = TemporaryDirectory()
        let demo = temp.file("demo").path
        #expect(try run("demo", "--dir", demo, "--activities", "1500", "--repetitions", "5").status == 0)
        let exported = temp.file("events.jsonl").path
        #expect(try run("export", "--dir", demo, "--output", exported).status == 0)
        let copy = temp.file("copy").path
        let imported = try run("import", exported, "--dir", copy)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.contains("last line imported"))
        let a = try run("export", "--dir", demo, "--format", "activities")
        let b = try run("export", "--dir", copy, "--format", "activities")
        #expect(!a.stdout.isEmpty && a.stdout == b.stdout)
        // The activities form imports too, to the same state.
        let activities = temp.file("activities.jsonl")
        try a.stdout.write(to: activities, atomically: true, encoding: .utf8)
        let third = temp.file("third").path
        #expect(try run("import", activities.path, "--dir", third).status == 0)
        #expect(try run("export", "--dir", third, "--format", "activities").stdout == a.stdout)
        // Each event's recordedAt is the stored nanoseconds, digit for digit.
        let log = try SegmentedLog.openReadOnly(at: URL(filePath: demo))
        let stored = try log.read(from: 0, limit: 50)
        let lines = try String(contentsOfFile: exported, encoding: .utf8).split(separator: "\n").prefix(50)
        for (record, line) in zip(stored, lines) {
            let object = try #require(try jsonObject(String(line)) as? [String: Any])
            let nanos = record.timestamp.nanosecondsSince1970
            let text = try #require(object["recordedAt"] as? String)
            let fraction = text.split(separator: ".").dropFirst().first.map { String($0.dropLast()) } ?? ""
            let padded = (fraction + String(repeating: "0", count: 9)).prefix(9)
            #expect(Int64(padded) == nanos % 1_000_000_000, "\(text) for \(nanos) ns")
        }
    }

    @Test func historyOfAnID() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let result = try run("history", ids[1].uuidString, "--dir", store, "--json")
        #expect(result.status == 0)
        let events = try #require(try jsonObject(result.stdout) as? [[String: Any]])
        #expect(events.map { $0["event"] as? String } == ["added", "updated"])
        #expect(events.map { $0["version"] as? Int } == [1, 2])
        #expect(events.map { $0["position"] as? Int } == [1, 4])
        let table = try run("history", ids[2].uuidString, "--dir", store)
        #expect(table.stdout.contains("ended") && table.stdout.contains("2025-01-03T10:15:00Z"))
        #expect(try run("history", ids[5].uuidString, "--dir", store).status == 1)
    }

    @Test func replayAsOfAndPosition() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let past = try run("replay", "--dir", store, "--as-of", "2000-01-01", "--json")
        #expect(past.status == 0)
        #expect(((try jsonObject(past.stdout) as? [String: Any])?["summary"] as? [String: Any])?["activities"] as? Int == 0)
        let now = try run("replay", "--dir", store, "--as-of", "2999-01-01T00:00:00Z", "--json")
        let summary = try #require((try jsonObject(now.stdout) as? [String: Any])?["summary"] as? [String: Any])
        #expect(summary["activities"] as? Int == 3)
        #expect(summary["active"] as? Int == 0)
        // Through position 2 the tummy time is still running.
        let atTwo = try run("replay", "--dir", store, "--position", "2", "--json")
        #expect(((try jsonObject(atTwo.stdout) as? [String: Any])?["summary"] as? [String: Any])?["active"] as? Int == 1)
        let queried = try run("replay", "--dir", store, "--position", "1", "--type", "feeding", "--json")
        let rows = try #require((try jsonObject(queried.stdout) as? [String: Any])?["activities"] as? [[String: Any]])
        #expect(rows.count == 1 && rows[0]["endDate"] as? String == "2025-01-02T08:20:00Z")
        #expect(try run("replay", "--dir", store, "--position", "99").status == 1)
    }

    @Test func verifyDamageRepair() async throws {
        let temp = TemporaryDirectory()
        let store = temp.file("store")
        // Small segments, so that the first one is sealed.
        let repository = try EventSourcedActivityRepository.open(
            at: store, configuration: .init(log: SegmentedLog.Configuration(segmentSize: 4096)))
        for batch in 0..<40 {
            try await repository.apply((0..<10).map { k in
                .added(ActivityModel(startDate: t0 + Double(batch * 10 + k) * 600, endDate: t0 + Double(batch * 10 + k) * 600 + 300, type: "diaper"))
            })
        }
        try await repository.close()
        let clean = try run("verify", "--dir", store.path)
        #expect(clean.status == 0, "\(clean.stdout)\(clean.stderr)")
        #expect(clean.stdout.contains("intact"))
        let inspect = try run("inspect", "--dir", store.path, "--json")
        let info = try #require(try jsonObject(inspect.stdout) as? [String: Any])
        #expect((info["totals"] as? [String: Any])?["events"] as? Int == 400)
        let segments = try #require(info["segments"] as? [[String: Any]])
        #expect(segments.count > 1 && segments[0]["sealed"] as? Bool == true)

        // Flip a byte in the middle of the first (sealed) segment.
        let first = store.appending(path: try #require(segments[0]["file"] as? String))
        let size = try #require(segments[0]["bytes"] as? Int)
        let handle = try FileHandle(forUpdating: first)
        try handle.seek(toOffset: UInt64(size / 2))
        let byte = try handle.read(upToCount: 1)![0]
        try handle.seek(toOffset: UInt64(size / 2))
        try handle.write(contentsOf: Data([byte ^ 0x40]))
        try handle.close()

        let damaged = try run("verify", "--dir", store.path)
        #expect(damaged.status == 3)
        #expect(damaged.stdout.contains("file \(first.path)"), "\(damaged.stdout)")
        #expect(damaged.stdout.contains("offset "))
        let json = try run("verify", "--dir", store.path, "--json")
        #expect(json.status == 3)
        #expect((try jsonObject(json.stdout) as? [String: Any])?["intact"] as? Bool == false)

        // A read command that meets the damage (no snapshot to start from, so the replay reads
        // the sealed segment) reports it as damage, exit 3, with the file and offset: the
        // LogError survives the way up through the repository.
        let snapshots = store.appending(path: "snapshots")
        let kept = store.deletingLastPathComponent().appending(path: "kept-snapshots-\(UUID().uuidString.prefix(6))")
        try FileManager.default.moveItem(at: snapshots, to: kept)
        let query = try run("query", "--dir", store.path)
        #expect(query.status == 3, "\(query.stdout)\(query.stderr)")
        #expect(query.stderr.contains(first.path) && query.stderr.contains("offset"), "\(query.stderr)")
        try FileManager.default.moveItem(at: kept, to: snapshots)

        let refused = try run("repair", "--dir", store.path)
        #expect(refused.status == 1 && refused.stderr.contains("--yes"))
        let repaired = try run("repair", "--dir", store.path, "--yes")
        #expect(repaired.status == 0, "\(repaired.stderr)")
        #expect(repaired.stdout.contains("dropped"))
        let after = try run("verify", "--dir", store.path)
        #expect(after.status == 0, "\(after.stdout)")
        #expect(try run("snapshot", "--dir", store.path).status == 0)
    }

    @Test func missingStoreAndNotAStore() throws {
        let temp = TemporaryDirectory()
        let missing = try run("query", "--dir", temp.file("nope").path)
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("eventkernel: error: no store at") && missing.stderr.contains("no such directory"))
        let empty = try run("verify", "--dir", temp.path)
        #expect(empty.status == 2 && empty.stderr.contains("not an eventkernel store"))
        #expect(try run("inspect", "--dir", temp.file("nope").path).status == 2)
        // A directory with a file that merely ends in .log is not a store, for every command.
        let logs = TemporaryDirectory("ek-serverlog")
        try Data("GET /\n".utf8).write(to: logs.file("server.log"))
        for command in ["verify", "query", "inspect"] {
            let result = try run(command, "--dir", logs.path)
            #expect(result.status == 2 && result.stderr.contains("not an eventkernel store"), "\(command): \(result.stderr)")
        }
        try write(goodLines, to: temp.file("good.jsonl"))
        let importInto = try run("import", temp.file("good.jsonl").path, "--dir", logs.path)
        #expect(importInto.status == 2 && importInto.stderr.contains("not a store"), "\(importInto.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: logs.path) == ["server.log"], "nothing was written there")
    }

    @Test func lostEventsOnlySnapshotsRememberAreDamageUntilRepairAcceptsThem() async throws {
        let temp = TemporaryDirectory()
        let store = temp.file("store")
        let repository = try EventSourcedActivityRepository.open(at: store)
        for i in 0..<20 {
            try await repository.add(ActivityModel(startDate: t0 + Double(i) * 600, endDate: nil, type: "nap"))
        }
        try await repository.close()   // snapshots at 20, a checkpoint
        // The last batch vanishes without a trace in the log: only the snapshots remember it.
        let segment = store.appending(path: "00000000000000000000.log")
        try FileManager.default.removeItem(at: store.appending(path: "00000000000000000000.ckpt"))
        let scan = try SegmentScanner(file: try OpenFile.open(segment.path, flags: O_RDONLY), basePosition: 0).scan()
        let handle = try FileHandle(forUpdating: segment)
        try handle.truncate(atOffset: UInt64(scan.batches.last!.offset))
        try handle.close()
        let verify = try run("verify", "--dir", store.path)
        #expect(verify.status == 3, "\(verify.stdout)\(verify.stderr)")
        let query = try run("query", "--dir", store.path)
        #expect(query.status == 3 && query.stderr.contains("snapshots/"), "\(query.stderr)")
        let repair = try run("repair", "--dir", store.path, "--yes")
        #expect(repair.status == 0 && repair.stdout.contains("accepted the loss"), "\(repair.stdout)\(repair.stderr)")
        let after = try run("query", "--dir", store.path, "--json")
        #expect(after.status == 0, "\(after.stderr)")
        // Everything the log still holds is there: the 19 activities before the lost batch.
        let remaining = try #require(try jsonObject(after.stdout) as? [[String: Any]], "\(after.stdout)")
        #expect(remaining.count == 19)
        #expect(try run("verify", "--dir", store.path).status == 0)
    }

    @Test func verifyBesideAWriterThatSnapshotsOftenReportsNoDamage() async throws {
        let temp = TemporaryDirectory()
        let store = temp.file("store")
        var configuration = EventStore.Configuration()
        var policy = SnapshotPolicy(everyEvents: 3, onClose: true, keep: 1)
        policy.growthFraction = 0
        configuration.snapshots = policy
        configuration.log.durability = .buffered
        let repository = try EventSourcedActivityRepository.open(at: store, configuration: configuration)
        try await repository.add(ActivityModel(startDate: t0, endDate: nil, type: "nap"))
        let writer = Task {
            var i = 1
            while !Task.isCancelled {
                try await repository.add(ActivityModel(startDate: t0 + Double(i) * 60, endDate: nil, type: "nap"))
                try await repository.store.writeSnapshots()
                i += 1
            }
        }
        for round in 0..<testScale.pick(15, small: 4) {
            let result = try run("verify", "--dir", store.path)
            #expect(result.status == 0, "round \(round): \(result.stdout)\(result.stderr)")
        }
        writer.cancel()
        _ = await writer.result
        try await repository.close()
    }

    @Test func importRefusesInvalidUTF8WithLineAndByte() throws {
        let temp = TemporaryDirectory()
        var bytes = Data((goodLines[0] + "\n").utf8)
        var second = Data(goodLines[1].utf8)
        let at = second.range(of: Data("feeding".utf8))!.lowerBound
        second[at + 2] = 0xFF   // not UTF-8
        bytes.append(second)
        bytes.append(Data("\n".utf8))
        let file = temp.file("bad.jsonl")
        try bytes.write(to: file)
        let result = try run("import", file.path, "--dir", temp.file("store").path)
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("bad.jsonl:2: invalid UTF-8 at byte \(at + 3)"), "\(result.stderr)")
        #expect(result.stderr.contains("nothing was imported"))
    }

    @Test func lockedStore() async throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let writer = try EventSourcedActivityRepository.open(at: URL(filePath: store))
        let file = temp.file("more.jsonl")
        try write([activityLine(5, start: "2025-02-01T10:00:00Z", end: nil, type: "bath")], to: file)
        let result = try run("import", file.path, "--dir", store)
        try await writer.close()
        #expect(result.status == 2)
        #expect(result.stderr.contains("locked by another writer (pid \(ProcessInfo.processInfo.processIdentifier))"), "\(result.stderr)")
        // Read-only commands work alongside the writer.
        #expect(try run("query", "--dir", store).status == 0)
    }

    @Test func tailPrintsEvents() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let result = try run("tail", "--dir", store)
        #expect(result.status == 0)
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 5)
        #expect(lines[3].contains("ended") && lines[3].contains(ids[2].uuidString))
        let json = try run("tail", "--dir", store, "--from", "3", "--json")
        #expect(json.stdout.split(separator: "\n").count == 2)
    }

    /// A newcomer's probe: after a repair cut the log under `tail --follow` and new events took
    /// the cut positions, tail went on from where it was and skipped them without a word. It
    /// now stops, exit 3, saying the history changed.
    @Test func tailFollowStopsWhenTheLogIsCutUnderIt() async throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let out = temp.file("tail.out"), err = temp.file("tail.err")
        let process = try makeProcess(["tail", "--dir", store, "--follow"], stdout: out, stderr: err)
        try process.run()
        try await Task.sleep(for: .milliseconds(500))
        #expect(process.isRunning)
        try SegmentedLog.startNewHistoryEpoch(at: URL(filePath: store))
        for _ in 0..<100 where process.isRunning { try await Task.sleep(for: .milliseconds(100)) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        closeOutputFiles(of: process)
        let stderr = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        #expect(process.terminationStatus == 3, "\(stderr)")
        #expect(stderr.contains("the log was cut while tail followed it"), "\(stderr)")
    }

    @Test func tailFollowSeesNewEvents() async throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let writer = try EventSourcedActivityRepository.open(at: URL(filePath: store))
        let out = temp.file("tail.out")
        let process = try makeProcess(["tail", "--dir", store, "--follow", "--json"], stdout: out, stderr: temp.file("tail.err"))
        try process.run()
        func output() -> String { (try? String(contentsOf: out, encoding: .utf8)) ?? "" }
        func wait(until condition: (String) -> Bool) async throws -> Bool {
            for _ in 0..<100 {
                if condition(output()) { return true }
                try await Task.sleep(for: .milliseconds(100))
            }
            return false
        }
        #expect(try await wait { $0.split(separator: "\n").count == 5 })
        let late = ActivityModel(id: ids[5], startDate: t0 + 86_400 * 40, type: "bath")
        try await writer.add(late)
        #expect(try await wait { $0.contains(ids[5].uuidString) }, "\(output())")
        process.terminate()
        process.waitUntilExit()
        closeOutputFiles(of: process)
        try await writer.close()
        #expect(output().split(separator: "\n").count == 6)
    }
}
