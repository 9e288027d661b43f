import Foundation
import Testing
import EventKernel
import EventLog
import EventKernelTestSupport
@testable import EventKernelTool

/// A stay: true from `from` until `until` (unset: still).
struct Stay: Identifiable, Codable, Sendable, Equatable {
    var id: String
    var guest: String
    var from: Date
    var until: Date?
}

/// Stays: s1 from day 0 to day 2, s2 from day 1 (open), s3 from day 5 to day 6.
func writeStays(_ directory: URL) async throws {
    let store = try EventStore.open(at: directory, snapshotPolicy: .never)
    let stays = try EventSourcedRepository<Stay>(store: store, typeName: "Stay")
    try await stays.add(Stay(id: "s1", guest: "ann", from: t0, until: t0.addingTimeInterval(2 * day)))
    try await stays.add(Stay(id: "s2", guest: "bo", from: t0.addingTimeInterval(day), until: nil))
    try await stays.add(Stay(id: "s3", guest: "cy", from: t0.addingTimeInterval(5 * day), until: t0.addingTimeInterval(6 * day)))
    try await store.close()
}

@Suite struct GenericQueryTests {
    func ids(_ result: RunResult) throws -> [String] {
        #expect(result.status == 0, "\(result.stderr)")
        let rows = try #require(try object(result.stdout)["rows"] as? [[String: Any]])
        return rows.compactMap { $0["id"] as? String }
    }

    @Test func whereComparesEachFieldAsTheKindItStores() async throws {
        let temp = TemporaryDirectory("ek-query")
        let store = temp.file("ledger").path
        try await writeLedger(URL(filePath: store))
        let (alice, bob) = (accountIDs[0].uuidString, accountIDs[1].uuidString)
        // A decimal compared as a number: "87.75" < "100" as text would leave Alice out.
        let below = try run("query", store, "--type", "Account", "--where", "balance<100", "--json")
        #expect(try ids(below) == [alice, bob])
        #expect(try object(below.stdout)["plan"] as? String == "scan")
        #expect(below.stderr.contains("plan: scan (2 entities of Account"), "\(below.stderr)")
        // A date compared as a date: the same instant written with an offset.
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "opened<=2025-01-01T01:00:00+01:00", "--json")) == [alice])
        // Several --where are AND; != and a string.
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "balance>=0", "--where", "name!=Alice", "--json")) == [bob])
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "name=Alice", "--json")) == [alice])
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "name = Alice", "--json")) == [alice], "spaces around =")
        // A double, and an optional left out of one entity (Alice's overdraft is nil).
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "overdraft<0", "--json")) == [bob])
        // A bare date is its whole day (UTC): Bob opened at 00:00:00.125 on it.
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "opened<=2025-01-01", "--json")) == [alice, bob])
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "opened=2025-01-01", "--json")) == [alice, bob])
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "opened>2025-01-01", "--json")) == [])
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "opened<2025-01-01", "--json")) == [])
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "opened>=2025-01-01", "--json")) == [alice, bob])
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "opened>2025-01-01T00:00Z", "--json")) == [bob])
        // Null: an optional left out is null (Alice's overdraft), whatever the field holds elsewhere.
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "overdraft=null", "--json")) == [alice])
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "overdraft!=null", "--json")) == [bob])
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "opened!=null", "--json")) == [alice, bob])
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "opened=null", "--json")) == [])
        let nullRange = try run("query", store, "--type", "Account", "--where", "overdraft<null")
        #expect(nullRange.status == 1 && nullRange.stderr.contains("null has no order"), "\(nullRange.stderr)")
        // --order and --limit: matched counts before the limit.
        let top = try run("query", store, "--type", "Account", "--order", "balance:desc", "--limit", "1", "--json")
        #expect(try ids(top) == [alice])
        #expect(try object(top.stdout)["matched"] as? Int == 2)
        #expect(try ids(try run("query", store, "--type", "Account", "--order", "balance", "--json")) == [bob, alice])
        let table = try run("query", store, "--type", "Account", "--where", "balance<100", "--limit", "1")
        #expect(table.status == 0)
        #expect(table.stdout.hasSuffix("1 of 2 entities\n"), "\(table.stdout)")
        // Failure paths: a field no entity has, a value of the wrong kind, a range on text.
        let misspelt = try run("query", store, "--type", "Account", "--where", "balanse>=1")
        #expect(misspelt.status == 1)
        #expect(misspelt.stderr.contains("--where balanse>=1: no entity of Account has a field \"balanse\"; its fields: balance, id, name"), "\(misspelt.stderr)")
        let notADate = try run("query", store, "--type", "Account", "--where", "opened>=yesterday")
        #expect(notADate.status == 1)
        #expect(notADate.stderr.contains("opened holds dates, and \"yesterday\" is not an ISO 8601 date"), "\(notADate.stderr)")
        let dateOfNumbers = try run("query", store, "--type", "Account", "--where", "balance<=2025-01-01")
        #expect(dateOfNumbers.status == 1 && dateOfNumbers.stderr.contains("is a date: a type written with EntitySchema(codec: .json) stores a Date as a plain number"), "\(dateOfNumbers.stderr)")
        let notANumber = try run("query", store, "--type", "Account", "--where", "balance>=lots")
        #expect(notANumber.status == 1 && notANumber.stderr.contains("balance holds numbers"), "\(notANumber.stderr)")
        // Text Double reads but Decimal does not (hex), or reads only in part: refused, not compared as 0.
        for text in ["0x10", "1.5abc", "inf", "1."] {
            let odd = try run("query", store, "--type", "Account", "--where", "balance>=\(text)")
            #expect(odd.status == 1 && odd.stderr.contains("is not a number"), "\(text): \(odd.stderr)")
        }
        // An exponent is read exactly: 87.75 >= 87 and 87.75 < 87.76, both ways of writing.
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "balance>=8.7e1", "--json")) == [alice])
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "balance>=8.776e1", "--json")) == [])
        // --type alone naming an entity type no activity has: its entities, not "0 activities".
        let alone = try run("query", store, "--type", "Account", "--json")
        #expect(try ids(alone) == [alice, bob])
        #expect(try object(alone.stdout)["entityType"] as? String == "Account")
        // A type the store has no event of, alone: the activities' answer (the fold found none).
        let absentAlone = try run("query", store, "--type", "Acount")
        #expect(absentAlone.status == 0 && absentAlone.stderr.contains("no activity has type \"Acount\""), "\(absentAlone.stderr)")
        let unordered = try run("query", store, "--type", "Account", "--order", "tags")
        #expect(unordered.status == 1 && unordered.stderr.contains("--order tags: tags holds arrays, which have no order"), "\(unordered.stderr)")
        let textRange = try run("query", store, "--type", "Account", "--where", "name>A")
        #expect(textRange.status == 1 && textRange.stderr.contains("ranges are on dates and numbers"), "\(textRange.stderr)")
        let noOperator = try run("query", store, "--type", "Account", "--where", "balance")
        #expect(noOperator.status == 1 && noOperator.stderr.contains("expected FIELD=VALUE"), "\(noOperator.stderr)")
        let noType = try run("query", store, "--type", "Acount", "--where", "balance>=1")
        #expect(noType.status == 1 && noType.stderr.contains("its entity types: Account, Transfer"), "\(noType.stderr)")
        #expect(try run("query", store, "--where", "balance>=1").status != 0, "no --type")
        #expect(try run("query", store, "--type", "Account", "--where", "balance>=1", "--oldest-first").status != 0)
    }

    /// Numbers are compared exactly as decimals wherever both are one, never read as 0.
    /// A newcomer's probe: `query ledger --type Account --after 2025-01-01` printed "0
    /// activities" and exited 0, though Account is an entity type of the store; a type the
    /// store does not hold did not list the store's types; `--type activity --where …` said to
    /// give the type once, though it was.
    @Test func anActivityQueryOfAnotherEntityTypeIsRefusedNotAnsweredEmpty() async throws {
        let temp = TemporaryDirectory("ek-query")
        let store = temp.file("ledger").path
        try await writeLedger(URL(filePath: store))
        for arguments in [["--after", "2025-01-01"], ["--oldest-first"], ["--type", "Transfer"]] {
            let result = try run(["query", store, "--type", "Account"] + arguments)
            #expect(result.status == 1, "\(arguments): \(result.stdout)")
            #expect(result.stderr.contains("\"Account\" is an entity type of this store, not an activity type"), "\(arguments): \(result.stderr)")
        }
        let unknown = try run("query", store, "--type", "Nope", "--after", "2025-01-01")
        #expect(unknown.status == 0)
        #expect(unknown.stderr.contains("the store's other entity types") && unknown.stderr.contains("\"Account\""), "\(unknown.stderr)")
        let activity = try run("query", store, "--type", "activity", "--where", "type=sleep")
        #expect(activity.status == 1 && activity.stderr.contains("activities are queried with their own flags"), "\(activity.stderr)")
    }

    @Test func numbersCompareExactly() throws {
        func order(_ a: String, _ b: String) throws -> ComparisonResult {
            let x = try #require(GenericQuery.Number(a), "\(a)"), y = try #require(GenericQuery.Number(b), "\(b)")
            return x.compare(y)
        }
        let huge = "1" + String(repeating: "0", count: 200), tiny = "0." + String(repeating: "0", count: 200) + "1"
        #expect(try order("5", huge) == .orderedAscending, "a Decimal cannot read it: not 0")
        #expect(try order("0", tiny) == .orderedAscending)
        #expect(try order("-0", "0." + String(repeating: "0", count: 200)) == .orderedSame)
        #expect(try order("9007199254740993", "9.007199254740992e15") == .orderedDescending, "equal as doubles")
        #expect(try order("12345678901234567890.5", "1.2345678901234567890e19") == .orderedDescending)
        #expect(try order("1e+16", "10000000000000001") == .orderedAscending)
        #expect(try order("18446744073709551615", "18446744073709551614") == .orderedDescending, "UInt64")
        #expect(try order("-9223372036854775808", "-9223372036854775807") == .orderedAscending, "Int64")
        #expect(try order("1e-300", "0") == .orderedDescending, "beyond a Decimal")
        #expect(try order("1e-300", "2e-300") == .orderedAscending)
        // Beyond a Decimal's exponent or digits, and beyond a Double's: still exact.
        #expect(try order("1e200", "1.00000000000000001e200") == .orderedAscending)
        #expect(try order("1.2345678901234567890123456789012345678e128", "1.2345678901234567890123456789012345679e128") == .orderedAscending)
        #expect(try order(String(repeating: "1", count: 39), String(repeating: "1", count: 38) + "2") == .orderedAscending, "39 digits")
        #expect(try order("1e-400", "0") == .orderedDescending)
        #expect(try order("-1e400", "-2e400") == .orderedDescending)
        #expect(try order("1.5e-130", "15e-131") == .orderedSame)
        for text in ["1.", ".5", "1e", "1e+", "0x10", "inf", "1e1234567890"] {
            #expect(GenericQuery.Number(text) == nil, "\(text)")
        }
    }

    /// A stored double is its binary value: a literal is compared with it exactly, unless the
    /// literal is a double's own shortest text (what the tool shows), which stands for it.
    @Test func aStoredDoubleIsComparedAtItsExactValue() throws {
        func order(stored: String, _ literal: String, in domain: GenericQuery.Number.Domain = .double) throws -> ComparisonResult {
            let x = try #require(GenericQuery.Number(stored, domain: domain)), y = try #require(GenericQuery.Number(literal))
            return x.compare(literal: y)
        }
        let stored = "1.2345678901234567e-125"
        #expect(try order(stored: stored, "1.2345678901234566e-125") == .orderedDescending, "Decimal rounded this below -128")
        #expect(try order(stored: stored, "1.2345678901234568e-125") != .orderedSame, "rounds to the same double, but is not its value")
        #expect(try order(stored: stored, stored) == .orderedSame)
        #expect(try order(stored: "1e200", "1.00000000000000001e200") != .orderedSame)
        #expect(try order(stored: "1e200", "1e200") == .orderedSame)
        #expect(try order(stored: "0.1", "0.1") == .orderedSame)
        // The double 0.1 is 0.1000000000000000055511151231257827…: above 0.1000000000000000055.
        #expect(try order(stored: "0.1", "0.1000000000000000055") == .orderedDescending)
        #expect(try order(stored: "0.1", "0.1000000000000000056") == .orderedAscending)
        #expect(try order(stored: "0.1", "0.1000000000000000055511151231257827021181583404541015625") == .orderedSame, "its exact value")
        #expect(try order(stored: "5e-324", "0") == .orderedDescending, "the least subnormal")
        #expect(try order(stored: "-5e-324", "0") == .orderedAscending)
        #expect(try order(stored: "1.7976931348623157e308", "1.7976931348623157e308") == .orderedSame)
        #expect(try order(stored: "0.1", "0.1", in: .float) == .orderedSame, "a Float's shortest text")
        #expect(try order(stored: "0.1", "0.10000000149", in: .float) == .orderedDescending, "the float 0.1 is 0.100000001490116…")
        #expect(try order(stored: "0.1", "0.1000000015", in: .float) == .orderedAscending)
        // How a stored value is read: a fraction or exponent is a double's, an integer and a
        // $decimal of any length exact (39 digits blocked every query on the field).
        if case .number(let n) = GenericQuery.Typed(.number(stored)) { #expect(n.domain == .double) } else { Issue.record("not a number") }
        if case .number(let n) = GenericQuery.Typed(.number("12")) { #expect(n.domain == .exact) } else { Issue.record("not a number") }
        let long = String(repeating: "9", count: 39)
        if case .number(let n) = GenericQuery.Typed(.object([(key: "$decimal", value: .string(long))])) {
            #expect(n.compare(literal: try #require(GenericQuery.Number(String(repeating: "9", count: 38)))) == .orderedDescending)
        } else { Issue.record("a 39-digit $decimal is a number") }
        // Two stored values (--order): their exact values.
        let a = try #require(GenericQuery.Number("0.1", domain: .double)), b = try #require(GenericQuery.Number("0.1000000000000000055"))
        #expect(a.compare(b) == .orderedDescending)
    }

    @Test func recordingTimeAndTheEntitiesOwnDatesAreTwoQuestions() async throws {
        let temp = TemporaryDirectory("ek-query")
        let ledger = temp.file("ledger").path
        try await writeLedger(URL(filePath: ledger))
        // Recording time: as the store knew it when the transfer was recorded (position 3),
        // before Alice's update (her balance then 100.25) and Carol's delete.
        let recorded = try #require(try object(exportLines(ledger)[3])["recordedAt"] as? String)
        let then = try run("query", ledger, "--type", "Account", "--where", "balance>=100", "--as-of", recorded, "--json")
        #expect(try ids(then) == [accountIDs[0].uuidString])
        // --as-of is inclusive, to the nanosecond: Alice's update (position 4, her balance then
        // 87.75) at its own recordedAt, and not a nanosecond before.
        let update = try #require(try object(exportLines(ledger)[4])["recordedAt"] as? String)
        let updated = try ISODate.parseRecordingTimeUpperBound(update)
        let justBefore = ISODate.format(LogTimestamp(nanosecondsSince1970: updated.nanosecondsSince1970 - 1))
        #expect(try ids(try run("query", ledger, "--type", "Account", "--where", "balance>=100", "--as-of", update, "--json")) == [])
        #expect(try ids(try run("query", ledger, "--type", "Account", "--where", "balance>=100", "--as-of", justBefore, "--json")) == [accountIDs[0].uuidString])
        #expect(try ids(try run("query", ledger, "--type", "Account", "--where", "balance>=100", "--json")) == [])
        // A recording time outside what the log recorded: the span is printed.
        let early = try run("query", ledger, "--type", "Account", "--where", "balance>=0", "--as-of", "2001-01-01", "--json")
        #expect(try ids(early) == [])
        #expect(early.stderr.contains("the log was recorded from"), "\(early.stderr)")
        #expect(early.stderr.contains("use --valid-at DATE --date-field F"), "\(early.stderr)")

        // The domain's own dates: which stays were true at a moment.
        let store = temp.file("stays").path
        try await writeStays(URL(filePath: store))
        func valid(_ at: String, _ extra: String...) throws -> RunResult {
            try run(["query", store, "--type", "Stay", "--valid-at", at, "--date-field", "from"] + extra + ["--json"])
        }
        #expect(try ids(valid("2025-01-01T12:00Z", "--end-field", "until")) == ["s1"])
        #expect(try ids(valid("2025-01-02T12:00Z", "--end-field", "until")) == ["s1", "s2"])
        #expect(try ids(valid("2025-01-04", "--end-field", "until")) == ["s2"], "s1 ended on day 2; s2 is open")
        #expect(try ids(valid("2025-01-04")) == ["s1", "s2"], "without an end field: begun by then")
        // A bare date is its day: s2 began during 2025-01-02 and s1 ended at its midnight
        // ([from, until): true at no time of 2025-01-03).
        #expect(try ids(valid("2025-01-02", "--end-field", "until")) == ["s1", "s2"])
        #expect(try ids(valid("2025-01-02T00:00Z", "--end-field", "until")) == ["s1", "s2"])
        #expect(try ids(valid("2025-01-01T23:59:59Z", "--end-field", "until")) == ["s1"])
        #expect(try ids(valid("2025-01-03", "--end-field", "until")) == ["s2"])
        #expect(try ids(valid("2025-01-03T00:00Z", "--end-field", "until")) == ["s2"], "at its end s1 is over")
        #expect(try ids(valid("2025-01-02T12:00Z", "--end-field", "until", "--where", "guest=bo")) == ["s2"])
        let json = try object(valid("2025-01-02T12:00Z", "--end-field", "until").stdout)
        #expect(json["validAt"] as? String == "2025-01-02T12:00:00Z")
        #expect(json["validFrom"] is NSNull && json["validBefore"] is NSNull, "an instant has no ends")
        // A bare date is the whole day: printed as given with both ends, not as its midnight.
        let whole = try object(valid("2025-01-02", "--end-field", "until").stdout)
        #expect(whole["validAt"] as? String == "2025-01-02")
        #expect(whole["validFrom"] as? String == "2025-01-02T00:00:00Z")
        #expect(whole["validBefore"] as? String == "2025-01-03T00:00:00Z")
        #expect(json["dateField"] as? String == "from")
        // A date outside every stay's dates: their span is printed.
        let late = try valid("2030-01-01", "--end-field", "until")
        #expect(try ids(late) == ["s2"])
        #expect(late.stderr.contains("--valid-at 2030-01-01 is after every date in from and until of Stay: they span 2025-01-01T00:00:00Z to 2025-01-07T00:00:00Z"), "\(late.stderr)")
        // Failure paths: a field that is not a date, one no entity has, a half-given pair.
        let notDate = try valid("2025-01-02", "--end-field", "guest")
        #expect(notDate.status == 1 && notDate.stderr.contains("guest of Stay/s1 holds strings, not dates"), "\(notDate.stderr)")
        let missing = try run("query", store, "--type", "Stay", "--valid-at", "2025-01-02", "--date-field", "form")
        #expect(missing.status == 1 && missing.stderr.contains("no entity of Stay has a field \"form\""), "\(missing.stderr)")
        #expect(try run("query", store, "--type", "Stay", "--valid-at", "2025-01-02").status != 0)
        // A path is read as --where reads it: an empty part names no field.
        let emptyPart = try run("query", store, "--type", "Stay", "--valid-at", "2025-01-02", "--date-field", "from.")
        #expect(emptyPart.status == 1 && emptyPart.stderr.contains("no entity of Stay has a field \"from.\""), "\(emptyPart.stderr)")
        // --where names a field of any entity folded, not only of those --valid-at left: s1
        // holds until (s2, left, has none and so matches !=), and a misspelling is refused
        // even when --valid-at leaves nothing.
        #expect(try ids(valid("2025-01-03T12:00Z", "--end-field", "until", "--where", "until!=2025-01-01")) == ["s2"])
        let nothingLeft = try valid("2024-01-01", "--where", "nonsense=1")
        #expect(nothingLeft.status == 1 && nothingLeft.stderr.contains("no entity of Stay has a field \"nonsense\""), "\(nothingLeft.stderr)")
        // A stay that begins during a day was true on that day (not only from the next).
        do {
            let events = try EventStore.open(at: URL(filePath: store), snapshotPolicy: .never)
            let stays = try EventSourcedRepository<Stay>(store: events, typeName: "Stay")
            try await stays.add(Stay(id: "s4", guest: "di", from: t0.addingTimeInterval(9 * day + 9 * 3_600), until: nil))
            try await events.close()
        }
        #expect(try ids(valid("2025-01-10", "--end-field", "until")) == ["s2", "s4"])
        #expect(try ids(valid("2025-01-10T08:00Z", "--end-field", "until")) == ["s2"])
    }

    @Test func aQueryRefusesEntitiesItCannotRead() async throws {
        let temp = TemporaryDirectory("ek-query")
        let store = temp.file("forum")
        try await writeForumWithAnOpaqueNote(store)
        let opaque = try run("query", store.path, "--type", "Note", "--where", "text=secret")
        #expect(opaque.status == 1)
        #expect(opaque.stderr.contains("1 entity of Note (first Note/n1 at position"), "\(opaque.stderr)")
        // Strings ids and nested fields.
        #expect(try ids(try run("query", store.path, "--type", "Post", "--where", "thread=7", "--json")) == ["post-1"])
        #expect(try ids(try run("query", store.path, "--type", "Post", "--where", "score>=0", "--order", "score:desc", "--json")) == ["post-1", "00000000-0000-4000-8000-000000000009"])
    }
}
