#if Viewer
import Activities
import EventKernel
import EventKernelTestSupport
import EventKernelViewer
import EventLog
import Foundation
import Hummingbird
import HummingbirdTesting
#if PostgreSQL
import PostgresLog
#endif
import Testing
@testable import EventKernelTool

struct ViewerNote: Identifiable, Codable, Sendable, Equatable {
    var id: String
    var title: String
    var tags: [String]
}

/// The viewer's pages through its router, over a real store read as `serve` reads it.
@Suite struct ViewerTests {
    /// The viewer of the store in `directory`, driven by `body` (no socket: the router's test framework).
    func withViewer(_ directory: URL, token: String? = nil, _ body: @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let log = try SegmentedLog.openReadOnly(at: directory)
        let browser = StoreBrowser(log: log, directory: directory, name: directory.lastPathComponent, integrity: "not checked yet")
        await browser.check()
        let application = Application(router: Viewer.router(browser: browser, token: token))
        try await application.test(.router) { client in try await body(client) }
    }

    func page(_ client: any TestClientProtocol, _ uri: String, status: HTTPResponse.Status = .ok,
              sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        let response = try await client.execute(uri: uri, method: .get)
        #expect(response.status == status, "\(uri): \(String(buffer: response.body))", sourceLocation: sourceLocation)
        return String(buffer: response.body)
    }

    /// The `href` of the link with the HTML id `id`, its `&amp;`s unescaped; `nil` when there is none.
    func link(_ html: String, id: String) -> String? {
        guard let range = html.range(of: "id=\"\(id)\" href=\"") else { return nil }
        let rest = html[range.upperBound...]
        return rest.prefix { $0 != "\"" }.replacingOccurrences(of: "&amp;", with: "&")
    }

    @Test func aGenericStoreItsTypesStreamsEntitiesAndEvents() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let store = temp.file("ledger")
        try await writeLedger(store)
        try await withViewer(store) { client in
            let overview = try await page(client, "/")
            #expect(overview.contains("<dd id=\"event-count\">6</dd>"))
            #expect(overview.contains("<dd id=\"stream-count\">4</dd>"))
            #expect(overview.contains("href=\"/streams?type=Account\">Account</a></td><td class=\"n\">5</td><td class=\"n\">3</td>"))
            #expect(overview.contains("href=\"/streams?type=Transfer\">Transfer</a></td><td class=\"n\">1</td><td class=\"n\">1</td>"))
            #expect(overview.contains("no damage found"))
            #expect(overview.contains("00000000000000000000.log"))
            #expect(overview.contains("<svg id=\"chart\""))

            let streams = try await page(client, "/streams?type=Account")
            for id in accountIDs { #expect(streams.contains(">\(id.uuidString)</a>")) }
            #expect(streams.contains("3 streams"))
            #expect(!streams.contains("next-page"))

            // Alice: added, then updated (balance, a tag).
            let alice = try await page(client, "/entity?type=Account&id=\(accountIDs[0].uuidString)")
            #expect(alice.contains("version 2: 2 events"))
            #expect(alice.contains("<tr class=\"changed\"><td>balance</td>"))
            #expect(alice.contains("<tr class=\"added\"><td>tags[1]</td><td>added</td><td></td><td>&quot;gold&quot;</td></tr>"))
            #expect(alice.contains("87.75") && alice.contains("State now"))
            // Its state after version 1: the balance before the update.
            let before = try await page(client, "/entity?type=Account&id=\(accountIDs[0].uuidString)&version=1")
            let state = try #require(before.range(of: "<pre id=\"state-json\">").map { before[$0.upperBound...].prefix { $0 != "<" } })
            #expect(state.contains("100.25") && !state.contains("87.75") && !state.contains("gold"))
            // Carol was deleted: no state now, her add's state at version 1.
            let carol = try await page(client, "/entity?type=Account&id=\(accountIDs[2].uuidString)")
            #expect(carol.contains("id=\"state-note\">none: the entity was deleted"))

            let event = try await page(client, "/events/0")
            #expect(event.contains("<dd id=\"event-type\">Account.added</dd>"))
            #expect(event.contains("&quot;name&quot;: &quot;Alice&quot;"))
            #expect(event.contains("<pre id=\"hex\">00000000  "))
            #expect(event.contains("href=\"/entity?type=Account&amp;id=\(accountIDs[0].uuidString)\""))
        }
    }

    @Test func streamsArePagedInIdOrderAndSearched() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let directory = temp.file("notes")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        let notes = try EventSourcedRepository<ViewerNote>(store: store, typeName: "Note")
        // Added in reverse: the list is in id order, not in the order written.
        try await notes.addAll((0..<120).reversed().map { ViewerNote(id: String(format: "note-%03d", $0), title: "n\($0)", tags: []) })
        try await store.close()
        try await withViewer(directory) { client in
            var seen: [String] = []
            var uri: String? = "/streams?type=Note"
            var pages = 0
            while let next = uri {
                let html = try await page(client, next)
                let ids = html.components(separatedBy: "\">note-").dropFirst().map { "note-" + $0.prefix(3) }
                #expect(ids.count == (pages < 2 ? 50 : 20))
                seen += ids
                uri = link(html, id: "next-page")
                pages += 1
            }
            #expect(pages == 3)
            #expect(seen == (0..<120).map { String(format: "note-%03d", $0) })
            let found = try await page(client, "/streams?type=Note&q=NOTE-11")
            #expect(found.contains("10 streams whose id contains “NOTE-11”"))
            #expect(found.components(separatedBy: "\">note-11").count - 1 == 10)
        }
    }

    @Test func streamsAreOrderedByTheirTextAUUIDBeforeAStringOfTheSameText() {
        let text = "00000000-0000-4000-8000-00000000000A"
        let uuid = UUID(uuidString: text)!
        let ids: [EntityID] = [
            .string("b"), .string(text), .uuid(uuid), .string("0"), .uuid(UUID(uuidString: "FFFFFFFF-0000-4000-8000-000000000000")!),
            .string("00000000-0000-4000-8000-00000000000B"), .uuid(UUID(uuidString: "00000000-0000-4000-8000-000000000009")!),
            .string("00000000-0000-4000-8000-00000000000a"),
        ]
        // The rule, spelled out: by the text, then a UUID first.
        let expected = ids.sorted { a, b in
            let (x, y) = (a.description, b.description)
            if x != y { return x.utf8.lexicographicallyPrecedes(y.utf8) }
            if case .uuid = a, case .string = b { return true }
            return false
        }
        for _ in 0..<50 { #expect(ids.shuffled().sorted(by: StoreBrowser.pageOrder) == expected) }
        #expect(expected.firstIndex(of: .uuid(uuid))! + 1 == expected.firstIndex(of: .string(text))!)
    }

    @Test func aStringIdThatReadsAsAUUIDIsLinkedAsAString() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let store = temp.file("forum")
        try await writeForum(store)
        let text = "00000000-0000-4000-8000-000000000009"
        try await withViewer(store) { client in
            let list = try await page(client, "/streams?type=Post")
            let href = "/entity?type=Post&amp;id=\(text)&amp;idType=string"
            #expect(list.contains("href=\"\(href)\""))
            let entity = try await page(client, href.replacingOccurrences(of: "&amp;", with: "&"))
            #expect(entity.contains("&quot;author&quot;: &quot;cy&quot;"))
            #expect(entity.contains("<input type=\"hidden\" name=\"idType\" value=\"string\">"))
            // Without the kind the UUID stream is meant first, else the string one (history's rule).
            #expect(try await page(client, "/entity?type=Post&id=\(text)").contains("&quot;author&quot;: &quot;cy&quot;"))
            let event = try await page(client, "/events/2")
            #expect(event.contains("href=\"\(href)\""))
        }
    }

    @Test func anEntitysStateAsTheStoreKnewItAtARecordingTime() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let directory = temp.file("notes")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        let notes = try EventSourcedRepository<ViewerNote>(store: store, typeName: "Note")
        try await notes.add(ViewerNote(id: "a", title: "first", tags: []))
        try await notes.update(ViewerNote(id: "a", title: "second", tags: ["x"]))
        let times = try store.read().map(\.timestamp)
        try await store.close()
        try await withViewer(directory) { client in
            // The first event's own recording time, as the pages print it, names that event.
            let first = try await page(client, "/entity?type=Note&id=a&asOf=\(ISODate.format(times[0]))")
            #expect(first.contains("(version 1, recorded \(ISODate.format(times[0])))"))
            #expect(first.contains("&quot;first&quot;") && !first.contains("&quot;second&quot;\n"))
            let earlier = try await page(client, "/entity?type=Note&id=a&asOf=2001-01-01")
            #expect(earlier.contains("id=\"state-note\">none yet: the stream&#39;s first event comes later"))
            _ = try await page(client, "/entity?type=Note&id=a&asOf=yesterday", status: .badRequest)
        }
    }

    @Test func anActivitysTimelineFoldsItsEvents() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let directory = temp.file("activities")
        let repository = try EventSourcedActivityRepository.open(at: directory)
        let id = UUID()
        try await repository.add(ActivityModel(id: id, startDate: t0, endDate: nil, type: .sleep))
        try await repository.end(id: id, at: t0.addingTimeInterval(3_600))
        try await repository.close()
        try await withViewer(directory) { client in
            let html = try await page(client, "/entity?type=activity&id=\(id.uuidString.lowercased())")
            #expect(html.contains("<tr class=\"changed\"><td>endDate</td><td>changed</td><td>null</td><td>&quot;2025-01-01T01:00:00Z&quot;</td></tr>"))
            #expect(html.contains("&quot;endDate&quot;: &quot;2025-01-01T01:00:00Z&quot;"))
            let event = try await page(client, "/events/0")
            #expect(event.contains("<dd>activity</dd>") && event.contains("&quot;event&quot;: &quot;added&quot;"))
        }
    }

    @Test func whatTheStoreHoldsIsShownAsTextNeverAsMarkup() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let directory = temp.file("notes")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        let notes = try EventSourcedRepository<ViewerNote>(store: store, typeName: "Note<i>")
        try await notes.add(ViewerNote(id: "<script>alert(1)</script>", title: "<img src=x onerror=alert(2)>", tags: ["\"'&"]))
        try await store.close()
        try await withViewer(directory) { client in
            let uri = "/entity?type=Note%3Ci%3E&id=%3Cscript%3Ealert%281%29%3C%2Fscript%3E"
            for html in [try await page(client, "/"), try await page(client, "/streams?type=Note%3Ci%3E"), try await page(client, uri),
                         try await page(client, "/events/0")] {
                #expect(!html.contains("<script>alert") && !html.contains("<img src=x") && !html.contains("Note<i>"))
            }
            #expect(try await page(client, uri).contains("&lt;img src=x onerror=alert(2)&gt;"))
        }
    }

    @Test func badRequestsAndWhatIsNotThereAreSaidAsSuch() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let store = temp.file("ledger")
        try await writeLedger(store)
        try await withViewer(store) { client in
            let type = try await page(client, "/streams?type=Nope", status: .notFound)
            #expect(type.contains("no events of entity type &quot;Nope&quot; in ledger; its entity types: Account, Transfer"))
            _ = try await page(client, "/entity?type=Account&id=nobody", status: .notFound)
            let missing = try await page(client, "/entity?type=Account", status: .badRequest)
            #expect(missing.contains("the parameter &quot;id&quot; is missing"))
            _ = try await page(client, "/entity?type=Account&id=x&version=two", status: .badRequest)
            let beyond = try await page(client, "/events/6", status: .notFound)
            #expect(beyond.contains("its positions run to 5"))
            _ = try await page(client, "/events/minus-one", status: .badRequest)
            for method in [HTTPRequest.Method.post, .put, .delete, .patch] {
                let response = try await client.execute(uri: "/", method: method)
                #expect(response.status == .methodNotAllowed)
            }
            // HEAD answers as GET does, without a body; a page that is not there is still 404.
            for uri in ["/", "/streams?type=Account", "/events?position=1", "/events/0"] {
                let response = try await client.execute(uri: uri, method: .head)
                #expect(response.status == .ok, "\(uri)")
                #expect(response.body.readableBytes == 0, "\(uri)")
                #expect(response.headers[.contentType]?.hasPrefix("text/html") == true, "\(uri)")
            }
            #expect(try await client.execute(uri: "/events/6", method: .head).status == .notFound)
        }
    }

    @Test func aTokenGuardsEveryPage() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let store = temp.file("ledger")
        try await writeLedger(store)
        let token = "0123456789abcdef-token"
        try await withViewer(store, token: token) { client in
            for uri in ["/", "/streams?type=Account", "/events/0"] {
                #expect(try await client.execute(uri: uri, method: .get).status == .unauthorized)
                #expect(try await client.execute(uri: uri, method: .get, headers: [.authorization: "Bearer wrong-token-0123456"]).status == .unauthorized)
                #expect(try await client.execute(uri: uri, method: .get, headers: [.authorization: "Bearer \(token)"]).status == .ok)
                #expect(try await client.execute(uri: uri, method: .get, headers: [.cookie: "eventkernel_token=\(token)"]).status == .ok)
            }
            // A link with the token: a redirect to the same page without it, and the cookie.
            let response = try await client.execute(uri: "/streams?type=Account&token=\(token)", method: .get)
            #expect(response.status == .seeOther)
            #expect(response.headers[.location] == "/streams?type=Account")
            #expect(response.headers[.setCookie]?.hasPrefix("eventkernel_token=\(token);") == true)
            #expect(try await client.execute(uri: "/?token=nope", method: .get).status == .unauthorized)
        }
    }

    @Test func thePagesFollowALiveWriter() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let directory = temp.file("notes")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        let notes = try EventSourcedRepository<ViewerNote>(store: store, typeName: "Note")
        try await notes.add(ViewerNote(id: "a", title: "one", tags: []))
        try await withViewer(directory) { client in
            #expect(try await page(client, "/").contains("<dd id=\"event-count\">1</dd>"))
            try await notes.addAll([ViewerNote(id: "b", title: "two", tags: []), ViewerNote(id: "c", title: "three", tags: [])])
            try await notes.update(ViewerNote(id: "a", title: "uno", tags: []))
            #expect(try await page(client, "/").contains("<dd id=\"event-count\">4</dd>"))
            #expect(try await page(client, "/entity?type=Note&id=a").contains("<td>title</td><td>changed</td><td>&quot;one&quot;</td><td>&quot;uno&quot;</td>"))
        }
        try await store.close()
    }

    /// A newcomer's probe: the entity page of a stream purged and compacted while the viewer
    /// ran crashed the server (the catalog listed positions the log no longer held).
    @Test func aStreamCompactedAwayWhileTheViewerRunsIsNotThere() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let directory = temp.file("notes")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        let notes = try EventSourcedRepository<ViewerNote>(store: store, typeName: "Note")
        try await notes.addAll([ViewerNote(id: "gone", title: "one", tags: []), ViewerNote(id: "kept", title: "two", tags: [])])
        try await notes.update(ViewerNote(id: "gone", title: "uno", tags: []))
        try await withViewer(directory) { client in
            #expect(try await page(client, "/entity?type=Note&id=gone").contains("&quot;uno&quot;"))
            _ = try await store.purge(stream: StreamID("Note", .string("gone")))
            #expect(try await page(client, "/").contains("<dd id=\"event-count\">4</dd>"))
            let report = try await store.compact()
            #expect(report.eventsRemoved > 0, "\(report)")
            // The overview's counts follow the rewritten segment (they were those before it).
            let overview = try await page(client, "/")
            #expect(overview.contains("<dd id=\"event-count\">\(4 - report.eventsRemoved)</dd>"), "\(report)")
            #expect(overview.contains("$forgotten"), "the receipt's type is listed")
            let body = try await page(client, "/entity?type=Note&id=gone", status: .notFound)
            #expect(body.contains("no stream Note gone"), "\(body)")
            #expect(try await page(client, "/entity?type=Note&id=kept").contains("&quot;two&quot;"))
        }
        try await store.close()
    }

    /// A newcomer's probe: `serve` of a store whose log is damaged warned, then failed (exit
    /// 4) without serving. It serves the events before the damage and says where it is.
    @Test func aDamagedLogIsServedUpToItsDamage() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let directory = temp.file("notes")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        let notes = try EventSourcedRepository<ViewerNote>(store: store, typeName: "Note")
        try await notes.addAll((0..<5).map { ViewerNote(id: "a\($0)", title: "first", tags: []) })
        try await notes.addAll((0..<5).map { ViewerNote(id: "b\($0)", title: "second", tags: []) })
        try await store.close()
        let segment = directory.appending(path: "00000000000000000000.log").path
        let size = try FileManager.default.attributesOfItem(atPath: segment)[.size] as! Int
        try flipBit(in: segment, at: Int64(size - 8))
        try await withViewer(directory) { client in
            let overview = try await page(client, "/")
            #expect(overview.contains("<span id=\"integrity\">DAMAGED: "), "\(overview)")
            #expect(overview.contains("<dd id=\"event-count\">5</dd>"), "\(overview)")
            #expect(try await page(client, "/entity?type=Note&id=a3").contains("&quot;first&quot;"))
            _ = try await page(client, "/entity?type=Note&id=b3", status: .notFound)
        }
        // The command serves it too, warning once.
        let out = temp.file("serve.out"), err = temp.file("serve.err")
        let serve = try makeProcess(["serve", directory.path, "--port", "0"], stdout: out, stderr: err)
        try serve.run()
        var served = false
        for _ in 0..<100 {
            if ((try? String(contentsOf: out, encoding: .utf8)) ?? "").contains("serving") { served = true; break }
            if !serve.isRunning { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        serve.terminate()
        serve.waitUntilExit()
        closeOutputFiles(of: serve)
        let stderr = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        #expect(served, "\(stderr)")
        // SIGTERM stops it with status 0 (through the service group's shutdown, not a signal
        // handler's exit; both exit 0, so this checks that the shutdown ends, not that it waits).
        #expect(serve.terminationReason == .exit && serve.terminationStatus == 0, "\(serve.terminationReason) \(serve.terminationStatus)")
        #expect(stderr.contains("the log is damaged") && !stderr.contains("exit status 3"), "\(stderr)")
    }

    /// A newcomer's probe: a port in use was `error: bind(descriptor:ptr:bytes:): Address
    /// already in use) (errno: 98)`, naming no address. It names the address and the reason.
    @Test func aPortInUseIsSaidWithItsAddress() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let directory = temp.file("notes")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        try await EventSourcedRepository<ViewerNote>(store: store, typeName: "Note").add(ViewerNote(id: "a", title: "one", tags: []))
        try await store.close()
        let out = temp.file("first.out")
        let first = try makeProcess(["serve", directory.path, "--port", "0"], stdout: out, stderr: temp.file("first.err"))
        try first.run()
        var port: String?
        for _ in 0..<100 where port == nil {
            let text = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
            if let range = text.range(of: "http://127.0.0.1:") { port = String(text[range.upperBound...].prefix { $0.isNumber }) }
            try await Task.sleep(for: .milliseconds(100))
        }
        defer { first.terminate(); first.waitUntilExit(); closeOutputFiles(of: first) }
        let taken = try #require(port)
        let second = try run("serve", directory.path, "--port", taken)
        #expect(second.status == 4, "\(second.stderr)")
        #expect(second.stderr.contains("cannot listen on 127.0.0.1:\(taken): Address already in use"), "\(second.stderr)")
    }

    @Test func theIntegrityCheckSaysWhatIsDamaged() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let directory = temp.file("notes")
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        let notes = try EventSourcedRepository<ViewerNote>(store: store, typeName: "Note")
        try await notes.addAll((0..<50).map { ViewerNote(id: "n\($0)", title: String(repeating: "t", count: $0), tags: []) })
        try await store.writeSnapshots()
        try await store.close()
        let snapshots = try FileManager.default.contentsOfDirectory(atPath: directory.appending(path: "snapshots").path).filter { $0.hasSuffix(".snap") }
        #expect(!snapshots.isEmpty)
        try await withViewer(directory) { client in
            #expect(try await page(client, "/").contains("no damage found"))
            try flipBit(in: directory.appending(path: "snapshots/\(snapshots[0])").path, at: 40)
            // Not read by a page: the last check's result stands until it runs again.
            #expect(try await page(client, "/").contains("no damage found"))
            let checked = try await page(client, "/?check=1")
            #expect(checked.contains("the log has no damage; 1 snapshot file does not decode"))
            #expect(checked.contains("DAMAGED: "))
            try flipBit(in: directory.appending(path: "00000000000000000000.log").path, at: 100)
            #expect(try await page(client, "/?check=1").contains("<span id=\"integrity\">DAMAGED: "))
        }
    }

    #if PostgreSQL
    @Test func aPostgreSQLLogFollowedAsAnInstanceAppends() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let store = try await EventStore.open(postgres: configuration)
        let notes = try EventSourcedRepository<ViewerNote>(store: store, typeName: "Note")
        try await notes.add(ViewerNote(id: "a", title: "one", tags: []))
        let log = try await PostgresLog.open(configuration)
        let browser = StoreBrowser(log: log, directory: nil, name: "postgres", integrity: "checked as each record is read (a PostgreSQL log)")
        let application = Application(router: Viewer.router(browser: browser, token: nil))
        try await application.test(.router) { client in
            let overview = try await page(client, "/")
            #expect(overview.contains("<dd id=\"event-count\">1</dd>"))
            #expect(overview.contains("none (a PostgreSQL log keeps its events in a table)"))
            try await notes.update(ViewerNote(id: "a", title: "two", tags: ["x"]))
            let entity = try await page(client, "/entity?type=Note&id=a")
            #expect(entity.contains("<td>title</td><td>changed</td><td>&quot;one&quot;</td><td>&quot;two&quot;</td>"))
            #expect(try await page(client, "/events/1").contains("&quot;title&quot;: &quot;two&quot;"))
        }
        try await log.close()
        try await store.close()
    }
    #endif

    @Test func anAddressOtherMachinesReachNeedsAToken() throws {
        #expect(throws: ViewerError.self) { try ViewerConfiguration(host: "0.0.0.0").validate() }
        #expect(throws: ViewerError.self) { try ViewerConfiguration(host: "192.168.1.4", token: "short").validate() }
        #expect(throws: ViewerError.self) { try ViewerConfiguration(host: "::", token: "has space 0123456789").validate() }
        #expect(throws: ViewerError.self) { try ViewerConfiguration(port: 70_000).validate() }
        try ViewerConfiguration(host: "0.0.0.0", token: "0123456789abcdef").validate()
        for host in ["127.0.0.1", "127.1.2.3", "localhost", "::1"] { try ViewerConfiguration(host: host).validate() }
        for host in ["127.0.0.1.example.org", "1270.0.0.1", "example.org", "0.0.0.0"] { #expect(!ViewerConfiguration.isLoopback(host)) }
        do {
            try ViewerConfiguration(host: "0.0.0.0").validate()
        } catch {
            #expect(error.code == .misconfigured)
            #expect(error.message.contains("--token"))
        }
    }

    @Test func serveRefusesToExposeAStoreWithoutAToken() async throws {
        let temp = TemporaryDirectory("ek-viewer")
        let store = temp.file("ledger")
        try await writeLedger(store)
        let result = try run("serve", store.path, "--host", "0.0.0.0", "--port", "0")
        #expect(result.status == 1)
        #expect(result.stderr.contains("--host 0.0.0.0 lets other machines read the store: give --token T"))
        let missing = try run("serve", temp.file("nothing").path, "--port", "0")
        #expect(missing.status == 2, "\(missing.stderr)")
    }
}
#endif
