import Activities
@testable import EventLog
import EventKernel
import Foundation
import Testing
import EventKernelTestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Support

/// A deterministic import file of `activities` adds, with ends, updates and deletes of
/// earlier ones between them (every line valid against the lines before it): one event a line.
private func historyLines(activities: Int) -> [String] {
    func id(_ i: Int) -> String { String(format: "00000000-0000-4000-8000-%012d", i) }
    let formatter = ISO8601DateFormatter()
    func at(_ i: Int, plus: Int = 0) -> String { formatter.string(from: t0 + Double(i * 600 + plus)) }
    var lines: [String] = []
    for i in 0..<activities {
        lines.append("{\"id\":\"\(id(i))\",\"startDate\":\"\(at(i))\",\"endDate\":null,\"type\":\"\(["sleep", "feeding", "diaper"][i % 3])\"}")
        if i % 5 == 0, i >= 3 {
            lines.append("{\"event\":\"ended\",\"id\":\"\(id(i - 3))\",\"at\":\"\(at(i - 3, plus: 300))\"}")
        }
        if i % 7 == 0, i >= 5 {
            lines.append("{\"event\":\"updated\",\"activity\":{\"id\":\"\(id(i - 5))\",\"startDate\":\"\(at(i - 5))\",\"endDate\":\"\(at(i - 5, plus: 420))\",\"type\":\"nap\"}}")
        }
        if i % 11 == 0, i >= 8 {
            lines.append("{\"event\":\"deleted\",\"id\":\"\(id(i - 8))\"}")
        }
    }
    return lines
}

/// The store's events as export writes them, without what the log assigns (position, time
/// recorded): two stores holding the same events in the same order export the same lines.
private func eventsWithoutPositions(_ store: String) throws -> [String] {
    let result = try run(["export", "--dir", store])
    #expect(result.status == 0, "\(result.stderr)")
    let prefix = try Regex("^\\{\"position\":[0-9]+,\"recordedAt\":\"[^\"]*\",")
    // The metadata is the import's resume marker, which names the batch's last line.
    let marker = try Regex(",\"metadata\":\\{\"correlationID\":\"eventkernel-import [^\"]*\"\\}")
    return result.stdout.split(separator: "\n").map { String($0).replacing(prefix, with: "{").replacing(marker, with: "") }
}

/// The next position of the store's log (events stored), read beside its writer.
private func eventsStored(_ store: URL) -> UInt64 {
    (try? SegmentedLog.openReadOnly(at: store).bounds.nextPosition) ?? 0
}

/// Sends `signalNumber` to a running import once its store holds at least `target` events.
/// The import runs far faster than a store can be opened to count (on tmpfs, thousands of
/// batches a second): the child is stopped (SIGSTOP) while its store is counted, so the
/// moment is chosen by what is stored, not by how fast the test polls.
/// - Returns: Whether the signal was sent before the import ended by itself.
@discardableResult
private func signal(_ process: Process, _ signalNumber: Int32, whenStored target: UInt64, in store: URL) -> Bool {
    let pid = process.processIdentifier
    while process.isRunning {
        usleep(20_000)   // the child runs (and imports a few hundred events) between counts
        kill(pid, SIGSTOP)
        if eventsStored(store) >= max(1, target) {
            kill(pid, signalNumber)
            kill(pid, SIGCONT)
            return true
        }
        kill(pid, SIGCONT)
    }
    return false
}

private func names(in directory: URL) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
}

// MARK: - Tests

@Suite("eventkernel import and data safety", .serialized)
struct ImportAndSafetyTests {
    // MARK: demo --reset

    @Test func demoResetRefusesADirectoryThatIsNotAStore() throws {
        let temp = TemporaryDirectory()
        let victim = temp.file("victim")
        try FileManager.default.createDirectory(at: victim.appending(path: "sub"), withIntermediateDirectories: true)
        try Data("my thesis".utf8).write(to: victim.appending(path: "thesis.txt"))
        try Data("notes".utf8).write(to: victim.appending(path: "sub/notes.txt"))
        let result = try run(["demo", "--reset", "--dir", victim.path, "--activities", "10", "--repetitions", "1"])
        #expect(result.status == 2, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("is not a store") && result.stderr.contains("nothing was deleted"), "\(result.stderr)")
        #expect(names(in: victim) == ["sub", "thesis.txt"])
        #expect(try String(contentsOf: victim.appending(path: "thesis.txt"), encoding: .utf8) == "my thesis")
        #expect(names(in: victim.appending(path: "sub")) == ["notes.txt"])

        // The current directory, as `--dir .`.
        let dot = try run(["demo", "--reset", "--dir", ".", "--activities", "10", "--repetitions", "1"], in: victim)
        #expect(dot.status == 2, "\(dot.stderr)")
        #expect(names(in: victim) == ["sub", "thesis.txt"])

        // A path that is a file.
        let file = victim.appending(path: "thesis.txt")
        let onFile = try run(["demo", "--reset", "--dir", file.path, "--activities", "10", "--repetitions", "1"])
        #expect(onFile.status == 2 && onFile.stderr.contains("is a file"), "\(onFile.stderr)")
        #expect(try String(contentsOf: file, encoding: .utf8) == "my thesis")
    }

    @Test func demoResetRefusesAStoreThatAlsoHoldsOtherFiles() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let before = try run(["export", "--dir", store])
        try Data("keep me".utf8).write(to: URL(filePath: store).appending(path: "notes.txt"))
        let result = try run(["demo", "--reset", "--dir", store, "--activities", "10", "--repetitions", "1"])
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("notes.txt") && result.stderr.contains("nothing was deleted"), "\(result.stderr)")
        #expect(names(in: URL(filePath: store)).contains("notes.txt"))
        #expect(try run(["export", "--dir", store]).stdout == before.stdout)
        #expect(try run(["verify", "--dir", store]).status == 0)

        // A foreign file among the snapshots is refused too.
        try FileManager.default.removeItem(at: URL(filePath: store).appending(path: "notes.txt"))
        try Data("x".utf8).write(to: URL(filePath: store).appending(path: "snapshots/mine.txt"))
        let inSnapshots = try run(["demo", "--reset", "--dir", store, "--activities", "10", "--repetitions", "1"])
        #expect(inSnapshots.status == 2 && inSnapshots.stderr.contains("snapshots/mine.txt"), "\(inSnapshots.stderr)")
        #expect(try run(["export", "--dir", store]).stdout == before.stdout)
    }

    @Test func demoResetRefusesKeptRecoveredBytesAndALockedStore() async throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let before = try run(["export", "--dir", store])
        let recovered = URL(filePath: store).appending(path: "recovered")
        try FileManager.default.createDirectory(at: recovered, withIntermediateDirectories: true)
        try Data("old".utf8).write(to: recovered.appending(path: "00000000000000000000.log.64.torn"))
        let kept = try run(["demo", "--reset", "--dir", store, "--activities", "10", "--repetitions", "1"])
        #expect(kept.status == 2 && kept.stderr.contains("recovered/"), "\(kept.stderr)")
        #expect(try run(["export", "--dir", store]).stdout == before.stdout)
        try FileManager.default.removeItem(at: recovered)

        let writer = try EventSourcedActivityRepository.open(at: URL(filePath: store))
        let locked = try run(["demo", "--reset", "--dir", store, "--activities", "10", "--repetitions", "1"])
        try await writer.close()
        #expect(locked.status == 2 && locked.stderr.contains("locked"), "\(locked.stderr)")
        #expect(try run(["export", "--dir", store]).stdout == before.stdout)
    }

    @Test func demoResetDeletesOnlyTheStoreAndNeverFollowsALink() throws {
        let temp = TemporaryDirectory()
        let store = URL(filePath: try importedStore(temp))
        // The snapshots directory replaced by a link to someone's files: the link goes, they stay.
        let elsewhere = temp.file("elsewhere")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        try Data("precious".utf8).write(to: elsewhere.appending(path: "photo.jpg"))
        try FileManager.default.removeItem(at: store.appending(path: "snapshots"))
        try FileManager.default.createSymbolicLink(at: store.appending(path: "snapshots"), withDestinationURL: elsewhere)
        try Data("hidden".utf8).write(to: store.appending(path: ".keep"))
        // The store reached through a link to its directory.
        let link = temp.file("link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: store)
        let result = try run(["demo", "--reset", "--dir", link.path, "--activities", "50", "--repetitions", "1"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("deleted the store"), "\(result.stderr)")
        #expect(names(in: elsewhere) == ["photo.jpg"])
        #expect(try String(contentsOf: elsewhere.appending(path: "photo.jpg"), encoding: .utf8) == "precious")
        #expect(FileManager.default.fileExists(atPath: store.appending(path: ".keep").path))
        // The demo's new store is there, none of the imported activities are.
        let query = try run(["query", "--dir", store.path, "--json"])
        let rows = try #require(try jsonObject(query.stdout) as? [[String: Any]])
        #expect(rows.count > 0 && !rows.contains { ($0["id"] as? String) == ids[0].uuidString })
    }

    /// A store's LOCK replaced by a link to someone's file: taking the writer lock truncated the
    /// link's target and wrote a pid into it. Every writer (demo --reset, import) now refuses.
    @Test func aLockFileThatIsALinkIsNeverFollowed() throws {
        let temp = TemporaryDirectory()
        let store = URL(filePath: try importedStore(temp))
        let thesis = temp.file("thesis.txt")
        try Data("chapter one".utf8).write(to: thesis)
        try? FileManager.default.removeItem(at: store.appending(path: "LOCK"))
        try FileManager.default.createSymbolicLink(at: store.appending(path: "LOCK"), withDestinationURL: thesis)
        let reset = try run(["demo", "--reset", "--dir", store.path, "--activities", "20", "--repetitions", "1"])
        #expect(reset.status != 0, "\(reset.stdout)\(reset.stderr)")
        let file = temp.file("more.jsonl")
        try write([activityLine(5, start: "2025-02-01T10:00:00Z", end: nil, type: "sleep")], to: file)
        let importing = try run(["import", store.path, file.path])
        #expect(importing.status != 0, "\(importing.stdout)\(importing.stderr)")
        #expect(try String(contentsOf: thesis, encoding: .utf8) == "chapter one")
        #expect(FileManager.default.fileExists(atPath: store.appending(path: "00000000000000000000.log").path))
    }

    /// The damage sweep's case seen from the tool: no checkpoint, one bit flipped in the last
    /// batch, which the snapshot written at close covers. A writer's open refuses it; `verify`
    /// called it an unfinished write (a warning, exit 0) until it applied the same rule.
    @Test func verifyCallsATornLookingBatchASnapshotCoversDamage() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let log = try SegmentedLog.openReadOnly(at: URL(filePath: store))
        let segment = log.core.state.withLock { $0.segments.last! }
        let last = try #require(segment.batches.last)
        for name in try FileManager.default.contentsOfDirectory(atPath: store) where name.hasSuffix(".ckpt") {
            try FileManager.default.removeItem(atPath: store + "/" + name)
        }
        try flipBit(in: segment.file.path, at: last.offset + Int64(BatchHeader.size) + 3)
        let verify = try run("verify", store)
        #expect(verify.status == 3, "\(verify.stdout)\(verify.stderr)")
        #expect((verify.stdout + verify.stderr).contains("as acknowledged"), "\(verify.stdout)\(verify.stderr)")
        #expect(try run("query", store).status == 3)
        let writer = try run("snapshot", store)
        #expect(writer.status == 3, "\(writer.stdout)\(writer.stderr)")
    }

    @Test func demoResetDeletesAStoreWrittenBeforeStoreFilesExisted() throws {
        // A segment, its checkpoint and snapshots of four projections; no eventkernel.store, no LOCK.
        let fixture = try copyOfFixture("format1-store")
        let result = try run(["demo", "--reset", "--dir", fixture.path, "--activities", "20", "--repetitions", "1"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("deleted the store at \(fixture.url.standardizedFileURL.path) (6 files)"), "\(result.stderr)")
        #expect(!names(in: fixture.url.appending(path: "snapshots")).contains { $0.contains("7265706f7369746f7279") },
                "the old repositories' snapshots are gone")
    }

    // MARK: import: interrupted and resumed

    /// SIGINT (and SIGTERM, and SIGKILL) at several moments of an import; the same command run
    /// again finishes it: the same events in the same order as a clean import, none twice.
    @Test(arguments: [(SIGINT, 0.02), (SIGINT, 0.5), (SIGINT, 0.9), (SIGTERM, 0.3), (SIGKILL, 0.6)])
    func interruptedImportResumesWithNoDuplicateAndNoGap(signalNumber: Int32, fraction: Double) throws {
        let temp = TemporaryDirectory()
        let file = temp.file("history.jsonl")
        let lines = historyLines(activities: testScale.pick(6_000, small: 2_000))
        try write(lines, to: file)
        let clean = temp.file("clean").path
        let arguments = ["import", file.path, "--batch-size", "50"]
        let first = try run(arguments + ["--dir", clean])
        #expect(first.status == 0, "\(first.stderr)")

        let store = temp.file("store")
        let process = try makeProcess(arguments + ["--dir", store.path], stdout: temp.file("out"), stderr: temp.file("err"))
        try process.run()
        #expect(signal(process, signalNumber, whenStored: UInt64(Double(lines.count) * fraction), in: store))
        process.waitUntilExit()
        closeOutputFiles(of: process)
        let stderr = try String(contentsOf: temp.file("err"), encoding: .utf8)
        let stored = eventsStored(store)
        #expect(stored > 0 && stored < UInt64(lines.count), "the kill came after the import finished: \(stderr)")
        if signalNumber == SIGKILL {
            #expect(process.terminationReason == .uncaughtSignal)
        } else {
            #expect(process.terminationReason == .exit)
            #expect(process.terminationStatus == (signalNumber == SIGINT ? 130 : 143), "\(stderr)")
            // It says where it stopped: the last line stored (one event a line here).
            let name = signalNumber == SIGINT ? "SIGINT" : "SIGTERM"
            #expect(stderr.contains("interrupted (\(name)) after line \(stored) of \(file.path)"), "\(stderr)")
            #expect(stderr.contains("run the same command again to continue after line \(stored)"), "\(stderr)")
        }

        let again = try run(arguments + ["--dir", store.path])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("lines 1–\(stored) were imported earlier"), "\(again.stdout)")
        #expect(again.stdout.contains("last line imported: \(lines.count)"), "\(again.stdout)")
        #expect(try eventsWithoutPositions(store.path) == eventsWithoutPositions(clean))
        #expect(try run(["export", "--dir", store.path, "--format", "activities"]).stdout
                == run(["export", "--dir", clean, "--format", "activities"]).stdout)
        #expect(try run(["verify", "--dir", store.path]).status == 0)
    }

    @Test func rerunningACompletedImportAddsNothing() throws {
        let temp = TemporaryDirectory()
        let file = temp.file("history.jsonl")
        try write(historyLines(activities: 300), to: file)
        let store = temp.file("store").path
        #expect(try run(["import", file.path, "--dir", store]).status == 0)
        let before = try run(["export", "--dir", store])
        let again = try run(["import", file.path, "--dir", store])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("nothing to import") && again.stdout.contains("imported into \(store) earlier"), "\(again.stdout)")
        #expect(try run(["export", "--dir", store]).stdout == before.stdout)
        // A copy of the file is the same input (recognised by content, not by path).
        let copy = temp.file("copy.jsonl")
        try FileManager.default.copyItem(at: file, to: copy)
        #expect(try run(["import", copy.path, "--dir", store]).stdout.contains("nothing to import"))
        // Different content is a new import, checked against the store as ever.
        try write(historyLines(activities: 301), to: copy)
        let different = try run(["import", copy.path, "--dir", store])
        #expect(different.status == 1 && different.stderr.contains("duplicate id"), "\(different.stderr)")
        #expect(try run(["export", "--dir", store]).stdout == before.stdout)
    }

    @Test func interruptedImportFromStandardInputSaysItCannotBeReadAgain() throws {
        let temp = TemporaryDirectory()
        let file = temp.file("history.jsonl")
        let lines = historyLines(activities: testScale.pick(4_000, small: 1_500))
        try write(lines, to: file)
        let store = temp.file("store")
        let arguments = ["import", "-", "--batch-size", "50", "--dir", store.path]
        let process = try makeProcess(arguments, stdout: temp.file("out"), stderr: temp.file("err"))
        process.standardInput = try FileHandle(forReadingFrom: file)
        try process.run()
        #expect(signal(process, SIGINT, whenStored: UInt64(lines.count / 3), in: store))
        process.waitUntilExit()
        closeOutputFiles(of: process)
        let stderr = try String(contentsOf: temp.file("err"), encoding: .utf8)
        let stored = eventsStored(store)
        #expect(process.terminationStatus == 130, "\(stderr)")
        #expect(stderr.contains("interrupted (SIGINT) after line \(stored) of <stdin>"), "\(stderr)")
        #expect(stderr.contains("standard input cannot be read again: pipe the same input into the same command"), "\(stderr)")
        // The same input piped again continues after the line it names.
        let again = try run(arguments, stdin: file)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("lines 1–\(stored) were imported earlier"), "\(again.stdout)")
        let clean = temp.file("clean").path
        #expect(try run(["import", file.path, "--dir", clean]).status == 0)
        #expect(try eventsWithoutPositions(store.path) == eventsWithoutPositions(clean))
    }

    // MARK: import: input

    @Test func exportPipedIntoImport() throws {
        let temp = TemporaryDirectory()
        let source = try importedStore(temp)
        let destination = temp.file("copy").path
        let pipe = Pipe()
        let exporter = try makeProcess(["export", "--dir", source], stdout: temp.file("x.out"), stderr: temp.file("x.err"))
        exporter.standardOutput = pipe
        let importer = try makeProcess(["import", "--dir", destination, "-"], stdout: temp.file("i.out"), stderr: temp.file("i.err"))
        importer.standardInput = pipe
        try exporter.run()
        try importer.run()
        exporter.waitUntilExit()
        closeOutputFiles(of: exporter)
        importer.waitUntilExit()
        closeOutputFiles(of: importer)
        let importErrors = try String(contentsOf: temp.file("i.err"), encoding: .utf8)
        #expect(exporter.terminationStatus == 0)
        #expect(importer.terminationStatus == 0, "\(importErrors)")
        #expect(try String(contentsOf: temp.file("i.out"), encoding: .utf8).contains("from <stdin>"))
        #expect(try run(["export", "--dir", destination, "--format", "activities"]).stdout
                == run(["export", "--dir", source, "--format", "activities"]).stdout)

        // /dev/stdin names standard input too.
        let exported = temp.file("events.jsonl")
        try run(["export", "--dir", source]).stdout.write(to: exported, atomically: true, encoding: .utf8)
        let third = temp.file("third").path
        let viaDevice = try run(["import", "--dir", third, "/dev/stdin"], stdin: exported)
        #expect(viaDevice.status == 0, "\(viaDevice.stderr)")
        #expect(try run(["export", "--dir", third, "--format", "activities"]).stdout
                == run(["export", "--dir", source, "--format", "activities"]).stdout)
    }

    @Test func unreadableInputsAreNamedWithTheirPath() throws {
        let temp = TemporaryDirectory()
        let store = temp.file("store").path
        let directory = try run(["import", "--dir", store, temp.path])
        #expect(directory.status == 1)
        #expect(directory.stderr.contains("\(temp.path): is a directory"), "\(directory.stderr)")
        let missing = try run(["import", "--dir", store, temp.file("nope.jsonl").path])
        #expect(missing.status == 1 && missing.stderr.contains("\(temp.file("nope.jsonl").path): no such file"), "\(missing.stderr)")
        var results = [directory, missing]
        if getuid() != 0 {   // root reads any file
            let locked = temp.file("locked.jsonl")
            try write(goodLines, to: locked)
            chmod(locked.path, 0)
            let denied = try run(["import", "--dir", store, locked.path])
            #expect(denied.status == 1 && denied.stderr.contains("\(locked.path): permission denied"), "\(denied.stderr)")
            results.append(denied)
        }
        for result in results { #expect(!result.stderr.contains("NSCocoaErrorDomain") && !result.stderr.contains("error 256")) }
        #expect(!FileManager.default.fileExists(atPath: store), "nothing was created")
    }

    // MARK: import: unknown fields

    @Test(arguments: [
        (activityLine(3, start: "2025-01-04T10:00:00Z", end: nil, type: "bath")
            .replacingOccurrences(of: "\"endDate\":null", with: "\"enddate\":\"2025-01-04T10:30:00Z\""), "enddate", "endDate"),
        ("{\"event\":\"added\",\"activity\":" + activityLine(3, start: "2025-01-04T10:00:00Z", end: nil, type: "bath")
            .replacingOccurrences(of: "\"type\"", with: "\"Type\"") + "}", "Type", "type"),
        ("{\"event\":\"ended\",\"id\":\"\(ids[2].uuidString)\",\"at\":\"2025-01-04T10:00:00Z\",\"note\":\"late\"}", "note", nil),
    ])
    func unknownFieldIsRefusedUnlessLenient(line: String, field: String, meant: String?) throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let before = try run(["export", "--dir", store])
        let file = temp.file("typo.jsonl")
        try write([activityLine(4, start: "2025-01-04T11:00:00Z", end: nil, type: "nap"), line], to: file)
        let result = try run(["import", file.path, "--dir", store])
        #expect(result.status == 1)
        #expect(result.stderr.contains("typo.jsonl:2: unknown field \"\(field)\""), "\(result.stderr)")
        if let meant { #expect(result.stderr.contains("did you mean \"\(meant)\"?"), "\(result.stderr)") }
        #expect(result.stderr.contains("--lenient") && result.stderr.contains("nothing was imported"), "\(result.stderr)")
        #expect(try run(["export", "--dir", store]).stdout == before.stdout)

        // --lenient keeps the old behaviour: the unknown field is ignored.
        let lenient = try run(["import", file.path, "--dir", store, "--lenient"])
        if field == "Type" {
            // Without its type the activity is malformed whatever the leniency.
            #expect(lenient.status == 1 && lenient.stderr.contains("missing field \"type\""), "\(lenient.stderr)")
        } else {
            #expect(lenient.status == 0, "\(lenient.stderr)")
        }
    }

    @Test func exportedLinesWithTheirPositionsImportStrictly() throws {
        // position, recordedAt (export) and version (tail --json) are known fields.
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let tail = temp.file("tail.jsonl")
        try run(["tail", "--dir", store, "--json"]).stdout.write(to: tail, atomically: true, encoding: .utf8)
        let copy = temp.file("copy").path
        let result = try run(["import", tail.path, "--dir", copy])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try run(["export", "--dir", copy, "--format", "activities"]).stdout
                == run(["export", "--dir", store, "--format", "activities"]).stdout)
    }

    // MARK: snapshot

    @Test func snapshotReportsEveryFileItWrote() throws {
        let temp = TemporaryDirectory()
        let store = URL(filePath: try importedStore(temp))
        let result = try run(["snapshot", "--dir", store.path])
        #expect(result.status == 0, "\(result.stderr)")
        let folder = store.appending(path: "snapshots")
        let newest = try #require(names(in: folder).filter { $0.hasSuffix(".snap") }.map { $0.prefix(20) }.max())
        let written = names(in: folder).filter { $0.hasPrefix(newest) }
        #expect(written.count == 2, "\(written)")   // the entity versions and the activities
        #expect(result.stdout.contains("snapshot written at position \(Int(newest)!): \(written.count) files"), "\(result.stdout)")
        for name in written {
            #expect(result.stdout.contains("snapshots/\(name)"), "\(name) missing from \(result.stdout)")
        }
        #expect(result.stdout.contains("$entity-versions") && result.stdout.contains("activities"))
    }

    // MARK: read commands on a damaged log

    /// A store whose first (sealed) segment, covered by the snapshot, has a flipped byte in its
    /// second batch (positions 10…19), and a recording time between the first batch and the
    /// second (`replay --as-of` it needs only the first).
    /// - Parameter byte: The flipped byte's offset in the batch (default: in its payload).
    private func storeWithDamageUnderTheSnapshot(_ temp: TemporaryDirectory, sealed: Bool, byte: Int64 = 64 + 8) async throws -> (URL, String, between: Date) {
        let store = temp.file("store")
        let configuration = EventStore.Configuration(log: SegmentedLog.Configuration(segmentSize: sealed ? 4096 : 64 << 20))
        let repository = try EventSourcedActivityRepository.open(at: store, configuration: configuration)
        var between = Date()
        for batch in 0..<40 {
            try await repository.apply((0..<10).map { k in
                .added(ActivityModel(id: batch == 0 && k == 0 ? ids[0] : UUID(), startDate: t0 + Double(batch * 10 + k) * 600,
                                     endDate: t0 + Double(batch * 10 + k) * 600 + 300, type: "diaper"))
            })
            if batch == 0 {
                try await Task.sleep(for: .milliseconds(20))
                between = Date()
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        try await repository.close()   // a snapshot at 400: opens read no log before it
        let first = store.appending(path: "00000000000000000000.log")
        let scan = try SegmentScanner(file: try OpenFile.open(first.path, flags: O_RDONLY), basePosition: 0).scan()
        #expect(scan.batches.count > 3)
        // A payload byte of the second batch: neither a header nor the active segment's tail.
        let batch = scan.batches[1]
        #expect(batch.firstPosition == 10)
        try flipBit(in: first.path, at: batch.offset + byte)
        return (store, first.path, between)
    }

    @Test(arguments: [true, false])
    func readCommandsWarnAndExit3OnADamagedLog(sealed: Bool) async throws {
        let temp = TemporaryDirectory()
        let (store, damaged, _) = try await storeWithDamageUnderTheSnapshot(temp, sealed: sealed)
        let query = try run(["query", "--dir", store.path, "--json"])
        #expect(query.status == 3, "\(query.stderr)")
        #expect(query.stderr.contains("warning: the log is damaged") && query.stderr.contains(damaged), "\(query.stderr)")
        // The answer is printed (it comes from the checksummed snapshot), with the warning.
        #expect((try jsonObject(query.stdout) as? [Any])?.count == 400)
        for arguments in [["replay", "--position", "399"], ["export", "--format", "activities"], ["history", ids[0].uuidString]] {
            let result = try run(arguments + ["--dir", store.path])
            #expect(result.status == 3, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(damaged), "\(arguments): \(result.stderr)")
        }
        let export = try run(["export", "--dir", store.path])
        #expect(export.status == 3 && export.stderr.contains(damaged), "\(export.stderr)")
        // After repair the log is intact again: no warning, exit 0.
        #expect(try run(["repair", "--dir", store.path, "--yes"]).status == 0)
        let after = try run(["query", "--dir", store.path])
        #expect(after.status == 0 && !after.stderr.contains("warning"), "\(after.stderr)")
    }

    /// The read commands that scan the log from its start (`replay --as-of`, `history`,
    /// `streams`) answer from the events before the damaged batch when the question needs
    /// nothing of it, with the warning and exit 3, and stop with the damage (exit 3, never an
    /// exit 1 "not found") when it does.
    @Test(arguments: [true, false])
    func readCommandsAnswerFromTheEventsBeforeTheDamage(sealed: Bool) async throws {
        let temp = TemporaryDirectory()
        let (store, damaged, between) = try await storeWithDamageUnderTheSnapshot(temp, sealed: sealed)
        func expectAnswer(_ arguments: [String], _ stdout: (String) -> Bool, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let result = try run(arguments + ["--dir", store.path])
            #expect(result.status == 3, "\(arguments): \(result.stderr)", sourceLocation: sourceLocation)
            #expect(result.stderr.contains("warning: the log is damaged") && result.stderr.contains(damaged)
                    && !result.stderr.contains("error:"), "\(arguments): \(result.stderr)", sourceLocation: sourceLocation)
            #expect(stdout(result.stdout), "\(arguments): \(result.stdout)", sourceLocation: sourceLocation)
        }
        func expectDamageError(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
            let result = try run(arguments + ["--dir", store.path])
            #expect(result.status == 3 && result.stdout.isEmpty, "\(arguments): \(result.stdout)", sourceLocation: sourceLocation)
            #expect(result.stderr.contains("error:") && result.stderr.contains(damaged) && result.stderr.contains("position 10"),
                    "\(arguments): \(result.stderr)", sourceLocation: sourceLocation)
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        // Each answer is checked apart (no throw ends the test early), so that each fails on
        // code that stops with the damage. Before the damaged batch was recorded (its header,
        // intact, says when): the first batch's ten activities.
        try expectAnswer(["replay", "--as-of", formatter.string(from: between), "--json"]) { stdout in
            let summary = (try? jsonObject(stdout) as? [String: Any])?["summary"] as? [String: Any]
            return summary?["activities"] as? Int == 10
        }
        // Now: the state takes in the damaged batch.
        try expectDamageError(["replay", "--as-of", formatter.string(from: Date())])
        // An activity of the first batch: its event, and the warning that later ones may exist.
        let history = try run(["history", ids[0].uuidString, "--dir", store.path, "--json"])
        #expect(history.stderr.contains("later events"), "\(history.stderr)")
        try expectAnswer(["history", ids[0].uuidString, "--json"]) { (try? jsonObject($0) as? [Any])?.count == 1 }
        // An activity with no event before the damage may have some in it: not "no such activity".
        try expectDamageError(["history", UUID().uuidString])
        try expectDamageError(["history", "Person", "someone"])
        // The entity types and the streams as the first batch has them, saying so.
        try expectAnswer(["streams", "--json"]) { stdout in
            let rows = try? jsonObject(stdout) as? [[String: Any]]
            return rows?.count == 1 && rows?.first?["type"] as? String == "activity" && rows?.first?["events"] as? Int == 10
        }
        try expectAnswer(["streams", "activity", "--json"]) { (try? jsonObject($0) as? [Any])?.count == 10 }
        try expectDamageError(["streams", "Person"])
    }

    /// A damaged batch header is not trusted for its recording time: `replay --as-of` a time
    /// after every event before the batch stops with the damage, for the batch's events may
    /// have been recorded at or before it.
    @Test func replayAsOfDoesNotTrustADamagedBatchHeader() async throws {
        let temp = TemporaryDirectory()
        // A byte of the header's minimum record timestamp (offset 32).
        let (store, damaged, between) = try await storeWithDamageUnderTheSnapshot(temp, sealed: true, byte: 32)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let result = try run(["replay", "--as-of", formatter.string(from: between), "--dir", store.path])
        #expect(result.status == 3 && result.stdout.isEmpty, "\(result.stdout)")
        #expect(result.stderr.contains("error:") && result.stderr.contains(damaged) && result.stderr.contains("header checksum"), "\(result.stderr)")
    }
}
