import Activities
import EventKernel
@testable import EventKernelTool
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// The review findings on `eventkernel delete`/`purge` and the read commands on tombstones:
/// ids compared as streams, import applying the store's tombstone rule, verify finding an
/// event after a purge, history showing what is stored.
@Suite struct DeletionCLIReviewTests {
    private static let ids = (0..<3).map { UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", $0 + 200))! }

    private static func makeStore() async throws -> TemporaryDirectory {
        let directory = TemporaryDirectory("ek-delete-review")
        let repository = try EventSourcedActivityRepository.open(at: directory.url)
        for (i, id) in ids.enumerated() {
            try await repository.add(ActivityModel(id: id, startDate: Date(timeIntervalSince1970: 1_735_689_600 + Double(i) * 3_600), endDate: nil, type: .sleep))
        }
        try await repository.close()
        return directory
    }

    /// Appends raw records, around the store (as an older build or another writer could).
    private static func appendRaw(_ directory: URL, _ events: [(type: String, schema: UInt16, stream: StreamID, version: UInt64)]) async throws {
        let log = try SegmentedLog.open(at: directory)
        _ = try await log.append(events.map { event in
            LogEntry(timestamp: LogTimestamp(nanosecondsSince1970: 1_800_000_000_000_000_000), payload: EventEnvelope.encodeRecordPayload(
                eventType: event.type, schemaVersion: event.schema, stream: event.stream, entityVersion: event.version, metadata: .none, payload: []))
        })
        try await log.close()
    }

    @Test func oneIDSpelledTwiceIsOneStream() async throws {
        let store = try await Self.makeStore()
        let id = Self.ids[0]
        let result = try run(["purge", store.url.path, id.uuidString, id.uuidString.lowercased(), "--yes", "--json"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let repository = try EventSourcedActivityRepository.openReadOnly(at: store.url)
        #expect(try repository.history(of: id).map(\.tombstone) == [nil, .purged])
        #expect(repository.count == 2)
        try await repository.close()
    }

    /// The `$purged` line export writes for the first activity, after purging it.
    private static func exportedPurgeLine(_ store: TemporaryDirectory, actor: String? = nil) throws -> String {
        var arguments = ["purge", store.url.path, ids[0].uuidString, "--yes"]
        if let actor { arguments += ["--actor", actor] }
        #expect(try run(arguments).status == 0)
        let export = try run(["export", store.url.path])
        return try #require(export.stdout.split(separator: "\n").map(String.init).first { $0.contains("\"event\":\"$purged\"") })
    }

    private static func importLines(_ lines: [String]) throws -> (RunResult, URL) {
        let copy = TemporaryDirectory("ek-delete-review-copy")
        let file = copy.file("events.jsonl")
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: file)
        let target = copy.file("store")
        return (try run(["import", target.path, file.path]), target)
    }

    @Test func importRefusesAMalformedTombstoneNamingTheLine() async throws {
        let store = try await Self.makeStore()
        let export = try run(["export", store.url.path]).stdout.split(separator: "\n").map(String.init)
        let purge = try Self.exportedPurgeLine(store)
        let added = try #require(export.first { $0.contains(Self.ids[0].uuidString) })
        #expect(purge.contains("\"schemaVersion\":1") && purge.contains("\"codec\":\"none\""), "\(purge)")
        // A payload, another schema version, and a tombstone as a stream's first event.
        let cases: [(line: String, words: String)] = [
            (purge.replacingOccurrences(of: "\"codec\":\"none\"", with: "\"codec\":\"bytes\",\"base64\":\"AQID\""), "3-byte payload"),
            (purge.replacingOccurrences(of: "\"schemaVersion\":1", with: "\"schemaVersion\":2"), "schema version 2"),
        ]
        for (bad, words) in cases {
            let (result, target) = try Self.importLines([added, bad])
            #expect(result.status == 1 && result.stderr.contains(":2:") && result.stderr.contains(words), "\(bad)\n\(result.stderr)")
            if FileManager.default.fileExists(atPath: target.path) {
                let repository = try EventSourcedActivityRepository.openReadOnly(at: target)
                #expect(repository.store.nextPosition == 0, "nothing written")
                try await repository.close()
            }
        }
        let (first, _) = try Self.importLines([purge])
        #expect(first.status == 1 && first.stderr.contains(":1:") && first.stderr.contains("first event"), "\(first.stderr)")
    }

    @Test func importNamesTheMetadataLimitationForATombstone() async throws {
        let store = try await Self.makeStore()
        let added = try #require(try run(["export", store.url.path]).stdout.split(separator: "\n").map(String.init).first { $0.contains(Self.ids[0].uuidString) })
        let purge = try Self.exportedPurgeLine(store, actor: "ops")
        let (result, _) = try Self.importLines([added, purge])
        #expect(result.status == 1 && result.stderr.contains(":2:") && result.stderr.contains("limitation") && result.stderr.contains("$purged"), "\(result.stderr)")
    }

    @Test func verifyReportsAnEventAfterAPurge() async throws {
        let store = try await Self.makeStore()
        let raw = StreamID("Raw", .string("r"))
        try await Self.appendRaw(store.url, [("Raw.happened", 1, raw, 1), ("$purged", 1, raw, 2)])
        #expect(try run(["verify", store.url.path]).status == 0)
        // What a build before purges could append: the store never would.
        try await Self.appendRaw(store.url, [("Raw.happened", 1, raw, 3)])
        let result = try run(["verify", store.url.path])
        #expect(result.status != 0, "\(result.stdout)\(result.stderr)")
        #expect((result.stdout + result.stderr).contains("follows its $purged event"), "\(result.stdout)\(result.stderr)")
    }

    /// Verify lists the first events after a purge and says that more follow, not silently
    /// stopping at its limit.
    @Test func verifySaysWhenMoreEventsFollowAPurgeThanItShows() async throws {
        let store = try await Self.makeStore()
        let raw = StreamID("Raw", .string("r"))
        let shown = StoreCheck.eventsAfterPurgeShown
        try await Self.appendRaw(store.url, [("Raw.happened", 1, raw, 1), ("$purged", 1, raw, 2)]
            + (0..<UInt64(shown)).map { ("Raw.happened", 1, raw, 3 + $0) })
        let exact = try run(["verify", store.url.path])
        let exactOutput = exact.stdout + exact.stderr
        #expect(exactOutput.components(separatedBy: "follows its $purged event").count - 1 == shown, "\(exactOutput)")
        #expect(!exactOutput.contains("more follow"), "\(exactOutput)")
        try await Self.appendRaw(store.url, [("Raw.happened", 1, raw, 3 + UInt64(shown))])
        let more = try run(["verify", store.url.path])
        let moreOutput = more.stdout + more.stderr
        #expect(more.status != 0)
        #expect(moreOutput.components(separatedBy: "follows its $purged event").count - 1 == shown, "\(moreOutput)")
        #expect(moreOutput.contains("the first \(shown) events that follow their stream's $purged event are shown; more follow"), "\(moreOutput)")
    }

    @Test func historyShowsATombstonesStoredSchemaVersion() async throws {
        let store = try await Self.makeStore()
        // Written around the store (the append path now takes schema 1 only).
        try await Self.appendRaw(store.url, [("$deleted", 7, ActivityEventCodec.stream(of: Self.ids[1]), 2)])
        let history = try run(["history", store.url.path, Self.ids[1].uuidString, "--format", "jsonl"])
        let line = try #require(history.stdout.split(separator: "\n").map(String.init).last)
        #expect(line.contains("\"event\":\"$deleted\"") && line.contains("\"schemaVersion\":7"), "\(history.stdout)\(history.stderr)")
    }

    /// jsonl and csv print no purge count, so they do not open the store for one: a record the
    /// store cannot read (the log's checksums hold) fails only the table and json outputs' count.
    @Test func inspectOpensTheStoreOnlyForTheCount() async throws {
        let store = try await Self.makeStore()
        let log = try SegmentedLog.open(at: store.url)
        _ = try await log.append([LogEntry(timestamp: LogTimestamp(nanosecondsSince1970: 1_800_000_000_000_000_000), payload: [0xFF, 0xFF])])
        try await log.close()
        let json = try run(["inspect", store.url.path, "--json"])
        #expect(json.stderr.contains("cannot count the purged streams"), "\(json.stdout)\(json.stderr)")
        for format in ["jsonl", "csv"] {
            let listing = try run(["inspect", store.url.path, "--format", format])
            #expect(listing.status == 0 && !listing.stderr.contains("cannot count"), "\(format): \(listing.stdout)\(listing.stderr)")
        }
    }

    @Test func inspectCountsPurgedStreams() async throws {
        let store = try await Self.makeStore()
        #expect(try run(["purge", store.url.path, Self.ids[0].uuidString, Self.ids[1].uuidString, "--yes"]).status == 0)
        let inspect = try run(["inspect", store.url.path, "--json"])
        #expect(inspect.status == 0 && (inspect.stdout.contains("\"purgedStreams\" : 2") || inspect.stdout.contains("\"purgedStreams\":2")), "\(inspect.stdout)\(inspect.stderr)")
    }
}
