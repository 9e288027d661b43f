import Activities
@testable import ActivityServiceApp
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import GRDB
import Testing

/// The registry `MetricsSystem` is bootstrapped with, once for the test process.
let registry: PrometheusCollectorRegistry = {
    let registry = PrometheusCollectorRegistry()
    MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
    return registry
}()

/// A backend of each kind in a fresh directory, removed afterwards.
struct BackendFixture {
    let kind: BackendKind
    let directory: URL
    let backend: any ActivityBackend

    init(_ kind: BackendKind) throws {
        _ = registry  // bootstrapped before a store is opened: its metrics are made at open
        self.kind = kind
        directory = FileManager.default.temporaryDirectory.appending(path: "activity-service-\(kind.rawValue)-\(UUID().uuidString.prefix(8))")
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        backend = try kind.open(in: directory, logger: logger)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    var logger: Logger {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        return logger
    }

    /// The service over this backend, on an ephemeral port (``withLiveService(_:_:)``).
    func application() -> some ApplicationProtocol {
        buildApplication(backend: backend, configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
                         registry: registry, logger: logger)
    }
}

func body(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

func json(_ response: TestResponse) throws -> [String: Any] {
    try #require(JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any])
}

func activityJSON(_ start: String, end: String? = nil, type: String = "sleep", id: UUID? = nil) -> String {
    var fields = ["\"startDate\":\"\(start)\"", "\"type\":\"\(type)\""]
    if let end { fields.append("\"endDate\":\"\(end)\"") }
    if let id { fields.append("\"id\":\"\(id.uuidString)\"") }
    return "{" + fields.joined(separator: ",") + "}"
}

/// Every endpoint on both backends, through a running server: the same requests must get
/// the same statuses and bodies whichever storage answers.
@Suite("ActivityService: endpoints on both backends")
struct ActivityServiceTests {
    @Test(arguments: BackendKind.allCases)
    func createReadReplaceDeleteAndHistory(kind: BackendKind) async throws {
        let fixture = try BackendFixture(kind)
        defer { fixture.remove() }
        let id = UUID()
        try await withLiveService(fixture.application()) { client in
            // POST: 201, the activity, its Location.
            try await client.execute(uri: "/activities", method: .post,
                                     body: body(activityJSON("2025-03-01T07:30:00.250Z", type: "nap", id: id))) { response in
                #expect(response.status == .created)
                #expect(response.headers[.location] == "/activities/\(id.uuidString)")
                let activity = try json(response)
                #expect(activity["id"] as? String == id.uuidString)
                #expect(activity["startDate"] as? String == "2025-03-01T07:30:00.250Z")
                #expect(activity["endDate"] is NSNull)
                #expect(activity["type"] as? String == "nap")
            }
            // The same id again: 409.
            try await client.execute(uri: "/activities", method: .post, body: body(activityJSON("2025-03-01T08:00:00Z", id: id))) { response in
                #expect(response.status == .conflict)
                let error = try json(response)["error"] as? [String: Any]
                #expect(error?["code"] as? String == "alreadyExists")
            }
            // GET one: 200 with its version as the ETag.
            try await client.execute(uri: "/activities/\(id.uuidString)", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.eTag] == "\"1\"")
            }
            // PUT with the current version: 200; with the old one again: 409; without: 200.
            let ended = activityJSON("2025-03-01T07:30:00.250Z", end: "2025-03-01T09:00:00Z", type: "nap")
            try await client.execute(uri: "/activities/\(id.uuidString)", method: .put, headers: [.ifMatch: "\"1\""], body: body(ended)) { response in
                #expect(response.status == .ok)
                let activity = try json(response)
                #expect(activity["endDate"] as? String == "2025-03-01T09:00:00.000Z")
            }
            try await client.execute(uri: "/activities/\(id.uuidString)", method: .put, headers: [.ifMatch: "\"1\""], body: body(ended)) { response in
                #expect(response.status == .conflict)
                let error = try #require(json(response)["error"] as? [String: Any])
                #expect(error["code"] as? String == "conflict")
                #expect((error["message"] as? String)?.contains("expected version 1, found 2") == true)
            }
            try await client.execute(uri: "/activities/\(id.uuidString)", method: .put, body: body(activityJSON("2025-03-01T07:45:00Z", type: "nap"))) { response in
                #expect(response.status == .ok)
            }
            try await client.execute(uri: "/activities/\(id.uuidString)", method: .get) { response in
                #expect(response.headers[.eTag] == "\"3\"")
                let activity = try json(response)
                #expect(activity["startDate"] as? String == "2025-03-01T07:45:00.000Z")
            }
            // DELETE: 204, then 404 for everything but the history, which keeps it all.
            try await client.execute(uri: "/activities/\(id.uuidString)", method: .delete) { response in
                #expect(response.status == .noContent)
            }
            for method in [HTTPRequest.Method.get, .delete] {
                try await client.execute(uri: "/activities/\(id.uuidString)", method: method) { response in
                    #expect(response.status == .notFound, "\(method)")
                }
            }
            try await client.execute(uri: "/activities/\(id.uuidString)", method: .put, body: body(ended)) { response in
                #expect(response.status == .notFound)
            }
            try await client.execute(uri: "/activities/\(id.uuidString)/history", method: .get) { response in
                #expect(response.status == .ok)
                let changes = try #require(json(response)["changes"] as? [[String: Any]])
                #expect(changes.map { $0["kind"] as? String } == ["added", "updated", "updated", "deleted"])
                #expect(changes.map { $0["version"] as? Int } == [1, 2, 3, 4])
                #expect((changes[1]["activity"] as? [String: Any])?["endDate"] as? String == "2025-03-01T09:00:00.000Z")
                #expect(changes[3]["activity"] is NSNull)
            }
            try await client.execute(uri: "/activities/\(UUID().uuidString)/history", method: .get) { response in
                #expect(response.status == .notFound)
            }
        }
        try await fixture.backend.close()
    }

    @Test(arguments: BackendKind.allCases)
    func validationErrorsAre400WithTheMessage(kind: BackendKind) async throws {
        let fixture = try BackendFixture(kind)
        defer { fixture.remove() }
        let cases: [(String, String, String)] = [
            (activityJSON("2025-03-01T07:30:00Z", end: "2025-03-01T06:00:00Z"), "validationFailed", "is before the start date"),
            (activityJSON("2025-03-01T07:30:00Z", type: ""), "validationFailed", "has an empty type"),
            (activityJSON("yesterday"), "badRequest", "startDate: \"yesterday\" is not an RFC 3339 date"),
            ("{\"type\":\"sleep\"}", "badRequest", "startDate is missing"),
            ("{not json", "badRequest", "not valid JSON"),
        ]
        try await withLiveService(fixture.application()) { client in
            for (request, code, message) in cases {
                try await client.execute(uri: "/activities", method: .post, body: body(request)) { response in
                    #expect(response.status == .badRequest, "\(request)")
                    let error = try #require(json(response)["error"] as? [String: Any])
                    #expect(error["code"] as? String == code, "\(request)")
                    #expect((error["message"] as? String)?.contains(message) == true, "\(request): \(error)")
                }
            }
            let queries: [(String, String)] = [
                ("limit=-1", "limit must not be negative"), ("limit=ten", "limit must be an integer"),
                ("order=sideways", "order must be newest or oldest"), ("cursor=nonsense", "is not a nextCursor"),
                ("after=2025-03-02T00:00:00Z&before=2025-03-01T00:00:00Z", "afterDate must not be later than beforeDate"),
                ("after=tomorrow", "after must be an RFC 3339 date"),
            ]
            for path in ["/activities", "/activities/live"] {
                for (parameters, message) in queries {
                    try await client.execute(uri: "\(path)?\(parameters)", method: .get) { response in
                        #expect(response.status == .badRequest, "\(path)?\(parameters)")
                        let error = try #require(json(response)["error"] as? [String: Any])
                        #expect((error["message"] as? String)?.contains(message) == true, "\(path)?\(parameters): \(error)")
                    }
                }
            }
            try await client.execute(uri: "/activities/not-a-uuid", method: .get) { response in
                #expect(response.status == .badRequest)
            }
            let id = UUID()
            try await client.execute(uri: "/activities/\(id.uuidString)", method: .put,
                                     body: body(activityJSON("2025-03-01T07:30:00Z", id: UUID()))) { response in
                #expect(response.status == .badRequest)
            }
            try await client.execute(uri: "/activities/\(id.uuidString)", method: .put, headers: [.ifMatch: "soon"],
                                     body: body(activityJSON("2025-03-01T07:30:00Z"))) { response in
                #expect(response.status == .badRequest)
            }
            // Nothing of the above was written.
            try await client.execute(uri: "/activities", method: .get) { response in
                let activities = try json(response)["activities"] as? [Any]
                #expect(activities?.isEmpty == true)
            }
        }
        try await fixture.backend.close()
    }

    @Test(arguments: BackendKind.allCases)
    func listFiltersOrdersAndPagesWithACursor(kind: BackendKind) async throws {
        let fixture = try BackendFixture(kind)
        defer { fixture.remove() }
        let base = Date(timeIntervalSince1970: 1_740_000_000)
        // 30 activities, every 3rd a bath; two pairs start at the same instant (a cursor must
        // break the tie by id, not skip or repeat).
        let all: [ActivityModel] = (0..<30).map { (i: Int) -> ActivityModel in
            let hour: Double = i == 11 ? 10 : i == 21 ? 20 : Double(i)
            let type: ActivityType = i % 3 == 0 ? "bath" : "sleep"
            return ActivityModel(id: UUID(), startDate: base + hour * 3_600, type: type)
        }
        for activity in all { try await fixture.backend.add(activity) }
        let newestFirst = all.sorted { ActivityCursor(after: $1) < ActivityCursor(after: $0) }

        try await withLiveService(fixture.application()) { client in
            var cursor: String?
            var seen: [String] = []
            repeat {
                let uri = "/activities?limit=7" + (cursor.map { "&cursor=\($0)" } ?? "")
                cursor = try await client.execute(uri: uri, method: .get) { response in
                    #expect(response.status == .ok)
                    let page = try json(response)
                    seen += (page["activities"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                    return page["nextCursor"] as? String
                }
            } while cursor != nil
            #expect(seen == newestFirst.map(\.id.uuidString), "paging with the cursor, newest first")

            let after = InternetDate.format(base + 4.5 * 3_600), before = InternetDate.format(base + 20.5 * 3_600)
            try await client.execute(uri: "/activities?after=\(after)&before=\(before)&types=bath&order=oldest", method: .get) { response in
                let ids = (try json(response)["activities"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                let expected = all.filter { $0.type == "bath" && $0.startDate > base + 4.5 * 3_600 && $0.startDate < base + 20.5 * 3_600 }
                    .sorted { ActivityCursor(after: $0) < ActivityCursor(after: $1) }
                #expect(ids == expected.map { $0.id.uuidString })
                #expect(!ids.isEmpty)
            }
            try await client.execute(uri: "/activities?types=", method: .get) { response in
                let activities = try json(response)["activities"] as? [Any]
                #expect(activities?.isEmpty == true, "types= matches nothing")
            }
            try await client.execute(uri: "/activities?types=bath,sleep&limit=0", method: .get) { response in
                let activities = try json(response)["activities"] as? [Any]
                #expect(activities?.count == 30)
            }
        }
        try await fixture.backend.close()
    }

    /// The live feed through a real server: its first event is the current result, a POST
    /// makes it yield the new one, and the service's graceful shutdown ends a feed still open.
    // A feed the shutdown failed to end would wait forever: bounded.
    @Test(.timeLimit(.minutes(2)), arguments: BackendKind.allCases)
    func liveFeedYieldsAfterAPost(kind: BackendKind) async throws {
        let fixture = try BackendFixture(kind)
        defer { fixture.remove() }
        try await withLiveService(fixture.application()) { client in
            try await client.stream(uri: "/activities/live?types=sleep&limit=5") { head, feed in
                #expect(head.status == .ok)
                #expect(head.headerFields[.contentType] == "text/event-stream")
                var events = SSEReader(feed)
                let first = try #require(try await events.next())
                #expect(first.contains("\"activities\":[]"), "first event: \(first)")

                let id = UUID()
                try await client.execute(uri: "/activities", method: .post, body: body(activityJSON("2025-03-01T07:30:00Z", id: id))) { response in
                    #expect(response.status == .created)
                }
                // A type the feed does not watch changes nothing it shows.
                try await client.execute(uri: "/activities", method: .post, body: body(activityJSON("2025-03-01T08:30:00Z", type: "bath"))) { response in
                    #expect(response.status == .created)
                }
                let second = try #require(try await events.next())
                #expect(second.hasPrefix("event: activities\ndata: {\"activities\":[{\"id\":\"\(id.uuidString)\""), "after the POST: \(second)")
                #expect(!second.contains("bath"))
                // The feed is still open: the service's graceful shutdown must end it (or this
                // would wait forever), then close the backend.
                await client.triggerGracefulShutdown()
                while let more = try await events.next() { #expect(!more.contains("bath"), "after the shutdown: \(more)") }
            }
        }
        await #expect(throws: (any Error).self, "the backend is closed after the service stopped") {
            try await fixture.backend.add(ActivityModel(startDate: .now, type: .sleep))
        }
        if kind == .eventkernel {
            #expect(FileManager.default.fileExists(atPath: fixture.directory.appending(path: "snapshots").path),
                    "EventStoreService wrote no snapshot at shutdown")
        }
    }

    @Test func metricsAreServedInPrometheusFormat() async throws {
        let fixture = try BackendFixture(.eventkernel)
        defer { fixture.remove() }
        try await withLiveService(fixture.application()) { client in
            try await client.execute(uri: "/activities", method: .post, body: body(activityJSON("2025-03-01T07:30:00Z"))) { _ in }
            try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .ok)
                let text = String(buffer: response.body)
                #expect(text.contains("http_server_request_duration_bucket{http_route=\"/activities\",http_request_method=\"POST\""), "\(text.prefix(400))")
                // The store's own metrics (EventKernelMetrics), beside the server's.
                for metric in ["eventkernel_appended_events_total", "eventkernel_sync_duration_seconds_bucket{policy=\"synced\"",
                               "eventkernel_commit_round_appends", "eventkernel_observers"] {
                    #expect(text.contains(metric), "\(metric) missing from /metrics")
                }
            }
        }
        try await fixture.backend.close()
    }
}

/// Reads server-sent events from a response body: one `event: ...\ndata: ...` block at a time.
struct SSEReader {
    var base: ResponseBodyReader
    var pending = ""

    init(_ base: ResponseBodyReader) { self.base = base }

    /// The next event's text (without the blank line that ends it), or `nil` at the end.
    mutating func next() async throws -> String? {
        while true {
            if let end = pending.range(of: "\n\n") {
                let event = String(pending[..<end.lowerBound])
                pending.removeSubrange(..<end.upperBound)
                return event
            }
            guard let chunk = try await base.next() else { return nil }
            pending += String(buffer: chunk)
        }
    }
}

@Suite("ActivityService: dates and cursors")
struct FormatTests {
    @Test func datesAreRFC3339() {
        #expect(InternetDate.parse("2025-03-01T08:30:00+01:00") == Date(timeIntervalSince1970: 1_740_814_200))
        #expect(InternetDate.parse("2025-03-01T07:30:00.250Z") == Date(timeIntervalSince1970: 1_740_814_200.25))
        #expect(InternetDate.format(Date(timeIntervalSince1970: 1_740_814_200.25)) == "2025-03-01T07:30:00.250Z")
        for bad in ["yesterday", "2025-03-01", "2025-03-01T07:30:00", ""] {
            #expect(InternetDate.parse(bad) == nil, "\(bad)")
        }
    }

    /// The hand-written date and UUID writers agree with Foundation's formatters.
    @Test func writersMatchFoundation() {
        let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let date = Date(timeIntervalSince1970: Double.random(in: -2_000_000_000...4_000_000_000, using: &generator).rounded(.down) / 1_000 * 1_000)
            #expect(InternetDate.format(date) == date.formatted(style))
            let id = UUID()
            var json = JSONWriter()
            json.uuid(id)
            #expect(String(decoding: json.bytes, as: UTF8.self) == "\"\(id.uuidString)\"")
        }
        // Through one writer, which keeps the last day written: dates on the same day, the
        // next one, and back.
        var writer = JSONWriter()
        var expected = ""
        let base = 1_740_814_200.0
        let offsets: [Double] = [0, 1.25, 3_600, 86_399, 86_400.5, 86_401, 2, -86_400 * 400, 0.125]
        for offset in offsets {
            let date = Date(timeIntervalSince1970: base + offset)
            writer.date(date)
            expected += "\"" + date.formatted(style) + "\""
        }
        #expect(String(decoding: writer.bytes, as: UTF8.self) == expected)
        #expect(InternetDate.format(Date(timeIntervalSince1970: -1.5)) == "1969-12-31T23:59:58.500Z")
        #expect(InternetDate.format(Date(timeIntervalSince1970: 951_782_400)) == "2000-02-29T00:00:00.000Z")
        var json = JSONWriter()
        json.string("a \"quoted\" \\ line\n")
        #expect(String(decoding: json.bytes, as: UTF8.self) == #""a \"quoted\" \\ line\u000a""#)
    }

    @Test func cursorsKeepTheExactDate() throws {
        let cursor = ActivityCursor(startDate: Date(timeIntervalSinceReferenceDate: 761_234_567.123_456_7), id: UUID())
        #expect(try Cursor.decode(Substring(Cursor.encode(cursor))) == cursor)
        #expect(throws: APIError.self) { try Cursor.decode("12~not-a-uuid") }
    }
}

@Suite("ActivityService: the GRDB backend's durability")
struct GRDBDurabilityTests {
    /// A synced GRDB backend commits with `synchronous = FULL` (a write returns once it is on
    /// disk, as EventKernel's synced policy); GRDB's pool sets NORMAL for WAL after the
    /// connection's preparation, so this is what keeps the comparison honest.
    @Test func syncedMeansSynchronousFull() async throws {
        for (synced, expected) in [(true, 2), (false, 1)] {
            let directory = FileManager.default.temporaryDirectory.appending(path: "grdb-sync-\(UUID().uuidString.prefix(8))")
            defer { try? FileManager.default.removeItem(at: directory) }
            let backend = try GRDBBackend(directory: directory, synced: synced)
            let writer = try await backend.pool.write { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
            let reader = try await backend.pool.read { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
            #expect(writer == expected, "writer connection, synced: \(synced)")
            #expect(reader == expected, "reader connection, synced: \(synced)")
            try backend.close()
        }
    }
}
