// The finance app's repositories (../shared/seeds, design 004) on EventKernel: accounts and
// transactions, by account, date range (inclusive) and category; delete by account. Domain
// code only: no storage code.
public import EventKernel
public import Foundation

public struct Account: Identifiable, Codable, Sendable, Equatable {
    public var id: UUID
    public var name: String
    public var currency: String
    public init(id: UUID = UUID(), name: String, currency: String = "EUR") {
        self.id = id; self.name = name; self.currency = currency
    }
}

public struct Transaction: Identifiable, Codable, Sendable, Equatable {
    public var id: UUID
    public var accountID: UUID
    public var date: Date
    public var amount: Decimal
    public var category: String
    public var note: String?
    public init(id: UUID = UUID(), accountID: UUID, date: Date, amount: Decimal, category: String, note: String? = nil) {
        self.id = id; self.accountID = accountID; self.date = date; self.amount = amount; self.category = category; self.note = note
    }
}

public enum FinanceError: Error, Equatable {
    case invalidDateRange
}

/// Both repositories of the app, on one store: durable (`open(at:)`) or in memory.
public final class Finance: Sendable {
    public let store: EventStore
    public let accounts: EventSourcedRepository<Account>
    public let transactions: EventSourcedRepository<Transaction>

    public static func open(at directory: URL) throws -> Finance { try Finance(store: .open(at: directory)) }
    public static func inMemory() throws -> Finance { try Finance(store: .inMemory()) }

    init(store: EventStore) throws {
        self.store = store
        accounts = try EventSourcedRepository(store: store, typeName: "Account", defaultOrder: [.ascending(\.name)])
        transactions = try EventSourcedRepository(
            store: store, typeName: "Transaction",
            indexes: [.on(\.accountID, \.date), .on(\.date), .on(\.category, \.date)],
            defaultOrder: [.ascending(\.date)])
    }

    public func close() async throws { try await store.close() }

    // The design's TransactionRepository.
    public func findAll() -> [Transaction] { transactions.fetchAll() }
    public func findById(_ id: UUID) -> Transaction? { transactions.fetch(id: id) }
    public func save(_ items: [Transaction]) async throws { try await transactions.saveAll(items) }
    public func delete(_ id: UUID) async throws { try await transactions.delete(id: id) }

    public func findByAccount(_ accountID: UUID) throws -> [Transaction] {
        try transactions.fetch(EntityQuery().where(\.accountID, equals: accountID).orderBy(\.date))
    }

    /// Both ends inclusive.
    public func findByDateRange(from start: Date, to end: Date) throws -> [Transaction] {
        guard start <= end else { throw FinanceError.invalidDateRange }
        return try transactions.fetch(EntityQuery().where(\.date, in: start...end).orderBy(\.date))
    }

    public func findByCategory(_ category: String) throws -> [Transaction] {
        try transactions.fetch(EntityQuery().where(\.category, equals: category).orderBy(\.date))
    }

    /// The newest `limit` transactions of an account.
    public func latest(of accountID: UUID, limit: Int) throws -> [Transaction] {
        try transactions.fetch(EntityQuery().where(\.accountID, equals: accountID).orderBy(\.date, ascending: false).limit(limit))
    }

    /// Deletes an account and its transactions in one atomic batch.
    @discardableResult
    public func deleteByAccount(_ accountID: UUID) async throws -> Int {
        let doomed = try transactions.fetch(EntityQuery().where(\.accountID, equals: accountID)).map(\.id)
        return try await store.execute { command in
            for id in doomed { try transactions.delete(id: id, in: &command) }
            try accounts.delete(id: accountID, in: &command)
            return doomed.count
        }
    }
}
