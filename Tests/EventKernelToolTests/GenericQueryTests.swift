import Foundation
import Testing
import EventKernel
import EventKernelTestSupport
@testable import EventKernelTool

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
        // A double, and an optional left out of one entity (Alice's overdraft is nil).
        #expect(try ids(try run("query", store, "--type", "Account", "--where", "overdraft<0", "--json")) == [bob])
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
        let notANumber = try run("query", store, "--type", "Account", "--where", "balance>=lots")
        #expect(notANumber.status == 1 && notANumber.stderr.contains("balance holds numbers"), "\(notANumber.stderr)")
        let textRange = try run("query", store, "--type", "Account", "--where", "name>A")
        #expect(textRange.status == 1 && textRange.stderr.contains("ranges are on dates and numbers"), "\(textRange.stderr)")
        let noOperator = try run("query", store, "--type", "Account", "--where", "balance")
        #expect(noOperator.status == 1 && noOperator.stderr.contains("expected FIELD=VALUE"), "\(noOperator.stderr)")
        let noType = try run("query", store, "--type", "Acount", "--where", "balance>=1")
        #expect(noType.status == 1 && noType.stderr.contains("its entity types: Account, Transfer"), "\(noType.stderr)")
        #expect(try run("query", store, "--where", "balance>=1").status != 0, "no --type")
        #expect(try run("query", store, "--type", "Account", "--where", "balance>=1", "--oldest-first").status != 0)
    }

    @Test func aQueryRefusesEntitiesItCannotRead() async throws {
        let temp = TemporaryDirectory("ek-query")
        let store = temp.file("forum")
        try await writeForum(store)
        do {
            let reopened = try EventStore.open(at: store, snapshotPolicy: .never)
            let notes = try EventSourcedRepository<OpaqueNote>(store: reopened, typeName: "Note", schema: opaqueNotes)
            try await notes.add(OpaqueNote(id: "n1", text: "secret"))
            try await reopened.close()
        }
        let opaque = try run("query", store.path, "--type", "Note", "--where", "text=secret")
        #expect(opaque.status == 1)
        #expect(opaque.stderr.contains("1 entity of Note (first Note/n1 at position"), "\(opaque.stderr)")
        // Strings ids and nested fields.
        #expect(try ids(try run("query", store.path, "--type", "Post", "--where", "thread=7", "--json")) == ["post-1"])
        #expect(try ids(try run("query", store.path, "--type", "Post", "--where", "score>=0", "--order", "score:desc", "--json")) == ["post-1", "00000000-0000-4000-8000-000000000009"])
    }
}
