import Foundation
import Testing
import EventLog
import EventKernel
import EventKernelTestSupport

// A second domain on the generic repository, public API only.
struct Account: Identifiable, Codable, Sendable, Equatable { var id: UUID; var name: String }
struct Transaction: Identifiable, Codable, Sendable, Equatable {
    var id: UUID; var accountID: UUID; var date: Date; var amount: Int; var category: String
}

final class Ledger: Sendable {
    let accounts: EventSourcedRepository<Account>
    let transactions: EventSourcedRepository<Transaction>
    init(store: EventStore) throws {
        accounts = try EventSourcedRepository(store: store, typeName: "Account")
        transactions = try EventSourcedRepository(store: store, typeName: "Transaction",
                                                  indexes: [.on(\.accountID, \.date), .on(\.category), .on(\.date)])
    }
    func transactions(of account: UUID) -> [Transaction] {
        (try? transactions.fetch(EntityQuery().where(\.accountID, equals: account).orderBy(\.date))) ?? []
    }
    func transactions(in category: String) -> [Transaction] { (try? transactions.fetch(EntityQuery().where(\.category, equals: category))) ?? [] }
    func transactions(from start: Date, to end: Date) throws -> [Transaction] {
        guard start <= end else { throw RepositoryError.invalidQuery("end date \(end) is before start date \(start)") }
        return try transactions.fetch(EntityQuery().where(\.date, in: start...end).orderBy(\.date))
    }
    func open(_ account: Account, with opening: Transaction) async throws {
        // One atomic batch spanning both entity types.
        try await accounts.store.execute { command in
            try accounts.add(account, in: &command)
            try transactions.add(opening, in: &command)
        }
    }
    func deleteTransactions(of account: UUID) async throws -> Int { try await transactions.deleteAll(matching: EntityQuery().where(\.accountID, equals: account)) }
}

@Suite struct AccountsDomainTests {
    let day0 = Date(timeIntervalSince1970: 1_700_000_000)
    func tx(_ account: UUID, day: Int, _ amount: Int, _ category: String) -> Transaction {
        Transaction(id: UUID(), accountID: account, date: day0.addingTimeInterval(Double(day) * 86_400), amount: amount, category: category)
    }

    @Test func ledgerQueriesAndBatches() async throws {
        let store = try EventStore(log: InMemoryLog())
        let ledger = try Ledger(store: store)
        let a = Account(id: UUID(), name: "Checking"), b = Account(id: UUID(), name: "Savings")
        try await ledger.open(a, with: tx(a.id, day: 0, 100, "opening"))
        try await ledger.open(b, with: tx(b.id, day: 1, 500, "opening"))
        try await ledger.transactions.addAll([tx(a.id, day: 2, -20, "food"), tx(a.id, day: 5, -30, "rent"), tx(b.id, day: 3, -5, "food")])
        #expect(ledger.transactions(of: a.id).map(\.amount) == [100, -20, -30])
        #expect(Set(ledger.transactions(in: "food").map(\.amount)) == [-20, -5])
        #expect(try ledger.transactions(from: day0.addingTimeInterval(86_400), to: day0.addingTimeInterval(3 * 86_400)).map(\.amount) == [500, -20, -5])
        #expect(throws: RepositoryError.invalidQuery("end date \(day0) is before start date \(day0.addingTimeInterval(1))")) {
            try ledger.transactions(from: day0.addingTimeInterval(1), to: day0)
        }
        #expect(try await ledger.deleteTransactions(of: a.id) == 3)
        #expect(ledger.transactions(of: a.id).isEmpty)
        #expect(ledger.transactions.count == 2)
        #expect(try ledger.transactions(from: day0, to: day0.addingTimeInterval(10 * 86_400)).map(\.amount) == [500, -5])
        #expect(ledger.accounts.fetchAll().count == 2)
        #expect(try ledger.accounts.fetchPage(offset: 1, limit: 5).count == 1)
        #expect(throws: RepositoryError.self) { try ledger.accounts.fetchPage(offset: -1, limit: 5) }
    }

    @Test func failurePathsWriteNothing() async throws {
        let log = InMemoryLog()
        let store = try EventStore(log: log)
        let ledger = try Ledger(store: store)
        let a = Account(id: UUID(), name: "A")
        try await ledger.accounts.add(a)
        await #expect(throws: RepositoryError.alreadyExists(.uuid(a.id))) { try await ledger.accounts.add(a) }
        let ghost = Account(id: UUID(), name: "ghost")
        await #expect(throws: RepositoryError.notFound(.uuid(ghost.id))) { try await ledger.accounts.update(ghost) }
        // Deleting an unknown id is a no-op that says so.
        #expect(try await ledger.accounts.delete(id: ghost.id) == false)
        let fresh = Account(id: UUID(), name: "fresh")
        // A duplicate inside one batch: the whole batch is rejected.
        await #expect(throws: RepositoryError.alreadyExists(.uuid(fresh.id))) { try await ledger.accounts.addAll([fresh, fresh]) }
        #expect(ledger.accounts.fetch(id: fresh.id) == nil)
        #expect(log.bounds.nextPosition == 1)
        #expect(RepositoryError.notFound(.uuid(ghost.id)).description.contains(ghost.id.uuidString))
    }

    @Test func observeYieldsOnlyChangedResults() async throws {
        let store = try EventStore(log: InMemoryLog())
        let ledger = try Ledger(store: store)
        let a = UUID(), b = UUID()
        let stream = ledger.transactions.observe(where: { $0.accountID == a })
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next()?.count == 0)
        let first = tx(a, day: 0, 1, "x")
        try await ledger.transactions.add(first)
        let afterAdd = await iterator.next()
        #expect(afterAdd == [first], "got \(String(describing: afterAdd))")
        try await ledger.transactions.add(tx(b, day: 0, 2, "x")) // not in the result: no yield
        var changed = first
        changed.amount = 9
        try await ledger.transactions.update(changed)
        // Results coalesce for a slow consumer, but the other account's add never shows up as
        // a result of its own: the next one is the update.
        let afterUpdate = await iterator.next()
        #expect(afterUpdate == [changed], "got \(String(describing: afterUpdate))")
    }

    @Test func historyTimeTravelAndSnapshotRestart() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ek-\(UUID().uuidString)")
        let log = InMemoryLog()
        let store = try EventStore(log: log, directory: dir, snapshotPolicy: .never)
        let ledger = try Ledger(store: store)
        var account = Account(id: UUID(), name: "v1")
        try await ledger.accounts.add(account)
        account.name = "v2"
        try await ledger.accounts.update(account)
        try await store.writeSnapshots()
        try await ledger.accounts.delete(id: account.id)
        let history = try ledger.accounts.history(of: account.id)
        #expect(history.map(\.eventType) == ["Account.added", "Account.updated", "Account.deleted"])
        #expect(history.map(\.entityVersion) == [1, 2, 3])
        #expect(try ledger.accounts.entities(throughPosition: 0) == [Account(id: account.id, name: "v1")])
        #expect(try ledger.accounts.entities(throughPosition: 1) == [account])
        #expect(try ledger.accounts.entities(throughPosition: 2).isEmpty)
        // Restart over the same log: snapshot at 2, tail of one event.
        let restarted = try Ledger(store: EventStore(log: log, directory: dir, snapshotPolicy: .never))
        #expect(restarted.accounts.fetchAll().isEmpty)
        #expect(restarted.accounts.projection.eventsApplied == 1)
        try await restarted.accounts.add(account) // re-add after delete uses the restored version (3)
        #expect(restarted.accounts.fetch(id: account.id) == account)
    }
}
