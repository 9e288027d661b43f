@_spi(Indexing) @testable import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// The plans a repository keeps per query shape (`QueryPlanCache`): a query run again with
/// other values binds them to the kept plan, and answers exactly as a query planned afresh
/// does, whatever the values change (how many an `IN` accepts, whether a range empties a list),
/// across shapes that differ only in an ordering's direction, and from many tasks at once.
@Suite struct QueryPlanCacheTests {
    typealias Item = IndexedQueryTests.Item

    static func repository(_ count: Int, seed: UInt64) async throws -> (EventSourcedRepository<Item>, [Item]) {
        let store = try EventStore(log: InMemoryLog())
        let repository = try EventSourcedRepository<Item>(store: store, typeName: "Item", indexes: IndexedQueryTests.indexes)
        var rng = SplitMix64(seed: seed)
        let items = (0..<count).map { _ in IndexedQueryTests.randomItem(UUID(), &rng) }
        try await repository.addAll(items)
        return (repository, items)
    }

    /// The answer of `query` planned afresh, without the repository's kept plans.
    static func uncached(_ repository: EventSourcedRepository<Item>, _ query: EntityQuery<Item>) throws -> [UUID] {
        let table = repository.publishedTable
        let (slots, _) = try table.run(query, defaultOrder: repository.defaultOrder)
        return table.entities(at: slots).map(\.id)
    }

    /// Random queries of a few dozen shapes, many values each: every answer, count, page and
    /// plan description equals the uncached one, and most plans were found, not computed.
    @Test func sameShapeWithOtherValuesAnswersAsAFreshPlan() async throws {
        let (repository, _) = try await Self.repository(400, seed: 26)
        var rng = SplitMix64(seed: 261)
        for _ in 0..<600 {
            let c = IndexedQueryTests.randomCase(&rng)
            let got = try repository.fetch(c.query).map(\.id)
            #expect(got == (try Self.uncached(repository, c.query)), "\(repository.explain(c.query))")
            #expect(repository.explain(c.query) == repository.publishedTable.explain(c.query, defaultOrder: repository.defaultOrder, declared: repository.indexes))
            #expect(try repository.count(c.query) == (try repository.publishedTable.count(c.query)))
            // A cursor taken under a kept plan continues under it.
            let first = try repository.fetchPage(c.query.offset(0).limit(3))
            if let next = first.nextCursor {
                let rest = try repository.fetch(c.query.offset(0).limit(nil).after(next)).map(\.id)
                let all = try Self.uncached(repository, c.query.offset(0).limit(nil))
                #expect(first.entities.map(\.id) + rest == all, "paging: \(repository.explain(c.query))")
            }
        }
        let (hits, misses) = repository.planCache.statistics
        #expect(hits > 0 && misses > QueryPlanCache.capacity, "kept plans are found and replaced: \(hits) hits, \(misses) misses")
    }

    /// A shape run again with other values is planned once: the 7-day window, newest 50, and
    /// the same of two groups, each with a hundred windows, answer as the brute force does.
    @Test func aRepeatedShapeIsPlannedOnce() async throws {
        let (repository, items) = try await Self.repository(500, seed: 41)
        let day = IndexedQueryTests.day0
        for hour in 0..<100 {
            let from = day.addingTimeInterval(Double(hour % 40) * 3_600), to = from.addingTimeInterval(Double(hour % 7 + 1) * 3_600)
            let groups = [hour % 5, (hour + 1 + hour / 5 % 4) % 5]
            let window = try repository.fetch(EntityQuery<Item>().where(\.date, greaterThan: from).where(\.date, lessThan: to)
                .orderBy(\.date, ascending: false).limit(50))
            let expected = items.enumerated().filter { $0.element.date > from && $0.element.date < to }
                .sorted { $0.element.date != $1.element.date ? $0.element.date > $1.element.date : $0.offset > $1.offset }
            #expect(window.map(\.id) == expected.prefix(50).map(\.element.id))
            let twoGroups = try repository.fetch(EntityQuery<Item>().where(\.group, isIn: groups).where(\.date, greaterThan: from)
                .where(\.date, lessThan: to).orderBy(\.date, ascending: false).limit(50))
            #expect(twoGroups.map(\.id) == expected.filter { groups.contains($0.element.group) }.prefix(50).map(\.element.id))
        }
        #expect(repository.planCache.statistics == (hits: 198, misses: 2))
    }

    /// One shape of conditions whose values change the plan: a one-value `IN` fixes its
    /// property (its ordering term is dropped and the index serves the rest), a two-value one
    /// is two key ranges merged on the whole order, an equality and an `IN` that do not
    /// intersect accept nothing. Each is planned for what it accepts, in any order of calls.
    @Test func valuesThatChangeThePlanAreNotGivenAnotherPlan() async throws {
        let (repository, items) = try await Self.repository(300, seed: 7)
        func query(_ equal: Int, _ list: [Int]) -> EntityQuery<Item> {
            EntityQuery<Item>().where(\.group, isIn: list).where(\.group, isIn: [equal, equal + 1, equal + 2])
                .orderBy(\.group, ascending: false).orderBy(\.flag, ascending: false).orderBy(\.date, ascending: false).limit(25)
        }
        func expected(_ equal: Int, _ list: [Int]) -> [UUID] {
            let accepted = Set(list).intersection([equal, equal + 1, equal + 2])
            let rows = items.enumerated().filter { accepted.contains($0.element.group) }.sorted { a, b in
                if a.element.group != b.element.group { return a.element.group > b.element.group }
                if a.element.flag != b.element.flag { return a.element.flag }
                if a.element.date != b.element.date { return a.element.date > b.element.date }
                return a.offset > b.offset
            }
            return rows.prefix(25).map(\.element.id)
        }
        let cases: [(Int, [Int])] = [(1, [1]), (1, [1, 2]), (2, [2]), (0, [4]), (1, [2, 3]), (2, [2, 9]), (0, [0, 1, 2]), (3, [3])]
        for _ in 0..<2 {
            for (equal, list) in cases {
                let q = query(equal, list)
                #expect(try repository.fetch(q).map(\.id) == expected(equal, list), "\(equal) \(list): \(repository.explain(q))")
                #expect(repository.explain(q) == repository.publishedTable.explain(q, defaultOrder: repository.defaultOrder, declared: repository.indexes))
            }
        }
        // One value, two, none and three are four plans, each computed once.
        #expect(repository.planCache.statistics.misses == 4)
    }

    /// Shapes that differ only in an ordering's direction, in an overlap's absence, or between
    /// a fetch and a count, are kept apart.
    @Test func differentShapesGetTheirOwnPlans() async throws {
        let (repository, items) = try await Self.repository(200, seed: 3)
        let day = IndexedQueryTests.day0
        for hours in [4.0, 10, 30] {
            let ascending = EntityQuery<Item>().where(\.date, greaterThan: day.addingTimeInterval(hours * 3_600)).orderBy(\.date)
            let descending = EntityQuery<Item>().where(\.date, greaterThan: day.addingTimeInterval(hours * 3_600)).orderBy(\.date, ascending: false)
            let up = try repository.fetch(ascending).map(\.date), down = try repository.fetch(descending).map(\.date)
            #expect(up == items.map(\.date).filter { $0 > day.addingTimeInterval(hours * 3_600) }.sorted())
            #expect(down == up.reversed())
            #expect(try repository.count(descending) == up.count)
        }
        #expect(repository.planCache.statistics.misses == 3, "ascending, descending and the count")
    }

    /// More shapes than are kept: the oldest are replaced and every answer stays right.
    @Test func moreShapesThanAreKeptStayRight() async throws {
        let (repository, _) = try await Self.repository(150, seed: 11)
        var shapes = 0
        for conditions in 1...20 {
            for descending in [false, true] {
                for limit in [nil, 5] {
                    var query = EntityQuery<Item>()
                    for i in 0..<conditions { query = query.where(\.date, greaterThan: IndexedQueryTests.day0.addingTimeInterval(Double(i) * 3_600)) }
                    query = query.orderBy(\.date, ascending: !descending).limit(limit)
                    #expect(try repository.fetch(query).map(\.id) == (try Self.uncached(repository, query)))
                    shapes += limit == nil ? 1 : 0
                }
            }
        }
        #expect(shapes > QueryPlanCache.capacity)
        #expect(repository.planCache.entries.count == QueryPlanCache.capacity)
    }

    /// Tasks querying one repository at once, while another writes: each answer is the one a
    /// fresh plan gives on the same published table.
    @Test func concurrentQueriesShareKeptPlans() async throws {
        let (repository, _) = try await Self.repository(300, seed: 29)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var rng = SplitMix64(seed: UInt64(100 + task))
                    for _ in 0..<150 {
                        let c = IndexedQueryTests.randomCase(&rng)
                        // One published table for both answers (a writer runs meanwhile).
                        let table = repository.publishedTable
                        let (cached, _) = try table.run(c.query, defaultOrder: repository.defaultOrder, cache: repository.planCache)
                        let (fresh, _) = try table.run(c.query, defaultOrder: repository.defaultOrder)
                        #expect(cached == fresh, "\(repository.explain(c.query))")
                    }
                }
            }
            group.addTask {
                var rng = SplitMix64(seed: 99)
                for _ in 0..<20 {
                    try await repository.addAll((0..<10).map { _ in IndexedQueryTests.randomItem(UUID(), &rng) })
                }
            }
            try await group.waitForAll()
        }
        let (hits, misses) = repository.planCache.statistics
        #expect(hits + misses == 8 * 150, "every compilation found or kept a plan")
    }

    /// An `IN` list is sorted and its repeats dropped (as a `Set` would: equal by
    /// `IndexValue.compare`, numbers across cases, strings by bytes), without hashing.
    @Test func inListsAreSortedWithoutRepeats() {
        typealias Filter = IndexedRows.FieldFilter
        #expect(Filter.sortedUnique([.int(3), .int(1), .int(3), .int(2), .int(1)]) == [.int(1), .int(2), .int(3)])
        #expect(Filter.sortedUnique([.int(1), .double(1), .int(0)]).count == 2)
        #expect(Filter.sortedUnique([.string("\u{e9}va"), .string("e\u{301}va"), .string("\u{e9}va")]).count == 2)
        #expect(Filter.sortedUnique([.null, .null]) == [.null])
        #expect(Filter.sortedUnique([]) == [])
        var filter = Filter(keyPath: \Item.group)
        filter.merge(values: [.int(2), .int(1), .int(2)])
        filter.merge(values: [.int(2), .int(3)])
        #expect(filter.values == [.int(2)])
    }
}
