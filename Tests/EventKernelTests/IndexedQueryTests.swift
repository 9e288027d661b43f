@testable import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// Declared indexes and typed queries, checked against a brute-force model: every query the
/// generator makes (equality, `IN`, ranges, predicates, orderings in both directions, limit,
/// offset, cursor paging, counts) returns exactly what filtering and sorting all entities
/// gives, through live folds, after deletes and updates, and after a snapshot restore.
@Suite struct IndexedQueryTests {
    struct Item: Identifiable, Codable, Sendable, Equatable {
        var id: UUID
        var group: Int
        var flag: Bool
        var date: Date
        var name: String
        var note: String?
    }

    static let indexes: [EntityIndex<Item>] = [
        .on(\.group, \.date),
        .on(\.flag),
        .on(\.group, .descending(\.flag), .descending(\.date)),
        .on(\.date),
        .on(\.name),
    ]

    static func open(_ dir: URL) throws -> (EventStore, EventSourcedRepository<Item>) {
        let log = try SegmentedLog.open(at: dir, configuration: .init(segmentSize: 64 << 10))
        let store = try EventStore(log: log, directory: dir, snapshotPolicy: .default)
        return (store, try EventSourcedRepository<Item>(store: store, typeName: "Item", indexes: indexes))
    }

    /// The model: entities with their insertion sequence.
    struct Model {
        var items: [UUID: (item: Item, sequence: Int)] = [:]
        var next = 0
        mutating func save(_ item: Item) {
            let sequence = items[item.id]?.sequence ?? next
            if items[item.id] == nil { next += 1 }
            items[item.id] = (item, sequence)
        }
    }

    /// A random query and its brute-force answer.
    struct Case {
        var query: EntityQuery<Item>
        var filter: (Item) -> Bool
        var order: [(key: (Item) -> IndexValue, descending: Bool)]
        var limit: Int?
        var offset: Int

        func expected(_ model: Model) -> [Item] {
            var all = model.items.values.filter { filter($0.item) }
            let lastDescending = order.last?.descending ?? false
            all.sort { a, b in
                for term in order {
                    let c = IndexValue.compare(term.key(a.item), term.key(b.item))
                    if c != 0 { return term.descending ? c > 0 : c < 0 }
                }
                return lastDescending ? a.sequence > b.sequence : a.sequence < b.sequence
            }
            let items = all.dropFirst(offset).map(\.item)
            return limit.map { Array(items.prefix($0)) } ?? items
        }
    }

    static let day0 = Date(timeIntervalSinceReferenceDate: 700_000_000)

    static func randomItem(_ id: UUID, _ rng: inout SplitMix64) -> Item {
        Item(id: id, group: Int(rng.next() % 5), flag: rng.next() % 3 == 0,
             date: day0.addingTimeInterval(Double(rng.next() % 40) * 3_600),
             name: ["ada", "bob", "Cy", "dee", "éva", "10", "2"][Int(rng.next() % 7)],
             note: rng.next() % 2 == 0 ? nil : "n\(rng.next() % 3)")
    }

    static func randomCase(_ rng: inout SplitMix64) -> Case {
        var query = EntityQuery<Item>()
        var filters: [(Item) -> Bool] = []
        if rng.next() % 2 == 0 {
            let g = Int(rng.next() % 5)
            query = query.where(\.group, equals: g); filters.append { $0.group == g }
        } else if rng.next() % 3 == 0 {
            let gs = [Int(rng.next() % 5), Int(rng.next() % 5)]
            query = query.where(\.group, isIn: gs); filters.append { gs.contains($0.group) }
        }
        if rng.next() % 3 == 0 {
            let f = rng.next() % 2 == 0
            query = query.where(\.flag, equals: f); filters.append { $0.flag == f }
        }
        switch rng.next() % 4 {
        case 0:
            let a = day0.addingTimeInterval(Double(rng.next() % 40) * 3_600), b = a.addingTimeInterval(Double(rng.next() % 20) * 3_600)
            query = query.where(\.date, in: a...b); filters.append { $0.date >= a && $0.date <= b }
        case 1:
            let a = day0.addingTimeInterval(Double(rng.next() % 40) * 3_600)
            let orEqual = rng.next() % 2 == 0
            query = query.where(\.date, lessThan: a, orEqual: orEqual); filters.append { orEqual ? $0.date <= a : $0.date < a }
        case 2:
            let a = day0.addingTimeInterval(Double(rng.next() % 40) * 3_600)
            query = query.where(\.date, greaterThan: a); filters.append { $0.date > a }
        default: break
        }
        if rng.next() % 5 == 0 {
            query = query.where { $0.note == nil }; filters.append { $0.note == nil }
        }
        if rng.next() % 6 == 0 {
            let n = ["ada", "10", "2"][Int(rng.next() % 3)]
            query = query.where(\.name, greaterThan: n, orEqual: true); filters.append { Array($0.name.utf8).lexicographicallyPrecedes(Array(n.utf8)) == false }
        }
        var order: [(key: (Item) -> IndexValue, descending: Bool)] = []
        switch rng.next() % 6 {
        case 0:
            let asc = rng.next() % 2 == 0
            query = query.orderBy(\.date, ascending: asc); order = [({ $0.date.indexValue }, !asc)]
        case 1:
            query = query.orderBy(\.flag, ascending: false).orderBy(\.date, ascending: false)
            order = [({ $0.flag.indexValue }, true), ({ $0.date.indexValue }, true)]
        case 2:
            let asc = rng.next() % 2 == 0
            query = query.orderBy(\.name, ascending: asc); order = [({ $0.name.indexValue }, !asc)]
        case 3:
            query = query.orderBy(\.group).orderBy(\.date, ascending: false)
            order = [({ $0.group.indexValue }, false), ({ $0.date.indexValue }, true)]
        default: break
        }
        let limit: Int? = rng.next() % 3 == 0 ? nil : Int(rng.next() % 12)
        let offset = rng.next() % 3 == 0 ? Int(rng.next() % 8) : 0
        query = query.limit(limit).offset(offset)
        let filter = filters
        // `limit: 0` is "no limit", as Core Data's fetchLimit.
        return Case(query: query, filter: { item in filter.allSatisfy { $0(item) } }, order: order,
                    limit: limit == 0 ? nil : limit, offset: offset)
    }

    func check(_ repository: EventSourcedRepository<Item>, _ model: Model, _ rng: inout SplitMix64, queries: Int) throws {
        for _ in 0..<queries {
            let c = Self.randomCase(&rng)
            let expected = c.expected(model)
            let got = try repository.fetch(c.query)
            #expect(got.map(\.id) == expected.map(\.id), "\(repository.explain(c.query))")
            // Counting ignores limit and offset.
            var unpaged = c
            unpaged.limit = nil
            unpaged.offset = 0
            #expect(try repository.count(c.query) == unpaged.expected(model).count, "count: \(repository.explain(c.query))")
            // Cursor paging walks the whole result exactly once.
            let all = unpaged.expected(model).map(\.id)
            let pageSize = Int(rng.next() % 40) + 1
            var walked: [UUID] = []
            var page = try repository.fetchPage(c.query.offset(0).limit(pageSize))
            walked += page.entities.map(\.id)
            var guardCount = 0
            while let next = page.nextCursor, guardCount < 1_000 {
                page = try repository.fetchPage(c.query.offset(0).limit(pageSize).after(next))
                walked += page.entities.map(\.id)
                guardCount += 1
            }
            #expect(walked == all, "paging: \(repository.explain(c.query))")
        }
    }

    @Test func queriesMatchTheBruteForceModelLiveAndAfterRestore() async throws {
        let dir = TemporaryDirectory("ek-indexed")
        var rng = SplitMix64(seed: 11)
        var model = Model()
        var ids: [UUID] = []
        do {
            let (store, repository) = try Self.open(dir.url)
            for round in 0..<12 {
                var batch: [Item] = []
                for _ in 0..<40 {
                    let id = UUID(); ids.append(id)
                    batch.append(Self.randomItem(id, &rng))
                }
                try await repository.addAll(batch)
                batch.forEach { model.save($0) }
                // Updates move entities between keys; deletes free slots that adds reuse.
                for _ in 0..<15 {
                    let id = ids[Int(rng.next() % UInt64(ids.count))]
                    if rng.next() % 3 == 0 {
                        if try await repository.delete(id: id) { model.items[id] = nil }
                    } else {
                        let item = Self.randomItem(id, &rng)
                        try await repository.save(item)
                        model.save(item)
                    }
                }
                try check(repository, model, &rng, queries: round == 11 ? 150 : 25)
            }
            try await store.close()   // writes the snapshot
        }
        let (store, repository) = try Self.open(dir.url)
        #expect(repository.projection.eventsApplied == 0, "restored from the snapshot, not replayed")
        try check(repository, model, &rng, queries: 150)
        // And it keeps folding correctly on the restored indexes.
        for _ in 0..<50 {
            let id = ids[Int(rng.next() % UInt64(ids.count))]
            let item = Self.randomItem(id, &rng)
            try await repository.save(item)
            model.save(item)
        }
        try check(repository, model, &rng, queries: 100)
        try await store.close()
    }

    @Test func plansUseTheIndexesTheyShould() throws {
        let store = try EventStore(log: InMemoryLog())
        let items = try EventSourcedRepository<Item>(store: store, typeName: "Item", indexes: Self.indexes)
        #expect(items.explain(EntityQuery().where(\.group, equals: 1).orderBy(\.date, ascending: false)) == "index (\\Item.group, \\Item.date) backwards")
        #expect(items.explain(EntityQuery().where(\.group, equals: 1).orderBy(\.flag, ascending: false).orderBy(\.date, ascending: false))
                == "index (\\Item.group, \\Item.flag desc, \\Item.date desc)")
        // Without an ordering the order is insertion's: the index finds, a sort orders.
        #expect(items.explain(EntityQuery().where(\.date, in: Self.day0...Self.day0)) == "index (\\Item.date), then sort")
        #expect(items.explain(EntityQuery().where(\.date, in: Self.day0...Self.day0).orderBy(\.date)) == "index (\\Item.date)")
        #expect(items.explain(EntityQuery().where(\.note, equals: nil)) == "insertion order, then filter on \\Item.note")
        #expect(items.explain(EntityQuery().orderBy(\.group)) == "scan of every entity, then sort")
        #expect(items.explain(EntityQuery().where(\.group, isIn: [1, 2]).orderBy(\.date)) == "index (\\Item.group, \\Item.date), 2 key ranges, then sort")
    }

    /// A snapshot of more entities than one part holds restores them all, in order, with
    /// their indexes (the parts decode in parallel).
    @Test func aSnapshotInSeveralPartsRestoresEverything() async throws {
        let dir = TemporaryDirectory("ek-parts")
        var rng = SplitMix64(seed: 5)
        let items = (0..<9_500).map { _ in Self.randomItem(UUID(), &rng) }
        let (all, byGroup, count): ([Item], [Item], Int)
        do {
            let (store, repository) = try Self.open(dir.url)
            for start in stride(from: 0, to: items.count, by: 1_000) {
                try await repository.addAll(Array(items[start..<min(start + 1_000, items.count)]))
            }
            _ = try await repository.delete(id: items[17].id)
            all = repository.fetchAll()
            byGroup = try repository.fetch(EntityQuery().where(\.group, equals: 3).orderBy(\.date, ascending: false))
            count = try repository.count(EntityQuery().where(\.flag, equals: true))
            try await store.close()   // writes the snapshot
        }
        let (store, repository) = try Self.open(dir.url)
        #expect(repository.projection.eventsApplied == 0, "restored from the snapshot, not replayed")
        #expect(repository.fetchAll() == all)
        #expect(all.count == 9_499)
        #expect(try repository.fetch(EntityQuery().where(\.group, equals: 3).orderBy(\.date, ascending: false)) == byGroup)
        #expect(try repository.count(EntityQuery().where(\.flag, equals: true)) == count)
        try await store.close()
    }

    /// Inserts move up to a chunk of index entries: the entries' size is the cost of a write.
    @Test func indexEntriesStayCompact() {
        #expect(MemoryLayout<IndexKey>.stride <= 56)
        #expect(MemoryLayout<KeyedSlot>.stride <= 72)
        let key = IndexKey([.int(1), .string("b"), .double(3), .null])
        #expect(key.count == 4 && key.values == [.int(1), .string("b"), .double(3), .null])
        #expect(IndexKey(.bool(true)).values == [.bool(true)])
    }

    @Test func aCursorFromAnotherQueryIsRefused() throws {
        let store = try EventStore(log: InMemoryLog())
        let items = try EventSourcedRepository<Item>(store: store, typeName: "Item", indexes: Self.indexes)
        let byDate = EntityQuery<Item>().orderBy(\.date)
        let cursor = QueryCursor(key: [], sequence: 0, plan: .max)
        #expect(throws: RepositoryError.self) { try items.fetch(byDate.after(cursor)) }
        #expect(throws: RepositoryError.invalidQuery("offset -1 must not be negative")) { try items.fetch(byDate.offset(-1)) }
        // An observation of a query that can never run is refused up front, not answered with [].
        #expect(throws: RepositoryError.self) { try items.observe(byDate.after(cursor)) }
        #expect(throws: RepositoryError.invalidQuery("limit -2 must not be negative")) { try items.observe(byDate.limit(-2)) }
        // The same query empties after an IN of nothing: that is an answer, and it is observable.
        #expect(throws: Never.self) { try items.observe(byDate.where(\.group, isIn: [Int]())) }
    }
}
