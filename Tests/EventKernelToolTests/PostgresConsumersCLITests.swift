#if PostgreSQL
@testable import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import PostgresLog
import Testing

/// `eventkernel consumers --postgres URL`: the consumers a PostgreSQL log keeps in its schema,
/// listed, reset and their parked events skipped under the consumer's lease.
@Suite("eventkernel consumers on PostgreSQL")
struct PostgresConsumersCLITests {
    @Test("consumers --postgres: list beside the instance holding them; reset and skip refused while it holds the lease, then done under it")
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

        // Reset and skip take the consumer's lease: refused while the instance holds it.
        let refused = try run("consumers", "reset", "--postgres", url, "mail", "--to", "0")
        #expect(refused.status == 2 && refused.stderr.contains("in use"), "\(refused.stderr)")
        #expect(try run("consumers", "parked", "--postgres", url, "mail", "--skip", "2").status == 2)
        try await store.close()

        let reset = try run("consumers", "reset", "--postgres", url, "mail", "--to", "1", "--json")
        #expect(reset.status == 0, "\(reset.stderr)")
        let parked = try run("consumers", "parked", url, "mail", "--json")
        #expect((try jsonObject(parked.stdout) as? [[String: Any]])?.map { $0["position"] as? Int } == [2])
        #expect(try run("consumers", "parked", "--postgres", url, "mail", "--skip", "2").status == 0)
        #expect(try run("consumers", "parked", "--postgres", url, "mail", "--skip", "2").status != 0)
        let after = try #require(try jsonObject(run("consumers", "--postgres", url, "--json").stdout) as? [[String: Any]])
        #expect(after.last?["committed"] as? Int == 1)
        #expect(after.last?["parked"] as? Int == 0)

        // What the CLI wrote is what the next instance finds.
        let next = try await EventStore.open(postgres: configuration)
        let again = try next.consumer(named: "mail")
        #expect(again.committed == 1)
        #expect(try again.parked().isEmpty)
        try await next.close()
    }
}
#endif
