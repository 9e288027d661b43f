import ArgumentParser
@testable import EventKernelTool
import Foundation
import Testing
import EventKernelTestSupport

// Issue 25, the CLI's arguments and output rows. The helpers `run`, `importedStore`, `goodLines`,
// `ids`, `write` and `jsonObject` are CLITests.swift's.

/// The value of `key` in every JSON Lines line of export's output.
private func exportedValues(_ store: String, _ key: String) throws -> [String] {
    try run("export", store).stdout.split(separator: "\n").map { line in
        try #require((try jsonObject(String(line)) as? [String: Any])?[key] as? String)
    }
}

/// RFC 4180 records (quoted fields may hold commas, quotes doubled, CR and LF).
private func parseCSV(_ text: String) -> [[String]] {
    var records: [[String]] = [], record: [String] = [], field = ""
    var quoted = false, index = text.unicodeScalars.startIndex
    let scalars = text.unicodeScalars
    while index < scalars.endIndex {
        let c = scalars[index]
        index = scalars.index(after: index)
        if quoted {
            if c == "\"" {
                if index < scalars.endIndex, scalars[index] == "\"" { field.unicodeScalars.append("\""); index = scalars.index(after: index) }
                else { quoted = false }
            } else { field.unicodeScalars.append(c) }
        } else if c == "\"" { quoted = true }
        else if c == "," { record.append(field); field = "" }
        else if c == "\r" { continue }
        else if c == "\n" { record.append(field); records.append(record); record = []; field = "" }
        else { field.unicodeScalars.append(c) }
    }
    return records
}

/// Splits an example command line as a shell would (single and double quotes, no expansion).
private func shellWords(_ line: String) -> [String] {
    var words: [String] = [], word = "", inWord = false
    var quote: Character?
    for c in line {
        if let q = quote {
            if c == q { quote = nil } else { word.append(c) }
        } else if c == "'" || c == "\"" { quote = c; inWord = true }
        else if c == " " { if inWord { words.append(word); word = ""; inWord = false } }
        else { word.append(c); inWord = true }
    }
    if inWord { words.append(word) }
    return words
}

/// The example lines (`eventkernel …`) of a command's discussion.
private func examples(_ command: any ParsableCommand.Type) -> [[String]] {
    // A pipeline or a list (`export a | import b -`, `verify && inspect`) is one example of each
    // command in it.
    command.configuration.discussion.split(separator: "\n")
        .map { $0.trimmingCharacters(in: .whitespaces) }
        .filter { $0.hasPrefix("eventkernel ") }
        .flatMap { $0.replacingOccurrences(of: " && ", with: " | ").components(separatedBy: " | ") }
        .map { $0.trimmingCharacters(in: .whitespaces) }
        .filter { $0.hasPrefix("eventkernel ") }
        .map { Array(shellWords($0).dropFirst()) }
}

@Suite("eventkernel arguments and output (issue 25)")
struct ArgumentsAndOutputTests {
    // MARK: The store as the first argument

    @Test func theStoreIsTheFirstPositionalArgumentOnEveryCommand() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        #expect(try run("verify", store).status == 0)
        #expect(try run("inspect", store).status == 0)
        #expect(try run("snapshot", store).status == 0)
        #expect(try run("repair", store, "--yes").stdout.contains("no damage in the log: nothing was dropped"))
        let byArgument = try run("query", store, "--json")
        #expect(byArgument.status == 0, "\(byArgument.stderr)")
        #expect(byArgument.stdout == (try run("query", "--dir", store, "--json")).stdout)
        #expect(try run("replay", store, "--position", "0", "--json").status == 0)
        #expect(try run("tail", store).stdout.split(separator: "\n").count == 5)
        #expect(try run("export", store).stdout == (try run("export", "--dir", store)).stdout)
        // The same store both ways is fine; two different ones are a usage error.
        #expect(try run("verify", store, "--dir", store + "/").status == 0)
        let twice = try run("verify", store, "--dir", temp.path)
        #expect(twice.status == 1 && twice.stderr.contains("given twice"), "\(twice.stderr)")
        let extra = try run("query", store, "surplus")
        #expect(extra.status == 1 && extra.stderr.contains("surplus"), "\(extra.stderr)")
    }

    #if PostgreSQL
    @Test func aPostgresURLCanStandInTheStoresPlace() throws {
        // Nothing listens on port 1: the URL was taken as a PostgreSQL log, not a directory.
        let result = try run("query", "postgres://nobody@127.0.0.1:1/nothing?sslmode=disable")
        #expect(result.status == 2 && result.stderr.contains("127.0.0.1:1"), "\(result.stderr)")
        let both = try run("query", "postgres://nobody@127.0.0.1:1/nothing", "--dir", "/tmp")
        #expect(both.status == 1, "\(both.stderr)")
    }
    #endif

    @Test func importAndHistoryTakeTheStoreBeforeTheirOperand() throws {
        let temp = TemporaryDirectory()
        let file = temp.file("good.jsonl")
        try write(goodLines, to: file)
        // import STORE FILE
        let store = temp.file("store").path
        let imported = try run("import", store, file.path)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.contains("into \(store)"))
        // import FILE (with --dir, or the default store) keeps working: one argument is the file.
        let other = temp.file("other").path
        #expect(try run("import", file.path, "--dir", other).status == 0)
        #expect(try run("export", other, "--format", "activities").stdout == (try run("export", store, "--format", "activities")).stdout)
        #expect(try run("import", "--dir", store).status == 1, "the file is required")
        // history STORE ID and history ID --dir STORE
        let a = try run("history", store, ids[1].uuidString, "--json")
        #expect(a.status == 0, "\(a.stderr)")
        #expect(a.stdout == (try run("history", ids[1].uuidString, "--dir", store, "--json")).stdout)
        let twice = try run("history", store, ids[1].uuidString, "--dir", other)
        #expect(twice.status == 1 && twice.stderr.contains("given twice"), "\(twice.stderr)")
    }

    /// Review 3.4: a plain file named as the type in the current directory is not the store
    /// given twice.
    @Test func historyTypeIDWithAFileOfTheTypesNameInTheCurrentDirectory() async throws {
        let temp = TemporaryDirectory("ekcli-type")
        try await writeLedger(temp.file("ledger"))
        try Data("not a store".utf8).write(to: temp.file("Account"))
        let history = try run(["history", "--dir", "ledger", "Account", accountIDs[0].uuidString, "--json"], in: temp.url)
        #expect(history.status == 0, "\(history.stderr)")
        try FileManager.default.createDirectory(at: temp.file("Transfer"), withIntermediateDirectories: true)
        let directory = try run(["history", "--dir", "ledger", "Transfer", accountIDs[2].uuidString], in: temp.url)
        #expect(directory.status == 1 && directory.stderr.contains("given twice, differently"), "\(directory.stderr)")
        // The same directory twice is not "differently" (a newcomer's probe).
        let same = try run(["history", "--dir", "ledger", "ledger", accountIDs[0].uuidString], in: temp.url)
        #expect(same.status == 1 && same.stderr.contains("the store is given twice: 'ledger' and --dir 'ledger'; give it once"), "\(same.stderr)")
    }

    /// A newcomer's probe: with EVENTKERNEL_STORE set, `streams Account` read Account as the
    /// store and advised setting EVENTKERNEL_STORE.
    @Test func aStoreArgumentBesideEVENTKERNEL_STOREIsSaidToWin() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let result = try run(["streams", "Account"], in: temp.url, environment: ["EVENTKERNEL_STORE": store])
        #expect(result.status == 2)
        #expect(result.stderr.contains("EVENTKERNEL_STORE (\(store)) is used only when no store is given"), "\(result.stderr)")
        #expect(!result.stderr.contains("set EVENTKERNEL_STORE"), "\(result.stderr)")
    }

    /// A newcomer's probe: an empty file was "no events (1 lines, 1 blank)".
    @Test func importOfAnEmptyOrBlankFileSaysWhatItHolds() throws {
        let temp = TemporaryDirectory()
        let empty = temp.file("empty.jsonl"), blank = temp.file("blank.jsonl")
        try Data().write(to: empty)
        try Data("\n\n \n".utf8).write(to: blank)
        let first = try run("import", temp.file("a").path, empty.path)
        #expect(first.status == 0 && first.stdout.contains("has no events (it is empty)"), "\(first.stdout)\(first.stderr)")
        let second = try run("import", temp.file("b").path, blank.path)
        #expect(second.status == 0 && second.stdout.contains("has no events (3 lines, all blank)"), "\(second.stdout)\(second.stderr)")
    }

    /// Review 3.4: with --postgres, history's first argument is the type, never the store
    /// directory that messages name.
    @Test func withPostgresTheTypeIsNotTheStoreDirectory() throws {
        let command = try HistoryCommand.parse(["--postgres", "postgres://u@localhost:5432/db", "Account", "A1"])
        #expect(command.target.type == "Account" && command.id == "A1")
        #expect(command.store.url.lastPathComponent != "Account", "\(command.store.url)")
        let streams = try StreamsCommand.parse(["--postgres", "postgres://u@localhost:5432/db", "Account"])
        #expect(streams.store.url.lastPathComponent != "Account", "\(streams.store.url)")
    }

    // MARK: --version

    @Test func versionPrintsTheVersionAndTheTraits() throws {
        let result = try run("--version")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == ToolVersion.text + "\n")
        #expect(result.stdout.contains(ToolVersion.number))
        #if PostgreSQL
        #expect(result.stdout.contains("PostgreSQL on"))
        #else
        #expect(result.stdout.contains("PostgreSQL off"))
        #endif
    }

    // MARK: Recording time and the activities' own time

    @Test func asOfIsRecordingTimeAndADateOutsideTheRecordedSpanIsWarnedAbout() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let recorded = try exportedValues(store, "recordedAt")
        // The README's old example: an activity date asked of recording time.
        let readme = try run("replay", store, "--as-of", "2025-01-02", "--type", "sleep")
        #expect(readme.status == 0)
        #expect(readme.stdout.contains("State as recorded at or before 2025-01-02"), "\(readme.stdout)")
        #expect(readme.stderr.contains("--as-of 2025-01-02 is recording time"), "\(readme.stderr)")
        #expect(readme.stderr.contains("before the first event was recorded"))
        #expect(readme.stderr.contains("from \(recorded.first!) to \(recorded.last!)"), "\(readme.stderr)")
        // The day the events were recorded, as a bare date, covers them all (it used to be its midnight).
        let day = String(recorded.last!.prefix(10))
        let thatDay = try run("replay", store, "--as-of", day, "--json")
        #expect(thatDay.status == 0 && !thatDay.stderr.contains("warning"), "\(thatDay.stderr)")
        let object = try #require(try jsonObject(thatDay.stdout) as? [String: Any])
        #expect((object["summary"] as? [String: Any])?["activities"] as? Int == 3)
        #expect((object["recorded"] as? [String: Any])?["first"] as? String == recorded.first)
        // Inside the span: no warning; after it, the warning says the state is the current one.
        let inside = try run("replay", store, "--as-of", recorded.last!, "--json")
        #expect(inside.status == 0 && inside.stderr.isEmpty, "\(inside.stderr)")
        // An event's own recordedAt includes it: compared in the log's nanoseconds, not a Date's.
        let insideObject = try #require(try jsonObject(inside.stdout) as? [String: Any])
        #expect((insideObject["summary"] as? [String: Any])?["activities"] as? Int == 3)
        #expect(insideObject["asOf"] as? String == recorded.last)
        let after = try run("replay", store, "--as-of", "2999-01-01")
        #expect(after.status == 0 && after.stderr.contains("after the last event was recorded"), "\(after.stderr)")
    }

    @Test func recordingTimeBoundsAreExactNanoseconds() throws {
        #expect(try ISODate.parseRecordingTimeUpperBound("2025-01-02T08:00:00.123456789999Z").nanosecondsSince1970
                == 1_735_804_800_123_456_789)
        #expect(try ISODate.parseRecordingTimeUpperBound("2025-01-02T08:00:00.5+01:00").nanosecondsSince1970 == 1_735_801_200_500_000_000)
        #expect(try ISODate.parseRecordingTimeUpperBound("2025-01-02").nanosecondsSince1970 == 1_735_862_400_000_000_000 - 1)
        #expect(try ISODate.parseRecordingTimeUpperBound("9999-01-01") == .max)
        #expect(throws: ISODate.ParseError.self) { try ISODate.parseRecordingTimeUpperBound("yesterday") }
    }

    @Test func replayJSONHasOneShapeWithAndWithoutQueryFlags() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let plain = try #require(try jsonObject(try run("replay", store, "--position", "4", "--json").stdout) as? [String: Any])
        let queried = try #require(try jsonObject(try run("replay", store, "--position", "4", "--type", "feeding", "--json").stdout) as? [String: Any])
        let keys: Set<String> = ["asOf", "position", "recorded", "summary", "matched", "activities"]
        #expect(Set(plain.keys) == keys && Set(queried.keys) == keys)
        #expect((plain["activities"] as? [Any])?.count == 3 && plain["matched"] as? Int == 3)
        #expect((queried["activities"] as? [[String: Any]])?.map { $0["id"] as? String } == [ids[1].uuidString])
        #expect((queried["summary"] as? [String: Any])?["activities"] as? Int == 3)
        #expect(plain["position"] as? Int == 4)
        // jsonl and csv are the rows alone.
        #expect(try run("replay", store, "--position", "4", "--format", "jsonl").stdout.split(separator: "\n").count == 3)
    }

    // MARK: Query answers

    @Test func anUnknownTypeIsWarnedAboutWithTheKnownOnes() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let result = try run("query", store, "--type", "tummyTime")
        #expect(result.status == 0)
        #expect(result.stderr.contains("eventkernel: warning: no activity has type \"tummyTime\""), "\(result.stderr)")
        #expect(result.stderr.contains("did you mean \"Tummy time\"?"))
        #expect(result.stderr.contains("known types: \"Tummy time\", \"feeding\", \"sleep\""), "\(result.stderr)")
        let right = try run("query", store, "--type", "Tummy time")
        #expect(right.status == 0 && right.stderr.isEmpty && right.stdout.contains("1 activity"), "\(right.stdout)\(right.stderr)")
    }

    @Test func aLimitedAnswerSaysHowManyMatched() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        #expect(try run("query", store, "--limit", "2").stdout.hasSuffix("2 of 3 activities\n"))
        #expect(try run("query", store, "--limit", "3").stdout.hasSuffix("3 activities\n"))
        #expect(try run("query", store, "--limit", "1", "--type", "sleep").stdout.hasSuffix("1 activity\n"))
    }

    @Test func aBareDateAsARangesEndCoversTheWholeDay() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        // The feeding starts 2025-01-02T08:00:00.25Z; the sleep runs 2025-01-01T20:00 to 2025-01-02T06:30.
        let starting = try jsonObject(try run("query", store, "--starting-in", "2025-01-02...2025-01-02", "--json").stdout) as? [[String: Any]]
        #expect(starting?.map { $0["id"] as? String } == [ids[1].uuidString])
        let overlapping = try jsonObject(try run("query", store, "--overlapping", "2025-01-02...2025-01-02", "--oldest-first", "--json").stdout) as? [[String: Any]]
        #expect(overlapping?.map { $0["id"] as? String } == [ids[0].uuidString, ids[1].uuidString])
        // A date-time stands for itself.
        let instant = try jsonObject(try run("query", store, "--starting-in", "2025-01-02...2025-01-02T08:00:00Z", "--json").stdout) as? [[String: Any]]
        #expect(instant?.isEmpty == true)
        // The rule itself: the last instant before the next midnight.
        let end = try ISODate.parseInclusiveUpperBound("2025-01-02")
        let next = try ISODate.parse("2025-01-03")
        #expect(end < next && end >= next.addingTimeInterval(-1e-6))
        #expect(try ISODate.parseInclusiveUpperBound("2025-01-02T08:00Z") == (try ISODate.parse("2025-01-02T08:00Z")))
    }

    // MARK: Negative numbers and tail

    @Test func negativeCountsAreRefusedWithAReason() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        for arguments in [["query", store, "--limit", "-1"], ["query", store, "--limit=-1"], ["replay", store, "--position", "1", "--limit", "-3"]] {
            let result = try run(arguments)
            #expect(result.status == 1 && result.stderr.contains("--limit must be ≥ 0"), "\(arguments): \(result.stderr)")
        }
        let from = try run("tail", store, "--from", "-5")
        #expect(from.status == 1 && from.stderr.contains("--from must be ≥ 0") && from.stderr.contains("-n 5"), "\(from.stderr)")
        let lines = try run("tail", store, "-n", "-2")
        #expect(lines.status == 1 && lines.stderr.contains("-n must be ≥ 0"), "\(lines.stderr)")
        let position = try run("replay", store, "--position", "-1")
        #expect(position.status == 1 && position.stderr.contains("--position must be ≥ 0"), "\(position.stderr)")
    }

    @Test func tailPrintsTheLastTenByDefaultAndTheLastNWithN() throws {
        let temp = TemporaryDirectory()
        let file = temp.file("twelve.jsonl")
        try write((0..<12).map { i in
            "{\"id\":\"00000000-0000-4000-8000-1000000000\(String(format: "%02d", i))\",\"startDate\":\"2025-02-01T10:\(String(format: "%02d", i)):00Z\",\"type\":\"bath\"}"
        }, to: file)
        let store = temp.file("store").path
        #expect(try run("import", store, file.path).status == 0)
        let positions = { (result: RunResult) in result.stdout.split(separator: "\n").map { $0.split(separator: " ").first.map(String.init) ?? "" } }
        #expect(positions(try run("tail", store)) == (2..<12).map(String.init))
        #expect(positions(try run("tail", store, "-n", "3")) == ["9", "10", "11"])
        #expect(positions(try run("tail", store, "--lines", "3")) == ["9", "10", "11"])
        #expect(try run("tail", store, "-n", "0").stdout.isEmpty)
        #expect(try run("tail", store, "-n", "50").stdout.split(separator: "\n").count == 12)
        #expect(try run("tail", store, "--from", "0").stdout.split(separator: "\n").count == 12)
        #expect(try run("tail", store, "-n", "1", "--from", "0").status == 1)
    }

    // MARK: One timestamp format

    @Test func everyCommandPrintsRecordingTimesWithTheLogsNanoseconds() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let exported = try exportedValues(store, "recordedAt")
        let inspect = try #require(try jsonObject(try run("inspect", store, "--json").stdout) as? [String: Any])
        let totals = try #require(inspect["totals"] as? [String: Any])
        #expect(exported.contains(try #require(totals["firstRecordedAt"] as? String)), "\(totals) vs \(exported)")
        #expect(exported.contains(try #require(totals["lastRecordedAt"] as? String)), "\(totals) vs \(exported)")
        #expect(try run("inspect", store).stdout.contains("\(exported.first!) … \(exported.last!)"))
        let tail = try run("tail", store, "--from", "0", "--json").stdout.split(separator: "\n").map { line in
            (try? jsonObject(String(line)) as? [String: Any])?["recordedAt"] as? String
        }
        #expect(tail == exported)
        let history = try #require(try jsonObject(try run("history", store, ids[1].uuidString, "--json").stdout) as? [[String: Any]])
        #expect(history.map { $0["recordedAt"] as? String } == [exported[1], exported[4]])
    }

    // MARK: Output formats

    /// A store (imported) of one running activity, `ids[0]`, whose type is `type`.
    static func storeOfOneActivity(ofType type: String, in temp: TemporaryDirectory) throws -> String {
        let store = temp.file("store").path
        let file = temp.file("odd.jsonl")
        try write([
            "{\"id\":\"\(ids[0].uuidString)\",\"startDate\":\"2025-01-01T20:00:00Z\",\"endDate\":null,\"type\":\(ActivityJSON.escape(type))}",
        ], to: file)
        #expect(try run("import", store, file.path).status == 0)
        return store
    }

    @Test func csvIsRFC4180() throws {
        #expect(Output.csvField("plain") == "plain")
        #expect(Output.csvField("a,b") == "\"a,b\"")
        #expect(Output.csvField("say \"hi\"") == "\"say \"\"hi\"\"\"")
        #expect(Output.csvField("two\nlines") == "\"two\nlines\"")
        #expect(Output.csvField("crlf\r\nend") == "\"crlf\r\nend\"")
        #expect(Output.csvRecord(["a", "", "b c"]) == "a,,b c\r\n")

        let temp = TemporaryDirectory()
        let odd = "feed, \"left\" side\nthen right"
        let store = try Self.storeOfOneActivity(ofType: odd, in: temp)
        let csv = try run("query", store, "--format", "csv")
        #expect(csv.status == 0)
        #expect(csv.stdout.hasPrefix("id,type,startDate,endDate\r\n"))
        let records = parseCSV(csv.stdout)
        #expect(records == [["id", "type", "startDate", "endDate"], [ids[0].uuidString, odd, "2025-01-01T20:00:00Z", ""]])
    }

    /// A type name holding control characters (a NUL, a tab, an escape sequence) shows escaped
    /// in a table, one row per activity and nothing sent to the terminal raw, and stays exact in
    /// CSV (quoted) and JSON.
    @Test func controlCharactersAreEscapedInTablesAndExactInMachineFormats() throws {
        #expect(Output.visible("plain é") == "plain é")
        #expect(Output.visible("a\u{0}b\tc\u{1B}[31m\u{7F}\u{85}") == "a\\u{0}b\\u{9}c\\u{1B}[31m\\u{7F}\\u{85}")
        #expect(Output.csvField("a\u{0}b") == "\"a\u{0}b\"")
        #expect(Output.csvField("tab\there") == "\"tab\there\"")

        let temp = TemporaryDirectory()
        let odd = "nap\u{0}\u{1B}[2J\tnow"
        let store = try Self.storeOfOneActivity(ofType: odd, in: temp)
        let table = try run("query", store)
        #expect(table.status == 0 && table.stdout.contains("nap\\u{0}\\u{1B}[2J\\u{9}now"), "\(table.stdout)")
        #expect(!table.stdout.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "\(table.stdout)")
        let csv = try run("query", store, "--format", "csv")
        #expect(parseCSV(csv.stdout) == [["id", "type", "startDate", "endDate"], [ids[0].uuidString, odd, "2025-01-01T20:00:00Z", ""]])
        let json = try #require(try jsonObject(try run("query", store, "--json").stdout) as? [[String: Any]])
        #expect(json.first?["type"] as? String == odd)
        let tail = try run("tail", store)
        #expect(tail.status == 0 && !tail.stdout.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "\(tail.stdout)")
    }

    @Test func everyListingCommandTakesEveryFormat() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let commands: [[String]] = [
            ["query", store], ["replay", store, "--position", "4"], ["history", store, ids[1].uuidString],
            ["tail", store], ["verify", store], ["inspect", store],
        ]
        for command in commands {
            for format in OutputFormat.allCases {
                let result = try run(command + ["--format", format.rawValue])
                #expect(result.status == 0, "\(command) \(format): \(result.stderr)")
                switch format {
                case .json:
                    #expect((try? jsonObject(result.stdout)) != nil, "\(command): \(result.stdout)")
                    // --json is --format json wherever it was offered (tail: JSON Lines, as it always was).
                    if command[0] != "tail" {
                        #expect(try run(command + ["--json"]).stdout == result.stdout, "\(command)")
                    }
                case .jsonl:
                    for line in result.stdout.split(separator: "\n") {
                        #expect((try? jsonObject(String(line))) is [String: Any], "\(command): \(line)")
                    }
                case .csv:
                    let records = parseCSV(result.stdout)
                    #expect(!records.isEmpty && records.allSatisfy { $0.count == records[0].count }, "\(command): \(result.stdout)")
                case .table:
                    #expect(!result.stdout.isEmpty)
                }
            }
        }
        #expect(try run("tail", store, "--json").stdout == (try run("tail", store, "--format", "jsonl")).stdout)
        let clash = try run("query", store, "--json", "--format", "csv")
        #expect(clash.status == 1 && clash.stderr.contains("--json"), "\(clash.stderr)")
        #expect(try run("tail", store, "--follow", "--format", "json").status == 1)
    }

    /// `export --output` writes into the path as a shell's `>` does: through a symbolic link,
    /// into the same file (a hard link sees it), never a new file renamed over it, which turned a
    /// link into a file and, run as root with `--output /dev/null`, the null device into a file.
    @Test func exportOutputWritesIntoTheFileThePathNames() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let target = temp.file("target.jsonl"), link = temp.file("link.jsonl"), hardLink = temp.file("hard.jsonl")
        try write(["stale"], to: target)
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        try FileManager.default.linkItem(at: target, to: hardLink)
        let result = try run("export", store, "--output", link.path)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link.path) == target.path)
        let written = try String(contentsOf: target, encoding: .utf8)
        #expect(written.split(separator: "\n").count == goodLines.count, "\(written)")
        #expect(!written.contains("stale"))
        #expect(try String(contentsOf: hardLink, encoding: .utf8) == written)
        // A path that cannot be opened: exit 4, naming it and why.
        let missing = temp.file("no-such-directory/out.jsonl")
        let failed = try run("export", store, "--output", missing.path)
        #expect(failed.status == 4)
        #expect(failed.stderr.contains("cannot open \(missing.path) for writing: No such file or directory"), "\(failed.stderr)")
    }

    /// A newcomer's probe: `inspect` of a damaged log said DAMAGED but exited 0, with totals
    /// that stop at the damage. Damage is exit 3 wherever a command meets it.
    @Test func inspectOfADamagedLogExits3() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        try flipBit(in: store + "/00000000000000000000.log", at: 40)
        for arguments in [["inspect", store], ["inspect", store, "--json"], ["inspect", store, "--format", "csv"]] {
            let result = try run(arguments)
            #expect(result.status == 3, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("the log is damaged"), "\(arguments): \(result.stderr)")
        }
        let json = try #require(try jsonObject(try run("inspect", store, "--json").stdout) as? [String: Any])
        #expect(json["intact"] as? Bool == false)
    }

    /// A newcomer's probe: a damaged snapshot made verify send the user to `repair`, which
    /// found nothing to do, and verify failed again: a loop. Verify now says the log is intact
    /// and to mend the file as its message says; doing so makes the store verify.
    @Test func verifyOfDamageOutsideTheLogDoesNotSendTheUserToRepair() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        #expect(try run("snapshot", store).status == 0)
        let snapshots = URL(filePath: store).appending(path: "snapshots")
        let files = try FileManager.default.contentsOfDirectory(atPath: snapshots.path).filter { $0.hasSuffix(".snap") }
        let damaged = snapshots.appending(path: try #require(files.first))
        var bytes = try Data(contentsOf: damaged)
        bytes[bytes.count - 3] ^= 0xFF
        try bytes.write(to: damaged)
        let verify = try run("verify", store)
        #expect(verify.status == 3)
        #expect(verify.stdout.contains("DAMAGED: the log is intact; mend each file named above as its message says"), "\(verify.stdout)")
        #expect(!verify.stdout.contains("repair --yes"), "\(verify.stdout)")
        #expect(verify.stdout.contains("delete the file, then run `eventkernel snapshot`"), "\(verify.stdout)")
        let repair = try run("repair", store, "--yes")
        #expect(repair.status == 0 && repair.stdout.contains("repair mends only the log"), "\(repair.stdout)")
        try FileManager.default.removeItem(at: damaged)
        #expect(try run("verify", store).status == 0)
    }

    /// A newcomer's probe: `export --output STORE/<its segment>` truncated the store's only
    /// segment and exited 0. Every way of naming a file inside the store is refused before
    /// anything is opened: the segment itself, a new file in its snapshots directory, a
    /// symbolic link to the segment from outside, the store directory itself.
    @Test func exportNeverWritesIntoTheStore() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let segment = URL(filePath: store).appending(path: "00000000000000000000.log")
        let before = try Data(contentsOf: segment)
        let link = temp.file("innocent.jsonl")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: segment)
        for output in [segment.path, store + "/snapshots/new.jsonl", link.path, store, store + "/../" + URL(filePath: store).lastPathComponent + "/x.jsonl"] {
            let result = try run("export", store, "--output", output)
            #expect(result.status == 1, "\(output): \(result.stderr)")
            #expect(result.stderr.contains("is inside the store"), "\(output): \(result.stderr)")
        }
        #expect(try Data(contentsOf: segment) == before)
        #expect(!FileManager.default.fileExists(atPath: store + "/snapshots/new.jsonl"))
        #expect(try run("verify", store).status == 0)
    }

    @Test func queryJSONLinesImportBack() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)
        let rows = temp.file("rows.jsonl")
        try run("query", store, "--format", "jsonl", "--oldest-first").stdout.write(to: rows, atomically: true, encoding: .utf8)
        let copy = temp.file("copy").path
        #expect(try run("import", copy, rows.path).status == 0)
        #expect(try run("export", copy, "--format", "activities").stdout == (try run("export", store, "--format", "activities")).stdout)
    }

    // MARK: Examples in help

    @Test func everySubcommandsHelpShowsExamplesThatParse() throws {
        let subcommands = EventKernelCommand.configuration.subcommands
        for command in [EventKernelCommand.self] + subcommands {
            let lines = examples(command)
            #expect(!lines.isEmpty, "\(command.configuration.commandName ?? "?") has no example")
            for arguments in lines {
                #expect(throws: Never.self, "\(arguments)") { _ = try EventKernelCommand.parseAsRoot(arguments) }
            }
            let name = command.configuration.commandName ?? ""
            let help = try run(name == "eventkernel" ? ["--help"] : [name, "--help"])
            #expect(help.stdout.contains("Examples:"), "\(name): \(help.stdout)")
        }
    }

    @Test func theReadOnlyExamplesRunAgainstASmallStore() throws {
        let temp = TemporaryDirectory()
        let file = temp.file("good.jsonl")
        try write(goodLines, to: file)
        #expect(try run(["import", "demo", file.path], in: temp.url).status == 0)
        let readOnly: Set<String> = ["query", "replay", "history", "streams", "tail", "verify", "inspect", "export", "snapshot", "repair"]
        // A pipeline's reader of standard input (`export demo | import demo-copy -`) is given
        // what the writer before it writes, as a file: never the test process's own stdin.
        let exported = temp.file("exported.jsonl")
        #expect(try run(["export", "demo", "--output", exported.path], in: temp.url).status == 0)
        for command in EventKernelCommand.configuration.subcommands where readOnly.contains(command.configuration.commandName ?? "") {
            for arguments in examples(command) where !arguments.contains("--follow") {
                let result = try run(arguments, stdin: arguments.last == "-" ? exported : nil, in: temp.url)
                #expect(result.status == 0, "\(arguments): \(result.stderr)")
            }
        }
    }
}
