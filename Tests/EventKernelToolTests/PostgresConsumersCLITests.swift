#if PostgreSQL
@testable import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import PostgresLog
import Testing

/// `eventkernel consumers list --postgres URL`: the consumers a PostgreSQL log keeps in its schema.
@Suite("eventkernel consumers on PostgreSQL")
struct PostgresConsumersCLITests {
    @Test("consumers list --postgres shows each consumer's committed position, lag and parked count, beside the instance holding it")
    func listsTheServersConsumers() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let base = try #require(PostgresTestDatabase.url)
        let url = base + (base.contains("?") ? "&" : "?") + "schema=\(configuration.schema)"
        let store = try await EventStore.open(postgres: configuration)
        #expect(try run("consumers", "list", "--postgres", url).stdout.contains("no consumers"))
        for i in 0..<12 {
            try await store.append([PendingEvent(EncodedEvent(eventType: "Counted", schemaVersion: 1,
                                                              stream: StreamID("Counted", .string("e\(i)")), payload: [1]))])
        }
        let mail = try store.consumer(named: "mail")
        try await mail.commit(through: 4)
        try mail.park([ParkedEvent(position: 2, stream: "Counted/e2", eventType: "Counted", errorType: "Test", error: "refused",
                                   attempts: 3, parkedAt: .now())])
        _ = try store.consumer(named: "audit", startingAt: .end)

        let listed = try run("consumers", "list", "--postgres", url, "--json")
        #expect(listed.status == 0, "\(listed.stderr)")
        let rows = try #require(try jsonObject(listed.stdout) as? [[String: Any]])
        #expect(rows.map { $0["name"] as? String } == ["audit", "mail"])
        #expect(rows.last?["committed"] as? Int == 5)
        #expect(rows.last?["lag"] as? Int == 7)
        #expect(rows.last?["parked"] as? Int == 1)
        #expect(rows.first?["committed"] as? Int == 12)
        // The URL as the store argument too.
        #expect(try run("consumers", url, "--json").stdout == listed.stdout)
        try await store.close()
    }
}
#endif
