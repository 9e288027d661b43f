@_spi(Indexing) @testable import EventKernel
import EventLog
import Foundation
import Synchronization
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
        /// A computed property: an index on it runs this getter (in `prepare`, never in the fold).
        var nameLength: Int { name.count }
    }

    static let indexes: [EntityIndex<Item>] = [
        .on(\.group, \.date),
        .on(\.flag),
        .on(\.group, .descending(\.flag), .descending(\.date)),
        .on(\.date),
        .on(\.name),
    ]

    static let names = ["ada", "bob", "Cy", "dee", "éva", "e\u{301}va", "10", "2", "a\u{0}b", "a",
                        "a rather long name that goes past the inline part: one",
                        "a rather long name that goes past the inline part: two"]

    static func open(_ dir: URL) throws -> (EventStore, EventSourcedRepository<Item>) {
        let log = try SegmentedLog.open(at: dir, configuration: .init(segmentSize: 64 << 10))
        let store = try EventStore(log: log, directory: dir, snapshotPolicy: .default)
        return (store, try EventSourcedRepository<Item>(store: store, typeName: "Item", indexes: indexes))
    }

    /// The brute-force twin, and a generated query with its answer (EventKernelTestSupport).
    typealias Model = QueryModel<Item>
    typealias Case = QueryCase<Item>

    static let day0 = Date(timeIntervalSinceReferenceDate: 700_000_000)

    static func randomItem(_ id: UUID, _ rng: inout SplitMix64) -> Item {
        Item(id: id, group: Int(rng.next() % 5), flag: rng.next() % 3 == 0,
             date: day0.addingTimeInterval(Double(rng.next() % 40) * 3_600),
             // Long names share their first 32 encoded bytes (index keys compare their
             // components then); "éva" twice, precomposed and not (byte order, not canonical
             // equality); a NUL inside a name.
             name: Self.names[Int(rng.next() % UInt64(Self.names.count))],
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
        var nameFixed = false
        switch rng.next() % 8 {
        case 0:
            let n = (["ada", "10", "2"] + Self.names)[Int(rng.next() % UInt64(Self.names.count + 3))]
            query = query.where(\.name, greaterThan: n, orEqual: true); filters.append { Array($0.name.utf8).lexicographicallyPrecedes(Array(n.utf8)) == false }
        case 1:
            let n = Self.names[Int(rng.next() % UInt64(Self.names.count))]
            query = query.where(\.name, equals: n); filters.append { Array($0.name.utf8) == Array(n.utf8) }
            nameFixed = true
        default: break
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
            // A single-value equality drops its property's ordering term (Docs/Queries.md):
            // then the default order, insertion, applies.
            query = query.orderBy(\.name, ascending: asc); order = nameFixed ? [] : [({ $0.name.indexValue }, !asc)]
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
        #if EVENTKERNEL_INTERNAL_CHECKS
        #expect(repository.projection.state.rows.keyInvariantViolations() == [])
        #endif
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

    /// An index on a computed property (read through its key path, the domain's getter: its
    /// keys are computed in `prepare` and kept per row) answers right through updates that change
    /// its key and updates that do not, deletes, slot reuse and a snapshot restore.
    @Test func anIndexOnAComputedPropertyStaysRightThroughUpdatesAndRestore() async throws {
        #expect(MemoryLayout<Item>.offset(of: \Item.nameLength) == nil, "a computed property, read through the key path")
        let indexes: [EntityIndex<Item>] = [.on(\.nameLength, \.date), .on(\.group)]
        func open(_ dir: URL) throws -> (EventStore, EventSourcedRepository<Item>) {
            let store = try EventStore(log: try SegmentedLog.open(at: dir, configuration: .init(segmentSize: 64 << 10)),
                                       directory: dir, snapshotPolicy: .default)
            return (store, try EventSourcedRepository<Item>(store: store, typeName: "Item", indexes: indexes))
        }
        func expectAnswers(_ repository: EventSourcedRepository<Item>, _ model: [UUID: Item]) throws {
            #if EVENTKERNEL_INTERNAL_CHECKS
            #expect(repository.projection.state.rows.keyInvariantViolations() == [])
            #endif
            for length in Set(Self.names.map(\.count)) {
                let query = EntityQuery<Item>().where(\.nameLength, equals: length).orderBy(\.date, ascending: false)
                #expect(repository.explain(query).hasPrefix("index ("), "served by the index: \(repository.explain(query))")
                let got = try repository.fetch(query).map(\.id)
                let expected = model.values.filter { $0.name.count == length }
                #expect(Set(got) == Set(expected.map(\.id)), "length \(length)")
                #expect(got.map { model[$0]!.date } == expected.map(\.date).sorted(by: >), "length \(length), newest first")
            }
        }
        let dir = TemporaryDirectory("ek-computed-index")
        var rng = SplitMix64(seed: 26)
        var model: [UUID: Item] = [:]
        var ids: [UUID] = []
        do {
            let (store, repository) = try open(dir.url)
            for _ in 0..<6 {
                let batch = (0..<30).map { _ in Self.randomItem(UUID(), &rng) }
                ids += batch.map(\.id)
                try await repository.addAll(batch)
                for item in batch { model[item.id] = item }
                for _ in 0..<20 {
                    let id = ids[Int(rng.next() % UInt64(ids.count))]
                    switch rng.next() % 3 {
                    case 0:
                        if try await repository.delete(id: id) { model[id] = nil }
                    case 1 where model[id] != nil:
                        // Same computed key, another date: the entry moves in the first index only.
                        var item = model[id]!
                        item.date = Self.day0.addingTimeInterval(Double(rng.next() % 40) * 3_600)
                        try await repository.save(item)
                        model[id] = item
                    default:
                        let item = Self.randomItem(id, &rng)
                        try await repository.save(item)
                        model[id] = item
                    }
                }
                try expectAnswers(repository, model)
            }
            try await store.close()   // writes the snapshot
        }
        let (store, repository) = try open(dir.url)
        #expect(repository.projection.eventsApplied == 0, "restored from the snapshot, not replayed")
        try expectAnswers(repository, model)
        for _ in 0..<30 {
            let item = Self.randomItem(ids[Int(rng.next() % UInt64(ids.count))], &rng)
            try await repository.save(item)
            model[item.id] = item
        }
        try expectAnswers(repository, model)
        try await store.close()
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
        // Several key ranges in the order's index: each range's first matches, merged.
        #expect(items.explain(EntityQuery().where(\.group, isIn: [1, 2]).orderBy(\.date)) == "index (\\Item.group, \\Item.date), 2 key ranges merged")
        #expect(items.explain(EntityQuery().where(\.group, isIn: [1, 2]).orderBy(\.date, ascending: false)) == "index (\\Item.group, \\Item.date) backwards, 2 key ranges merged")
        // Ranges that do not give the order (the ordering is on another property) are sorted.
        #expect(items.explain(EntityQuery().where(\.group, isIn: [1, 2]).orderBy(\.name)) == "index (\\Item.group, \\Item.date), 2 key ranges, then sort")
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

    /// Readers on several threads at once, half of whose queries match nothing, each get the
    /// answer a lone reader gets. Under ThreadSanitizer (`make sanitizers`) this is also the test
    /// of an empty result's copy-out: `Array(unsafeUninitializedCapacity: 0)` writes the shared
    /// empty-array storage, which TSan reported as a race when two empty queries met (stop 38's CI).
    @Test func concurrentReadersOfEmptyAndFullResultsGetALoneReadersAnswer() async throws {
        let dir = TemporaryDirectory("ek-readers")
        var rng = SplitMix64(seed: 11)
        let (store, repository) = try Self.open(dir.url)
        try await repository.addAll((0..<200).map { _ in Self.randomItem(UUID(), &rng) })
        let none = EntityQuery<Item>().where(\.group, equals: 99)
        let some = EntityQuery<Item>().where(\.group, equals: 3).orderBy(\.date, ascending: false)
        let expected = try repository.fetch(some)
        #expect(!expected.isEmpty)
        let rounds = testScale.pick(2_000, small: 500)
        let wrong = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 4) { reader in
            for round in 0..<rounds {
                do {
                    if (round &+ reader) % 2 == 0 {
                        if try !repository.fetch(none).isEmpty { wrong.add(1, ordering: .relaxed) }
                    } else if try repository.fetch(some) != expected {
                        wrong.add(1, ordering: .relaxed)
                    }
                } catch {
                    wrong.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(wrong.load(ordering: .relaxed) == 0, "answers that differ from a lone reader's")
        try await store.close()
    }

    struct Inner: Sendable { var flag: Bool; var label: String }
    enum Kind: String, Sendable, IndexValueConvertible { case a, b }
    final class Box: @unchecked Sendable { let number: Int; init(_ number: Int) { self.number = number } }
    struct Shapes: Sendable {
        var small: Int8
        var id: UUID
        var name: String
        var inner: Inner
        var note: String?
        var kind: Kind
        var date: Date
        var box: Box
        var computed: Int { Int(small) * 2 }
    }

    /// Index keys are read by a stored property's offset where the key path names inline
    /// storage, through the key path otherwise; both must give the key path's value, for every
    /// shape of property.
    @Test func indexKeysReadEveryKindOfPropertyAsItsKeyPathDoes() {
        func check<Value: IndexValueConvertible & Sendable>(_ keyPath: any KeyPath<Shapes, Value> & Sendable, _ entities: [Shapes], _ line: Int = #line) {
            for entity in entities {
                let expected = entity[keyPath: keyPath].indexValue
                #expect(IndexComponent.ascending(keyPath).value(entity) == expected, "line \(line)")
                #expect(IndexComponent.descending(keyPath).value(entity) == expected, "line \(line)")
            }
        }
        var entities: [Shapes] = []
        for i in 0..<50 {
            let name: String = i % 2 == 0 ? "short \(i)" : String(repeating: "long name ", count: i)
            let note: String? = i % 4 == 0 ? nil : "note \(i)"
            let kind: Kind = i % 2 == 0 ? .a : .b
            let date = Date(timeIntervalSinceReferenceDate: Double(i) * 1_234.5)
            entities.append(Shapes(small: Int8(truncatingIfNeeded: i * 37), id: UUID(), name: name,
                                   inner: Inner(flag: i % 3 == 0, label: "label \(i)"), note: note, kind: kind, date: date, box: Box(i)))
        }
        #expect(MemoryLayout<Shapes>.offset(of: \Shapes.inner.label) != nil, "read by offset")
        #expect(MemoryLayout<Shapes>.offset(of: \Shapes.computed) == nil, "read through the key path")
        check(\Shapes.small, entities)
        check(\Shapes.id, entities)
        check(\Shapes.name, entities)
        check(\Shapes.inner.flag, entities)
        check(\Shapes.inner.label, entities)
        check(\Shapes.note, entities)
        check(\Shapes.kind, entities)
        check(\Shapes.date, entities)
        check(\Shapes.box.number, entities)
        check(\Shapes.computed, entities)
    }

    /// A snapshot's stored index order is checked against the keys, never trusted: a swapped
    /// pair or a short order is refused (the store then replays), and an index with no stored
    /// order (declared since) is built by a sort, to the same entries. Keys long enough to tie
    /// on their encoding's inline part compare by their components.
    @Test func restoringAnIndexChecksItsStoredOrder() throws {
        let long = "a rather long name that goes past the inline part: "
        // The first part's names all short: its narrow column is widened in the join.
        let names = (0..<300).map { i in i >= 100 && i % 3 == 0 ? long + String(i % 7) : String(i % 11) }
        func restoredRows() -> IndexedRows {
            var rows = IndexedRows(fields: [[IndexedField(keyPath: \Item.name, descending: false)], [IndexedField(keyPath: \Item.group, descending: true)]])
            var names0: [IndexKey] = [], groups: [IndexKey] = []
            let repeated = rows.appendRestored(names.indices.map { RowHead(id: .string("\($0)"), version: 1, sequence: UInt64($0 * 2)) })
            #expect(repeated == nil)
            for (i, name) in names.enumerated() {
                names0.append(IndexKey([.string(name)]))
                groups.append(IndexKey([.int(Int64(i % 5))]))
            }
            // Two parts, as a snapshot's parts restore their keys.
            var parts: [(columns: [KeyColumn], ends: KeyColumn)] = []
            for range in [0..<100, 100..<names.count] {
                var columns = rows.columns.map { KeyColumn(descending: $0.descending) }
                columns[0].restore(names0[range])
                columns[1].restore(groups[range])
                parts.append((columns, KeyColumn(descending: [false])))
            }
            #expect(parts[0].columns[0].isNarrow && !parts[1].columns[0].isNarrow, "only the later part's names are long")
            rows.restoreKeys(parts: parts)
            // The strings are long, the groups fit nine bytes.
            #expect(!rows.columns[0].isNarrow && rows.columns[1].isNarrow)
            return rows
        }
        func slots(_ rows: IndexedRows, _ number: Int) -> [Int32] {
            var slots: [Int32] = []
            let entries = rows.indexes[number]
            entries.scan(from: entries.startPosition, to: entries.endPosition, reversed: false) { slots.append($0.slot); return true }
            return slots
        }
        // The order by (name bytes, insertion); by (group descending, then insertion descending:
        // ties go in the last component's direction).
        let byName = names.indices.sorted { a, b in
            names[a].utf8.elementsEqual(names[b].utf8) ? a < b : names[a].utf8.lexicographicallyPrecedes(names[b].utf8)
        }.map(Int32.init)
        let byGroup = names.indices.sorted { ($0 % 5, $0) > ($1 % 5, $1) }.map(Int32.init)
        var stored = restoredRows()
        try stored.restoreIndexes(names: ["name", "group"], orders: ["name": byName, "group": byGroup])
        #expect(slots(stored, 0) == byName)
        #expect(slots(stored, 1) == byGroup)
        var sorted = restoredRows()
        try sorted.restoreIndexes(names: ["name", "group"], orders: [:])
        #expect(slots(sorted, 0) == byName)
        #expect(slots(sorted, 1) == byGroup)

        for i in [0, 1, 150, 298] {
            var swapped = byName
            swapped.swapAt(i, i + 1)
            var rows = restoredRows()
            #expect(throws: BinaryDecodingError.self, "pair \(i) swapped") { try rows.restoreIndexes(names: ["name", "group"], orders: ["name": swapped, "group": byGroup]) }
        }
        var rows = restoredRows()
        #expect(throws: BinaryDecodingError.self) { try rows.restoreIndexes(names: ["name", "group"], orders: ["name": byName, "group": Array(byGroup.dropLast())]) }
    }

    /// Inserts move up to a chunk of index entries: the entries' size is the cost of a write.
    @Test func indexEntriesStayCompact() {
        #expect(MemoryLayout<IndexKey>.stride <= 56)
        #expect(MemoryLayout<KeyedSlot>.stride <= 48)
        // An interval index's end is kept per row as one value, not as a key.
        #expect(MemoryLayout<IndexValue>.stride <= 24)
        let key = IndexKey([.int(1), .string("b"), .double(3), .null])
        #expect(key.count == 4 && key.values == [.int(1), .string("b"), .double(3), .null])
        #expect(IndexKey(.bool(true)).values == [.bool(true)])
    }

    @Test func aCursorFromAnotherQueryIsRefused() async throws {
        let store = try EventStore(log: InMemoryLog())
        let items = try EventSourcedRepository<Item>(store: store, typeName: "Item", indexes: Self.indexes)
        var rng = SplitMix64(seed: 11)
        try await items.addAll((0..<3).map { _ in
            var item = Self.randomItem(UUID(), &rng)
            item.date = Self.day0
            return item
        })
        let byDate = EntityQuery<Item>().orderBy(\.date)
        let cursor = QueryCursor(key: [], sequence: 0, plan: .max)
        #expect(throws: RepositoryError.self) { try items.fetch(byDate.after(cursor)) }
        #expect(throws: RepositoryError.invalidQuery("offset -1 must not be negative")) { try items.fetch(byDate.offset(-1)) }
        // An observation of a query that can never run is refused up front, not answered with [].
        #expect(throws: RepositoryError.self) { try items.observe(byDate.after(cursor)) }
        #expect(throws: RepositoryError.invalidQuery("limit -2 must not be negative")) { try items.observe(byDate.limit(-2)) }
        // A cursor of a query whose matches were sorted (its key: the ordering's values, none
        // here) on the index that then serves a query in order is refused, not read as a key.
        let window = EntityQuery<Item>().where(\.date, in: Self.day0...Self.day0.addingTimeInterval(86_400))
        #expect(items.explain(window) == "index (\\Item.date), then sort")
        let sorted = try items.fetchPage(window.limit(1))
        #expect(sorted.nextCursor != nil)
        #expect(throws: RepositoryError.self) { try items.fetch(window.orderBy(\.date).after(sorted.nextCursor)) }
        // The same query empties after an IN of nothing: that is an answer, and it is observable.
        #expect(throws: Never.self) { try items.observe(byDate.where(\.group, isIn: [Int]())) }
    }
}

/// Index keys' byte encodings order exactly as their components do, in both directions, for
/// every kind of value (random keys against `IndexValue.compare`), and a prefix's encoding
/// orders keys by their first components.
@Suite struct NormalizedKeyTests {
    static func randomValue(_ kind: UInt64, _ rng: inout SplitMix64) -> IndexValue {
        if rng.next() % 9 == 0 { return .null }
        switch kind {
        case 0: return .bool(rng.next() % 2 == 0)
        case 1: return .int(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 63))
        case 2: return .uint(UInt64(Int64.max) + 1 + rng.next() % 1_000)
        case 3:
            let special: [Double] = [0, -0.0, .infinity, -.infinity, .leastNonzeroMagnitude, -1, 1, 1e300]
            return .double(rng.next() % 3 == 0 ? special[Int(rng.next() % 8)] : Double(bitPattern: rng.next() >> 2) * (rng.next() % 2 == 0 ? 1 : -1))
        case 4:
            let alphabet: [String] = ["a", "b", "\u{0}", "é", "e\u{301}", "z", "\u{FF}"]
            return .string((0..<Int(rng.next() % 40)).map { _ in alphabet[Int(rng.next() % 7)] }.joined())
        default:
            return .uuid(UUID(uuid: (UInt8(rng.next() % 3), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, UInt8(rng.next() % 256))))
        }
    }

    @Test func encodingsOrderAsComponents() {
        var rng = SplitMix64(seed: 99)
        for _ in 0..<testScale.pick(20_000, small: 2_000) {
            let width = 1 + Int(rng.next() % 3)
            let kinds = (0..<width).map { _ in rng.next() % 6 }
            let descending = (0..<width).map { _ in rng.next() % 2 == 0 }
            let a = kinds.map { Self.randomValue($0, &rng) }
            let b = rng.next() % 4 == 0 ? a : kinds.map { Self.randomValue($0, &rng) }
            var expected = 0
            for i in 0..<width {
                let c = IndexValue.compare(a[i], b[i])
                if c != 0 { expected = descending[i] ? -c : c; break }
            }
            let na = NormalizedKey(a, descending: descending), nb = NormalizedKey(b, descending: descending)
            let inline = NormalizedKey.compare(na, nb, bytes: NormalizedKey.inlineBytes)
            if na.isExact && nb.isExact {
                #expect(inline == expected, "\(a) vs \(b), descending \(descending)")
            } else if inline != 0 {
                // The inline parts decide only when they differ; ties go to the components.
                #expect(inline == expected, "\(a) vs \(b), descending \(descending)")
            }
            // A prefix of one component orders keys by that component.
            let prefix = NormalizedKey([b[0]], descending: descending)
            if prefix.isExact {
                let c = NormalizedKey.compare(na, prefix, bytes: Int(prefix.length))
                let first = IndexValue.compare(a[0], b[0])
                #expect(c == (descending[0] ? -first : first), "\(a) starts before/after \(b[0])")
            }
        }
    }
}
