import EventKernel
import EventKernelTestSupport
import FinanceExample
import Foundation
import Testing

@Suite struct FinanceTests {
    let day0 = Date(timeIntervalSinceReferenceDate: 800_000_000)
    func day(_ n: Int) -> Date { day0.addingTimeInterval(Double(n) * 86_400) }

    func exercise(_ finance: Finance) async throws -> (UUID, UUID) {
        let checking = Account(name: "Checking"), savings = Account(name: "Savings")
        try await finance.accounts.saveAll([savings, checking])
        try await finance.save([
            Transaction(accountID: checking.id, date: day(2), amount: -20, category: "food"),
            Transaction(accountID: checking.id, date: day(0), amount: 1000, category: "salary"),
            Transaction(accountID: savings.id, date: day(1), amount: 500, category: "transfer"),
            Transaction(accountID: checking.id, date: day(5), amount: Decimal(string: "-30.25")!, category: "food"),
        ])
        return (checking.id, savings.id)
    }

    @Test func queriesByAccountDateRangeAndCategory() async throws {
        let finance = try Finance.inMemory()
        let (checking, savings) = try await exercise(finance)
        #expect(try finance.findByAccount(checking).map(\.amount) == [1000, -20, Decimal(string: "-30.25")!])
        #expect(try finance.findByDateRange(from: day(1), to: day(2)).map(\.amount) == [500, -20], "both ends inclusive")
        #expect(throws: FinanceError.invalidDateRange) { try finance.findByDateRange(from: day(2), to: day(1)) }
        #expect(try finance.findByCategory("food").count == 2)
        #expect(try finance.latest(of: checking, limit: 1).map(\.date) == [day(5)])
        #expect(finance.findAll().map(\.date) == [day(0), day(1), day(2), day(5)], "default order: by date")
        #expect(finance.accounts.fetchAll().map(\.name) == ["Checking", "Savings"], "declared order: by name")
        #expect(try await finance.deleteByAccount(checking) == 3)
        #expect(finance.findAll().map(\.accountID) == [savings])
        #expect(finance.accounts.fetch(id: checking) == nil)
    }

    @Test func aDurableLedgerReopensWithEverything() async throws {
        let dir = TemporaryDirectory("ek-finance")
        let (checking, _): (UUID, UUID)
        do {
            let finance = try Finance.open(at: dir.url)
            (checking, _) = try await exercise(finance)
            try await finance.close()
        }
        let finance = try Finance.open(at: dir.url)
        #expect(try finance.findByAccount(checking).count == 3)
        #expect(try finance.findByCategory("food").map(\.amount) == [-20, Decimal(string: "-30.25")!])
        try await finance.close()
    }
}
