import Synchronization
import Foundation
import Testing
import EventKernel
import EventLog
import EventKernelTestSupport
@testable import EventKernelTool

/// Every event of a store, as the log holds it.
func envelopes(_ directory: URL) async throws -> [EventEnvelope] {
    let store = try EventStore.open(at: directory, snapshotPolicy: .never)
    var out: [EventEnvelope] = []
    try store.forEachEnvelope(from: 0, through: nil) { out.append($0); return true }
    try await store.close()
    return out
}

/// The copy holds the original's events position by position: type, stream, version, payload
/// bytes, recording time to the nanosecond, and metadata (an import's resume marker, the tool's
/// bookkeeping, is the one metadata import replaces). `times: false` for a copy that could
/// not keep them (activity lines are recorded at the import's time).
func expectSameEvents(_ original: URL, _ copy: URL, times: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let a = try await envelopes(original), b = try await envelopes(copy)
    #expect(a.count == b.count, sourceLocation: sourceLocation)
    func own(_ m: EventMetadata) -> EventMetadata {
        var m = m
        if let id = m.correlationID, ImportMarker.isMarker(id) { m.correlationID = nil }
        return m
    }
    for (x, y) in zip(a, b) {
        #expect(x.position == y.position, sourceLocation: sourceLocation)
        #expect(x.eventType == y.eventType && x.schemaVersion == y.schemaVersion, sourceLocation: sourceLocation)
        #expect(x.stream == y.stream && x.entityVersion == y.entityVersion, sourceLocation: sourceLocation)
        #expect(x.payload == y.payload, "payload at \(x.position)", sourceLocation: sourceLocation)
        #expect(!times || x.timestamp == y.timestamp, "recordedAt at \(x.position): \(x.timestamp) vs \(y.timestamp)", sourceLocation: sourceLocation)
        #expect(own(x.metadata) == own(y.metadata), "metadata at \(x.position)", sourceLocation: sourceLocation)
    }
}

@Suite struct ImportFidelityTests {
    @Test func aLedgerCopyHasTheOriginalsEventsPositionByPosition() async throws {
        let temp = TemporaryDirectory("ek-fidelity")
        let store = temp.file("ledger")
        try await writeLedger(store)
        let exported = temp.file("ledger.jsonl")
        #expect(try run("export", store.path, "--output", exported.path).status == 0)
        let copy = temp.file("copy")
        let imported = try run("import", copy.path, exported.path)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(!imported.stderr.contains("recorded at the time of the import"), "\(imported.stderr)")
        try await expectSameEvents(store, copy)
    }

    @Test func aForumCopyHasTheOriginalsEventsPositionByPosition() async throws {
        let temp = TemporaryDirectory("ek-fidelity")
        let store = temp.file("forum")
        try await writeForum(store)
        let exported = temp.file("forum.jsonl")
        #expect(try run("export", store.path, "--output", exported.path).status == 0)
        let copy = temp.file("copy")
        #expect(try run("import", copy.path, exported.path).status == 0)
        try await expectSameEvents(store, copy)
    }

    /// Review 1.1: metadata is exported, and import refuses it rather than overwrite it.
    @Test func metadataIsExportedAndImportRefusesToOverwriteIt() async throws {
        let temp = TemporaryDirectory("ek-fidelity")
        let directory = temp.file("store")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        let plain = EncodedEvent(eventType: "Person.renamed", schemaVersion: 1, stream: StreamID("Person", .string("p1")), payload: Array("{\"name\":\"x\"}".utf8))
        try await store.append([PendingEvent(plain), PendingEvent(plain, metadata: EventMetadata(correlationID: "req-42", actor: "alice"))])
        try await store.close()
        let lines = try exportLines(directory.path)
        #expect(lines.count == 2)
        #expect(!lines[0].contains("metadata"))
        #expect(lines[1].hasSuffix(",\"metadata\":{\"correlationID\":\"req-42\",\"actor\":\"alice\"}}"), "\(lines[1])")
        // tail --json writes the same lines.
        let tail = try run("tail", directory.path, "--from", "0", "--json")
        #expect(tail.stdout.split(separator: "\n").map(String.init) == lines)
        let other = TemporaryDirectory("ek-fidelity")
        let activityStore = try importedStore(other)
        let activityTail = try run("tail", activityStore, "--from", "0", "--json")
        #expect(activityTail.stdout.split(separator: "\n").first?.contains(",\"metadata\":{\"correlationID\":\"eventkernel-import ") == true, "\(activityTail.stdout)")
        withExtendedLifetime(other) {}
        let exported = temp.file("people.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(to: exported, atomically: true, encoding: .utf8)
        let copy = temp.file("copy")
        let imported = try run("import", copy.path, exported.path)
        #expect(imported.status == 1)
        #expect(imported.stderr.contains("people.jsonl:2: the event carries metadata (correlationID \"req-42\", actor \"alice\")"), "\(imported.stderr)")
        #expect(imported.stderr.contains("nothing was imported"))
        let copied = FileManager.default.fileExists(atPath: copy.path) ? try await envelopes(copy) : []
        #expect(copied.isEmpty)
        // --lenient ignores unknown fields, never metadata; on an activity line too.
        let activity = temp.file("activity.jsonl")
        try (goodLines[0].dropLast() + ",\"metadata\":{\"actor\":\"bob\"}}\n").write(to: activity, atomically: true, encoding: .utf8)
        let refused = try run("import", temp.file("copy2").path, activity.path, "--lenient")
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("activity.jsonl:1: the event carries metadata (actor \"bob\")"), "\(refused.stderr)")
        // Given twice, the activity parser reads the last: never an unread metadata.
        try (goodLines[0].dropLast() + ",\"metadata\":{\"actor\":\"bob\"},\"metadata\":null}\n").write(to: activity, atomically: true, encoding: .utf8)
        let twice = try run("import", temp.file("copy3").path, activity.path, "--lenient")
        #expect(twice.status == 1, "\(twice.stderr)")
    }

    /// Review 1.2: a time before one already recorded is not kept (times never go back), and
    /// import says so; a recordedAt that is not a log time is refused.
    @Test func recordedAtBeforeAnEarlierTimeIsRecordedAtTheImportTimeWithANote() async throws {
        let temp = TemporaryDirectory("ek-fidelity")
        func line(_ version: Int, _ time: String) -> String {
            "{\"recordedAt\":\"\(time)\",\"stream\":{\"type\":\"Person\",\"id\":\"p1\",\"idType\":\"string\"},\"version\":\(version),\"event\":\"Person.touched\",\"schemaVersion\":1,\"codec\":\"none\",\"data\":null}"
        }
        let file = temp.file("people.jsonl")
        try [line(1, "2025-03-01T08:30:15.000000123Z"), line(2, "2025-03-01T08:30:14Z"), line(3, "2025-03-02T00:00:00Z")]
            .joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        let copy = temp.file("copy")
        let before = Date()
        let imported = try run("import", copy.path, file.path)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stderr.contains("2 events were recorded at the time of the import"), "\(imported.stderr)")
        #expect(imported.stderr.contains("first at line 2"), "\(imported.stderr)")
        let events = try await envelopes(copy)
        #expect(events.count == 3)
        #expect(events.first?.timestamp == LogTimestamp(nanosecondsSince1970: 1_740_817_815_000_000_123))
        #expect(events.dropFirst().allSatisfy { $0.recordedAt >= before.addingTimeInterval(-1) })

        try line(1, "2025-03-01").write(to: file, atomically: true, encoding: .utf8)
        let bare = try run("import", temp.file("copy2").path, file.path)
        #expect(bare.status == 1)
        #expect(bare.stderr.contains("people.jsonl:1: field \"recordedAt\" must be an ISO 8601 date-time"), "\(bare.stderr)")
    }

    /// Review 1.4: a leap second is not a time a Date holds; it was stored as :59.
    @Test func aLeapSecondIsRefused() {
        #expect(ISODate.tryParse("2016-12-31T23:59:60Z") == nil)
        #expect(ISODate.parseRecordingTime("2016-12-31T23:59:60Z") == nil)
        #expect(ISODate.tryParse("2016-12-31T23:59:59Z") != nil)
    }

    /// Review 1.3: a stream that is not a generic repository's has data, not states, and no diff.
    @Test func historyOfANonRepositoryStreamShowsDataWithoutStateOrDiff() async throws {
        let temp = TemporaryDirectory("ek-fidelity")
        let directory = temp.file("store")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        let stream = StreamID("Person", .string("p1"))
        try await store.append([
            PendingEvent(EncodedEvent(eventType: "Person.renamed", schemaVersion: 1, stream: stream, payload: Array("{\"name\":\"x\"}".utf8))),
            PendingEvent(EncodedEvent(eventType: "Person.emailChanged", schemaVersion: 1, stream: stream, payload: Array("{\"email\":\"y\"}".utf8))),
        ])
        try await store.close()
        let json = try run("history", directory.path, "Person", "p1", "--json")
        #expect(json.status == 0, "\(json.stderr)")
        let events = try #require(try jsonObject(json.stdout) as? [[String: Any]])
        #expect(events.count == 2)
        #expect(events.allSatisfy { $0["state"] is NSNull && $0["changes"] is NSNull })
        #expect((events.last?["data"] as? [String: String]) == ["email": "y"])
        let table = try run("history", directory.path, "Person", "p1")
        #expect(table.status == 0)
        #expect(!table.stdout.contains("removed") && !table.stdout.contains("State after"), "\(table.stdout)")
        #expect(table.stdout.contains("not a generic repository's event"), "\(table.stdout)")
    }

    /// Review 1.4: typed values that would be stored as something else are refused.
    @Test func malformedTypedValuesAreRefused() throws {
        func value(_ json: String) throws -> BinaryEntityValue {
            try EntityJSON.binary(try JSONParser.parse(Array(json.utf8)))
        }
        for bad in ["12..5", "1.2.3", "1-2", "+-1", ".", "1e", "", " 1", "1.", "0x10", "123456789012345678901234567890123456789012345"] {
            #expect(throws: EntityJSON.ValueError.self, "\(bad)") { try value("{\"$decimal\":\"\(bad)\"}") }
        }
        #expect(try value("{\"$decimal\":\"12.50\"}") == .decimal(Decimal(string: "12.5")!))
        #expect(try value("{\"$decimal\":\"-1.5e3\"}") == .decimal(Decimal(-1500)))
        #expect(throws: EntityJSON.ValueError.self) { try value("{\"$date\":1e400}") }
        #expect(throws: EntityJSON.ValueError.self) { try value("{\"$date\":\"2016-12-31T23:59:60Z\"}") }
        #expect(throws: EntityJSON.ValueError.self) { try value("{\"$float\":1e39}") }
        #expect(try value("{\"$float\":\"inf\"}") == .float(.infinity))
        #expect(throws: EntityJSON.ValueError.self) { try value("{\"$url\":\"http://x/a b\"}") }
        #expect(try value("{\"$url\":\"https://example.org/a?b=1\"}") == .url("https://example.org/a?b=1"))
    }

    /// Review 1.4: a field of another codec is refused, never silently ignored.
    @Test func fieldsOfAnotherCodecAreRefused() {
        let head = "{\"stream\":{\"type\":\"T\",\"id\":\"a\",\"idType\":\"string\"},\"event\":\"T.added\",\"schemaVersion\":1,"
        for (tail, message) in [
            ("\"codec\":\"bytes\",\"data\":{\"a\":1},\"base64\":\"AQ==\"}", "codec \"bytes\" takes its payload in \"base64\""),
            ("\"codec\":\"binary\",\"data\":{\"a\":1},\"base64\":\"AQ==\"}", "field \"base64\" belongs to codec \"bytes\", not \"binary\""),
            ("\"codec\":\"json\",\"data\":{\"a\":1},\"reason\":\"x\"}", "field \"reason\" belongs to codec \"bytes\", not \"json\""),
        ] {
            #expect { _ = try EntityJSON.parseLine(Substring(head + tail), lenient: true) } throws: { error in
                (error as? ActivityJSON.LineError)?.message.hasPrefix(message) == true
            }
        }
        #expect((try? EntityJSON.parseLine(Substring(head + "\"codec\":\"bytes\",\"data\":null,\"base64\":\"AQ==\",\"reason\":\"x\"}"), lenient: false)) != nil)
    }

    /// Review 1.6: a JSON payload with whitespace around it is kept byte for byte (as bytes).
    @Test func aJSONPayloadWithSurroundingWhitespaceRoundTripsByteForByte() async throws {
        let temp = TemporaryDirectory("ek-fidelity")
        let directory = temp.file("store")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        let stream = StreamID("Doc", .string("d1"))
        try await store.append([
            PendingEvent(EncodedEvent(eventType: "Doc.added", schemaVersion: 1, stream: stream, payload: Array("{\"a\":1} ".utf8))),
            PendingEvent(EncodedEvent(eventType: "Doc.updated", schemaVersion: 1, stream: stream, payload: Array("\t{\"a\":2}".utf8))),
            PendingEvent(EncodedEvent(eventType: "Doc.updated", schemaVersion: 1, stream: stream, payload: Array("{\"a\": 3}".utf8))),
        ])
        try await store.close()
        let lines = try exportLines(directory.path)
        let codecs = try lines.map { try object($0)["codec"] as? String }
        #expect(codecs == ["bytes", "bytes", "json"])
        #expect(lines[0].contains("whitespace before or after"), "\(lines[0])")
        let exported = temp.file("docs.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(to: exported, atomically: true, encoding: .utf8)
        let copy = temp.file("copy")
        #expect(try run("import", copy.path, exported.path).status == 0)
        try await expectSameEvents(directory, copy)
    }

    /// Review 3.1: a storage failure while reading a stream's version is the store's error
    /// (exit 3 or 4 through ToolError.from), never a line's bad input.
    @Test func aStorageFailureDuringTheVersionCheckIsNotBadInput() throws {
        var validator = EntityVersionValidator { _ in throw RepositoryError.closed }
        let line = "{\"stream\":{\"type\":\"T\",\"id\":\"a\",\"idType\":\"string\"},\"version\":1,\"event\":\"T.added\",\"schemaVersion\":1,\"codec\":\"none\",\"data\":null}"
        let imported = try EntityJSON.parseLine(Substring(line), lenient: false)
        #expect { try validator.check(imported) } throws: { error in
            error is RepositoryError && ToolError.from(error).exit == .io
        }
    }

    /// Review 3.2: an activity event that does not decode: export (which reads the log alone)
    /// writes it with its bytes and why, and every event after it, then exits 3 naming it, as
    /// CLI.md's exit-3 row says; export of the activities (the projection cannot fold it) stops
    /// before any line; tail --json shows it with its bytes.
    @Test func exportOfAnUndecodableActivityEventExits3NamingIt() async throws {
        let temp = TemporaryDirectory("ek-fidelity")
        let damaged = temp.file("damaged")
        let events = try EventStore.open(at: damaged, snapshotPolicy: .never)
        try await events.append([
            PendingEvent(EncodedEvent(eventType: "activity.added", schemaVersion: 1, stream: StreamID("activity", .uuid(ids[0])), payload: [9, 9])),
            PendingEvent(EncodedEvent(eventType: "Doc.added", schemaVersion: 1, stream: StreamID("Doc", .string("d")), payload: Array("{}".utf8))),
        ])
        try await events.close()
        let result = try run("export", damaged.path)
        #expect(result.status == 3, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        let first = try JSONParser.parse(Array((lines.first ?? "").utf8))
        #expect(first["position"] == .number("0") && first["event"] == .string("activity.added") && first["codec"] == .string("bytes"))
        #expect(first["base64"] == .string("CQk="))
        #expect(first["reason"] == .string("activity event does not decode: binary decoding failed at byte offset 0: unknown activity flags 9"))
        #expect(lines.last?.contains("\"event\":\"Doc.added\"") == true)
        #expect(result.stderr.contains("1 event payload does not decode and was written as base64 with a reason; first at position 0 (activity/00000000-0000-4000-8000-000000000000, activity.added)"), "\(result.stderr)")
        let activities = try run("export", damaged.path, "--format", "activities")
        #expect(activities.status == 3, "\(activities.stderr)")
        #expect(activities.stdout.isEmpty)
        #expect(activities.stderr.contains("cannot fold the event at position 0 (activity.added"), "\(activities.stderr)")
        let tail = try run("tail", damaged.path, "--from", "0", "--json")
        #expect(tail.status == 3)
        #expect(tail.stdout.split(separator: "\n").count == 2)
    }

    /// Review 2.2: a key written twice has no one reading: damage, never a JSON object with
    /// the name twice.
    @Test func aKeyWrittenTwiceIsDamage() throws {
        let bytes = try BinaryEntityValue.keyed([("a", .int(1)), ("b", .keyed([("c", .null), ("c", .int(2))]))]).encoded()
        #expect(throws: DecodingError.self) { try BinaryEntityValue.decode(bytes) }
        guard case .bytes(let reason, let damaged) = EntityJSON.payload(bytes) else {
            Issue.record("a payload with a key twice was decoded")
            return
        }
        #expect(damaged)
        #expect(reason.contains("key \"c\" twice"), "\(reason)")
        // Keys repeated in different containers are fine.
        let fine = BinaryEntityValue.keyed([("a", .keyed([("a", .uint(3))])), ("b", .unkeyed([.keyed([("a", .null)]), .keyed([("a", .string("x"))])]))])
        #expect(try BinaryEntityValue.decode(fine.encoded()) == fine)
    }

    /// Review 3.3: a UUID stream and a string stream with the same text: streams pages by
    /// (text, kind), history says both exist and takes --id-type.
    @Test func aUUIDStreamAndAStringStreamOfTheSameText() async throws {
        let temp = TemporaryDirectory("ek-fidelity")
        let directory = temp.file("store")
        let uuid = UUID(uuidString: "00000000-0000-4000-8000-000000000009")!
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        try await store.append([
            PendingEvent(EncodedEvent(eventType: "Post.added", schemaVersion: 1, stream: StreamID("Post", .string(uuid.uuidString)), payload: Array("{\"k\":\"string\"}".utf8))),
            PendingEvent(EncodedEvent(eventType: "Post.added", schemaVersion: 1, stream: StreamID("Post", .uuid(uuid)), payload: Array("{\"k\":\"uuid\"}".utf8))),
        ])
        try await store.close()
        let first = try run("streams", directory.path, "Post", "--limit", "1", "--json")
        #expect(first.status == 0, "\(first.stderr)")
        #expect((try jsonObject(first.stdout) as? [[String: Any]])?.map { $0["idType"] as? String } == ["string"])
        #expect(first.stderr.contains("the next page: --after \(uuid.uuidString) --id-type string"), "\(first.stderr)")
        let second = try run("streams", directory.path, "Post", "--limit", "1", "--json", "--after", uuid.uuidString, "--id-type", "string")
        #expect((try jsonObject(second.stdout) as? [[String: Any]])?.map { $0["idType"] as? String } == ["uuid"], "\(second.stdout)")
        let lower = try run("streams", directory.path, "Post", "--json", "--after", uuid.uuidString.lowercased(), "--id-type", "uuid")
        #expect((try jsonObject(lower.stdout) as? [[String: Any]])?.isEmpty == true, "\(lower.stdout)")

        let history = try run("history", directory.path, "Post", uuid.uuidString, "--json")
        #expect(history.status == 0)
        #expect(history.stderr.contains("both a UUID stream and a string stream"), "\(history.stderr)")
        #expect(((try jsonObject(history.stdout) as? [[String: Any]])?.first?["state"] as? [String: String]) == ["k": "uuid"])
        let other = try run("history", directory.path, "Post", uuid.uuidString, "--id-type", "string", "--json")
        #expect(other.status == 0, "\(other.stderr)")
        #expect(((try jsonObject(other.stdout) as? [[String: Any]])?.first?["state"] as? [String: String]) == ["k": "string"])
    }

    /// Review 2.3: import reads back the deepest nesting export writes, and refuses nesting the
    /// binary format cannot read back.
    @Test func importReadsTheDeepestNestingExportWrites() throws {
        // Rendering and parsing recurse once per level: on a thread with a large stack, so that
        // AddressSanitizer's frames (several times larger) fit 1,024 of them too.
        let outcome = try Self.onLargeStack(Self.deepestNesting)
        #expect(outcome.decodedBack)
        #expect(outcome.codec == "binary")
        #expect(outcome.importedSameBytes)
        // One level more than the format reads: refused with the path, never stored as damage.
        #expect(outcome.deeperRefused)
    }

    struct DeepOutcome: Sendable {
        var decodedBack = false, codec = "", importedSameBytes = false, deeperRefused = false
    }

    static func deepestNesting() throws -> DeepOutcome {
        // Every level a keyed container with one "$" key: rendered as {"$object":{…}}, two JSON
        // levels per binary level.
        var outcome = DeepOutcome()
        var value = BinaryEntityValue.date(Date(timeIntervalSinceReferenceDate: 0.5))
        for _ in 0..<(BinaryEntityValue.maxDepth - 1) { value = .keyed([("$k", value)]) }
        let bytes = try value.encoded()
        outcome.decodedBack = try BinaryEntityValue.decode(bytes) == value
        let envelope = EventEnvelope(position: 0, timestamp: LogTimestamp(nanosecondsSince1970: 1), eventType: "Deep.added", schemaVersion: 1,
                                     stream: StreamID("Deep", .string("d")), entityVersion: 1, payload: bytes)
        let (line, payload) = EntityJSON.line(envelope)
        outcome.codec = payload.codec
        let imported = try EntityJSON.parseLine(Substring(line), lenient: false)
        outcome.importedSameBytes = imported.event.payload == bytes
        let deep = String(repeating: "[", count: BinaryEntityValue.maxDepth + 1) + String(repeating: "]", count: BinaryEntityValue.maxDepth + 1)
        do { _ = try EntityJSON.binary(JSONParser.parse(Array(deep.utf8))) } catch is EntityJSON.ValueError { outcome.deeperRefused = true }
        return outcome
    }

    /// Runs `body` on a thread of its own with a 256 MiB stack and returns its result.
    static func onLargeStack<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<T, any Error>?>(nil)
        let thread = Thread {
            let outcome = Result { try body() }
            result.withLock { $0 = outcome }
            done.signal()
        }
        thread.stackSize = 256 << 20
        thread.start()
        done.wait()
        return try result.withLock { $0! }.get()
    }

    /// Review 2.4: bytes that decode as the binary format but are not what the encoder writes
    /// for that value (a payload codec starting with 0xFF) are kept as bytes: import would
    /// re-encode them otherwise.
    @Test func binaryLookingBytesTheEncoderWouldNotWriteAreBytes() throws {
        var bytes = try BinaryEntityValue.uint(5).encoded()
        #expect(bytes.last == 5)
        bytes.removeLast()
        bytes += [0x85, 0x00]  // 5 as a two-byte varint
        #expect(try BinaryEntityValue.decode(bytes) == .uint(5))
        guard case .bytes(let reason, let damaged) = EntityJSON.payload(bytes) else {
            Issue.record("shown as binary data, which import would store as other bytes")
            return
        }
        #expect(!damaged)
        #expect(reason.contains("the encoder writes that value otherwise"))
    }

    /// Severity 4: streams keeps only a page's worth in order; the pages still cover every
    /// stream once, in order.
    @Test func streamsPagesCoverEveryStreamOnceInOrder() async throws {
        let temp = TemporaryDirectory("ek-fidelity")
        let directory = temp.file("store")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        var rng = SplitMix64(seed: 7)
        let texts = (0..<30).map { _ in String(rng.next() % 1000) }
        let ids: [EntityID] = Set(texts).map { EntityID.string($0) } + [.uuid(UUID(uuidString: "00000000-0000-4000-8000-000000000001")!), .string("00000000-0000-4000-8000-000000000001")]
        try await store.append(ids.map { PendingEvent(EncodedEvent(eventType: "N.added", schemaVersion: 1, stream: StreamID("N", $0), payload: [])) })
        try await store.close()
        var seen: [String] = []
        var arguments = ["streams", directory.path, "N", "--limit", "7", "--json"]
        for _ in 0..<10 {
            let page = try run(arguments)
            #expect(page.status == 0, "\(page.stderr)")
            seen += ((try jsonObject(page.stdout) as? [[String: Any]]) ?? []).map { "\($0["id"] as? String ?? "")|\($0["idType"] as? String ?? "")" }
            guard let range = page.stderr.range(of: "the next page: ") else { break }
            let next = page.stderr[range.upperBound...].trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ").map(String.init)
            arguments = ["streams", directory.path, "N", "--limit", "7", "--json"] + next
        }
        let expected = ids.map { ($0.description, StreamsCommand.IDType($0)) }.sorted { $0 < $1 }.map { "\($0.0)|\($0.1.rawValue)" }
        #expect(seen == expected)
    }
}
