@_spi(Indexing) @testable import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// The plans a repository keeps per query shape (`QueryPlanCache`): a query run again with
/// other values binds them to the kept plan, and answers exactly as a query planned afresh
/// does, whatever the values change (how many an `IN` accepts, whether a range empties a list,
/// an overlap's range), across shapes that differ only in an ordering's direction, and from many
/// tasks at once; the shapes used least recently are replaced, a shape is kept once, and the
/// plans and cursors belong to the table's declaration of indexes.
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

    /// The shape `n` of the tests of replacement: `n + 1` conditions on the date, in one direction.
    static func shape(_ n: Int, descending: Bool = false, limit: Int? = nil) -> EntityQuery<Item> {
        var query = EntityQuery<Item>()
        for i in 0...n { query = query.where(\.date, greaterThan: IndexedQueryTests.day0.addingTimeInterval(Double(i) * 3_600)) }
        return query.orderBy(\.date, ascending: !descending).limit(limit)
    }

    /// More shapes than are kept: the ones used least recently are replaced (the first is
    /// gone, the last is found), and every answer stays right.
    @Test func moreShapesThanAreKeptStayRight() async throws {
        let (repository, _) = try await Self.repository(150, seed: 11)
        let cache = repository.planCache
        var shapes = 0
        for conditions in 0..<20 {
            for descending in [false, true] {
                for limit in [nil, 5] {
                    let query = Self.shape(conditions, descending: descending, limit: limit)
                    #expect(try repository.fetch(query).map(\.id) == (try Self.uncached(repository, query)))
                    shapes += limit == nil ? 1 : 0
                }
            }
        }
        #expect(shapes > QueryPlanCache.capacity)
        #expect(cache.entries.count == QueryPlanCache.capacity)
        #expect(cache.statistics == (hits: 40, misses: 40), "a limit is not part of the shape")
        // The last shape is kept (a hit), the first was replaced (a miss).
        _ = try repository.fetch(Self.shape(19, descending: true))
        #expect(cache.statistics == (hits: 41, misses: 40))
        _ = try repository.fetch(Self.shape(0))
        #expect(cache.statistics == (hits: 41, misses: 41))
    }

    /// A shape used between every two new ones stays kept however many pass (replacement by
    /// last use, not by age: with the oldest replaced, it went after `capacity` new shapes).
    @Test func aHotShapeIsKept() async throws {
        let (repository, _) = try await Self.repository(100, seed: 12)
        let cache = repository.planCache
        let hot = EntityQuery<Item>().where(\.group, equals: 2).orderBy(\.date, ascending: false).limit(10)
        _ = try repository.fetch(hot)
        for n in 0..<(3 * QueryPlanCache.capacity) {
            _ = try repository.fetch(Self.shape(n % 60, descending: n >= 60))
            let before = cache.statistics.misses
            #expect(try repository.fetch(hot).map(\.id) == (try Self.uncached(repository, hot)))
            #expect(cache.statistics.misses == before, "the hot shape was replaced after \(n + 1) other shapes")
        }
    }

    /// Tasks that miss one shape at once each compute its plan; it is kept once, so that it
    /// does not replace other kept shapes with copies of itself.
    @Test func aShapeIsKeptOnce() async throws {
        let (repository, _) = try await Self.repository(100, seed: 13)
        let cache = repository.planCache
        for n in 0..<(QueryPlanCache.capacity - 1) { _ = try repository.fetch(Self.shape(n)) }
        let shared = EntityQuery<Item>().where(\.group, isIn: [1, 3]).orderBy(\.date)
        // Compiled as concurrent misses would be: each task found no entry and inserts its plan.
        for _ in 0..<8 {
            let entry = try #require(try Self.freshEntry(shared, repository.defaultOrder))
            cache.insert(entry)
        }
        #expect(cache.entries.count == QueryPlanCache.capacity)
        let misses = cache.statistics.misses
        for n in 0..<(QueryPlanCache.capacity - 1) { _ = try repository.fetch(Self.shape(n)) }
        _ = try repository.fetch(shared)
        #expect(cache.statistics.misses == misses, "every shape is still kept")
    }

    /// The entry a miss on `query` inserts, computed on an empty table of the same declaration.
    static func freshEntry(_ query: EntityQuery<Item>, _ order: EntityQuery<Item>.Orderings) throws -> QueryPlanCache.Entry? {
        let scratch = EntityTable<Item>(indexes: IndexedQueryTests.indexes)
        _ = try scratch.compile(query, defaultOrder: order, cached: true)
        return scratch.planCache.entries.first
    }

    /// An entity with a nested property, so that a key path can be built at run time.
    struct Nested: Identifiable, Codable, Sendable, Equatable {
        struct Inner: Codable, Sendable, Equatable { var group: Int; var rank: Int }
        var id: UUID
        var inner: Inner
    }

    /// Key paths that are equal but not one object (a literal, and the same path built by
    /// appending) find the kept plan through `==`, in a condition and in an ordering term, and
    /// answer right.
    @Test func equalKeyPathsOfOtherObjectsShareAPlan() async throws {
        let repository = try EventSourcedRepository<Nested>(
            store: try EventStore(log: InMemoryLog()), typeName: "Nested", indexes: [.on(\.inner.group, \.inner.rank)])
        var rng = SplitMix64(seed: 17)
        let items = (0..<200).map { _ in Nested(id: UUID(), inner: .init(group: Int(rng.next() % 4), rank: Int(rng.next() % 50))) }
        try await repository.addAll(items)
        let literal: any KeyPath<Nested, Int> & Sendable = \Nested.inner.group
        // Built at run time: another object, equal by `==`. (Such a key path is not typed
        // `Sendable`; it is one immutable object, as the literal is.)
        let appended = unsafeBitCast((\Nested.inner).appending(path: \Nested.Inner.group), to: (any KeyPath<Nested, Int> & Sendable).self)
        let rank: any KeyPath<Nested, Int> & Sendable = \Nested.inner.rank
        let rankBuilt = unsafeBitCast((\Nested.inner).appending(path: \Nested.Inner.rank), to: (any KeyPath<Nested, Int> & Sendable).self)
        try #require(literal as AnyKeyPath == appended as AnyKeyPath)
        try #require(literal as AnyKeyPath !== appended as AnyKeyPath, "the test needs two objects")
        for (n, (path, order)) in [(literal, rank), (appended, rankBuilt), (appended, rank), (literal, rankBuilt)].enumerated() {
            let query = EntityQuery<Nested>().where(path, equals: n).orderBy(order, ascending: false).limit(20)
            let expected = items.enumerated().filter { $0.element.inner.group == n }
                .sorted { $0.element.inner.rank != $1.element.inner.rank ? $0.element.inner.rank > $1.element.inner.rank : $0.offset > $1.offset }
            #expect(try repository.fetch(query).map(\.id) == expected.prefix(20).map(\.element.id), "\(repository.explain(query))")
        }
        #expect(repository.planCache.statistics == (hits: 3, misses: 1))
    }

    /// An overlap condition of a kept shape is rebound to each query's range: the same shape
    /// with other ranges (and an `IN` prefix of other values) answers as a fresh plan does.
    @Test func overlapRangesAreRebound() async throws {
        typealias Span = IntervalIndexTests.Span
        let store = try EventStore(log: InMemoryLog())
        let spans = try EventSourcedRepository<Span>(store: store, typeName: "Span", indexes: IntervalIndexTests.indexed)
        var rng = SplitMix64(seed: 31)
        try await spans.addAll((0..<300).map { _ in IntervalIndexTests.randomSpan(UUID(), &rng) })
        let day0 = IntervalIndexTests.day0
        for n in 0..<40 {
            let from = day0.addingTimeInterval(Double(n * 7 % 30) * 600), to = from.addingTimeInterval(Double(n % 5 + 1) * 900)
            let kinds = [n % 4, (n + 1) % 4]
            let query = EntityQuery<Span>().where(\.kind, isIn: kinds).where(\.start, \.end, overlapping: from...to).orderBy(\.start).limit(15)
            let table = spans.publishedTable
            let fresh = table.entities(at: try table.run(query, defaultOrder: spans.defaultOrder).slots).map(\.id)
            #expect(try spans.fetch(query).map(\.id) == fresh)
            #expect(try spans.count(query) == (try table.count(query)))
            let ticks = EntityQuery<Span>().where(\.tick, \.until, overlappingFrom: n, through: n + n % 3).orderBy(\.tick)
            #expect(try spans.fetch(ticks).map(\.id) == table.entities(at: try table.run(ticks, defaultOrder: spans.defaultOrder).slots).map(\.id))
        }
        #expect(spans.planCache.statistics.misses == 3, "one shape each for the window, its count and the ticks")
    }

    /// Tasks querying one repository at once, while another writes: each answer is the one a
    /// fresh plan gives on the same published table, and the shapes they share are kept once
    /// each (tasks that miss a shape at once do not keep copies of it).
    @Test func concurrentQueriesShareKeptPlans() async throws {
        let (repository, _) = try await Self.repository(300, seed: 29)
        let shapes = 12
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var rng = SplitMix64(seed: UInt64(100 + task))
                    for _ in 0..<150 {
                        let c = IndexedQueryTests.randomCase(&rng)
                        // One published table for both answers (a writer runs meanwhile).
                        let table = repository.publishedTable
                        let (cached, _) = try table.run(c.query, defaultOrder: repository.defaultOrder, cached: true)
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
        #expect(repository.planCache.statistics.hits > 0)
        // Then a few shapes (fewer than are kept), from eight tasks at once.
        let before = repository.planCache.statistics
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for round in 0..<40 {
                        let query = Self.shape((round + task) % shapes, limit: round % 3 == 0 ? nil : 7)
                        let table = repository.publishedTable
                        let (cached, _) = try table.run(query, defaultOrder: repository.defaultOrder, cached: true)
                        #expect(cached == (try table.run(query, defaultOrder: repository.defaultOrder)).slots)
                    }
                }
            }
            try await group.waitForAll()
        }
        let entries = repository.planCache.entries
        for i in entries.indices {
            for j in entries.indices where j > i { #expect(!entries[i].sameShape(as: entries[j]), "a shape kept twice") }
        }
        let after = repository.planCache.statistics
        #expect(after.misses - before.misses <= 8 * shapes, "each task misses a shape at most once")
        // Every shape is still kept: running them again computes nothing.
        for n in 0..<shapes { _ = try repository.fetch(Self.shape(n)) }
        #expect(repository.planCache.statistics.misses == after.misses)
    }

    /// An `IN` list is sorted and its repeats dropped (as a `Set` would: equal by
    /// `IndexValue.compare`, numbers across cases, strings by bytes), without hashing.
    @Test func inListsAreSortedWithoutRepeats() throws {
        typealias Filter = IndexedRows.FieldFilter
        #expect(Filter.sortedUnique([.int(3), .int(1), .int(3), .int(2), .int(1)]) == [.int(1), .int(2), .int(3)])
        #expect(Filter.sortedUnique([.int(1), .double(1), .int(0)]).count == 2)
        #expect(Filter.sortedUnique([.string("\u{e9}va"), .string("e\u{301}va"), .string("\u{e9}va")]).count == 2)
        #expect(Filter.sortedUnique([.null, .null]) == [.null])
        #expect(Filter.sortedUnique([]) == [])
        var filter = Filter(keyPath: \Item.group)
        try filter.merge(values: [.int(2), .int(1), .int(2)])
        try filter.merge(values: [.int(2), .int(3)])
        #expect(filter.values == [.int(2)])
        // The intersection of sorted lists, against a search of one in the other.
        var rng = SplitMix64(seed: 8)
        for _ in 0..<200 {
            let a = Filter.sortedUnique((0..<Int(rng.next() % 12)).map { _ in .int(Int64(rng.next() % 16)) })
            let b = Filter.sortedUnique((0..<Int(rng.next() % 12)).map { _ in rng.next() % 2 == 0 ? .int(Int64(rng.next() % 16)) : .double(Double(rng.next() % 32) / 2) })
            #expect(Filter.intersection(a, b) == b.filter(a.contains))
        }
    }

    /// NaN in an equality or `IN` list is refused with a typed error, by the index path and
    /// the scan path alike: sorted, it kept its repeats (`compare` calls NaN greater both
    /// ways), so `[1, NaN, 1]` matched the rows of 1 twice and counted them twice.
    @Test func notANumberInAValueListIsRefused() async throws {
        let (repository, items) = try await Self.repository(120, seed: 19)
        let store = try EventStore(log: InMemoryLog())
        let scanned = try EventSourcedRepository<Item>(store: store, typeName: "Item", indexes: [])
        try await scanned.addAll(items)
        let date = items[5].date, nan = Date(timeIntervalSinceReferenceDate: .nan)
        let message = "the equality or IN condition on \\Item.date has a value that is not a number (NaN)"
        for repo in [repository, scanned] {
            for query in [EntityQuery<Item>().where(\.date, isIn: [date, nan, date]),
                          EntityQuery<Item>().where(\.date, equals: nan),
                          EntityQuery<Item>().where(\.date, isIn: [date]).where(\.date, isIn: [nan])] {
                #expect(throws: RepositoryError.invalidQuery(message)) { try repo.fetch(query) }
                #expect(throws: RepositoryError.invalidQuery(message)) { try repo.count(query) }
                #expect(throws: RepositoryError.invalidQuery(message)) { try repo.observe(query) }
            }
            #expect(try repo.fetch(EntityQuery<Item>().where(\.date, isIn: [date, date])).map(\.id) == items.filter { $0.date == date }.map(\.id))
        }
    }

    /// A NaN bound of a plain range is refused, by the index path and the scan path alike: the
    /// scan matched no row while the index, which files NaN above every number, answered
    /// `greaterThan: NaN` with nothing and `lessThan: NaN` with every row.
    @Test func notANumberAsARangeBoundIsRefused() async throws {
        let (repository, items) = try await Self.repository(120, seed: 23)
        let store = try EventStore(log: InMemoryLog())
        let scanned = try EventSourcedRepository<Item>(store: store, typeName: "Item", indexes: [])
        try await scanned.addAll(items)
        let date = items[5].date, nan = Date(timeIntervalSinceReferenceDate: .nan)
        let message = "the range on \\Item.date has a bound that is not a number (NaN)"
        for repo in [repository, scanned] {
            for query in [EntityQuery<Item>().where(\.date, lessThan: nan),
                          EntityQuery<Item>().where(\.date, greaterThan: nan, orEqual: true),
                          EntityQuery<Item>().where(\.date, from: date, through: nan),
                          EntityQuery<Item>().where(\.date, from: nan, upTo: date),
                          EntityQuery<Item>().where(\.date, lessThan: date).where(\.date, greaterThan: nan)] {
                #expect(throws: RepositoryError.invalidQuery(message)) { try repo.fetch(query) }
                #expect(throws: RepositoryError.invalidQuery(message)) { try repo.count(query) }
                #expect(throws: RepositoryError.invalidQuery(message)) { try repo.observe(query) }
            }
            #expect(try repo.count(EntityQuery<Item>().where(\.date, lessThan: date, orEqual: true)) == items.filter { $0.date <= date }.count)
        }
    }

    /// A merge of key ranges reserves for no more entries than the index holds (it reserved
    /// up to 64 ranges × 4,096 entries, about 15 MB, on a 10-row table).
    @Test func aMergeReservesNoMoreThanTheIndexHolds() async throws {
        #expect(IndexedRows.mergeReservation(wanted: 4_096, ranges: 64, entries: 10) == 10)
        #expect(IndexedRows.mergeReservation(wanted: 50, ranges: 3, entries: 1_000) == 150)
        #expect(IndexedRows.mergeReservation(wanted: Int.max, ranges: 3, entries: 1_000) == 0)
        #expect(IndexedRows.mergeReservation(wanted: Int.max - 1, ranges: 64, entries: 1_000) == 1_000)
        // And a merge of many ranges on a small table answers as before.
        let (repository, items) = try await Self.repository(10, seed: 5)
        let query = EntityQuery<Item>().where(\.group, isIn: Array(0..<64)).orderBy(\.group).orderBy(\.date).limit(4_000)
        let expected = items.enumerated().sorted { a, b in
            a.element.group != b.element.group ? a.element.group < b.element.group
                : a.element.date != b.element.date ? a.element.date < b.element.date : a.offset < b.offset
        }.map(\.element.id)
        #expect(try repository.fetch(query).map(\.id) == expected, "\(repository.explain(query))")
    }

    /// The kept plans belong to the table's declaration of indexes: a table built for another
    /// declaration (what a rebuild publishes) starts with an empty cache, copies of a table
    /// (each commit's) share theirs, and a plan kept under one declaration never runs on
    /// another's indexes; a cursor taken under one declaration is refused under another,
    /// even where the plans' index numbers and key lengths agree.
    @Test func plansAndCursorsBelongToTheDeclaration() async throws {
        let declared: [EntityIndex<Item>] = [.on(\.group, \.date), .on(\.name), .on(\.flag)]
        let reordered: [EntityIndex<Item>] = [.on(\.group, .descending(\.date)), .on(\.flag), .on(\.name)]
        var rng = SplitMix64(seed: 23)
        let items = (0..<200).map { _ in IndexedQueryTests.randomItem(UUID(), &rng) }
        func open(_ indexes: [EntityIndex<Item>]) async throws -> EventSourcedRepository<Item> {
            let repository = try EventSourcedRepository<Item>(store: try EventStore(log: InMemoryLog()), typeName: "Item", indexes: indexes)
            try await repository.addAll(items)
            return repository
        }
        let a = try await open(declared), b = try await open(reordered), sameA = try await open(declared)
        #expect(a.planCache !== b.planCache)
        #expect(a.planCache !== sameA.planCache)
        // A table's copies (the commits after it) keep its plans.
        let cache = a.planCache
        let extra = IndexedQueryTests.randomItem(UUID(), &rng)
        try await a.addAll([extra])
        try await b.addAll([extra])
        try await sameA.addAll([extra])
        #expect(a.planCache === cache)
        for n in 0..<12 {
            for query in [EntityQuery<Item>().where(\.group, equals: n % 5).orderBy(\.date).limit(9),
                          EntityQuery<Item>().where(\.flag, equals: n % 2 == 0).where(\.name, isIn: ["ada", "bob", "2"]).orderBy(\.name),
                          EntityQuery<Item>().where(\.name, greaterThan: "b").orderBy(\.flag)] {
                let fromA = try a.fetch(query).map(\.id)
                #expect(fromA == (try Self.uncached(a, query)))
                #expect(try b.fetch(query).map(\.id) == (try Self.uncached(b, query)))
                #expect(try b.fetch(query).map(\.id) == fromA)
            }
        }
        #expect(b.planCache.statistics.misses == 3, "b computed its own plans")
        // A cursor: the plans agree on index 0, order served, two components, but not on the index.
        let page = EntityQuery<Item>().where(\.group, equals: 1).orderBy(\.date).limit(4)
        let cursor = try #require(try a.fetchPage(page).nextCursor)
        let message = "the cursor belongs to another query (or the repository's indexes changed); start again without it"
        #expect(throws: RepositoryError.invalidQuery(message)) { try b.fetch(page.after(cursor)) }
        // Under an equal declaration (another repository, a table restored) it stays valid.
        #expect(try sameA.fetch(page.after(cursor)).map(\.id) == (try a.fetch(page.after(cursor)).map(\.id)))
    }
}
