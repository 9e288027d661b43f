@testable import EventKernel
import EventLog
import Foundation
import KernelPrimitives
import Testing
import EventKernelTestSupport

/// A snapshot's parts (4,096 entities each) encode their index keys into key columns of their
/// own, each in the narrowest layout its keys fit, and the open joins them
/// (`KeyColumn.joined`): here only a later part has long keys, so the earlier parts' narrow or
/// tail-less columns are widened in the join. Fetches, indexed queries and writes after the
/// open answer as a brute-force model does, and a stored index order that is out of order is
/// refused (the store replays).
@Suite struct SnapshotMixedLayoutTests {
    struct Person: Identifiable, Codable, Sendable, Equatable {
        var id: UUID
        var name: String
        var city: String
        var group: Int
    }

    /// Names (narrow, compact and whole keys by part), (city, group) (compact), group
    /// (narrow), and both again with descending components (ties then go newest first).
    static let indexes: [EntityIndex<Person>] = [
        .on(\.name), .on(\.city, \.group), .on(\.group),
        EntityIndex([.descending(\.group)]), EntityIndex([.descending(\.city), .ascending(\.group)]),
    ]

    static func open(_ dir: URL) throws -> (EventStore, EventSourcedRepository<Person>) {
        let store = try EventStore.open(at: dir)
        return (store, try EventSourcedRepository<Person>(store: store, typeName: "Person", indexes: indexes))
    }

    static let shortNames = ["ada", "bob", "Cy", "dee", "10", "2", "a"]
    /// 52 bytes and more: a whole-key column.
    static let longNames = (0..<3).map { "a rather long name that goes past the inline part: \($0)" }
    static let cities = ["oslo", "rome", "bern"]
    /// With its group, 27 encoded bytes: past a compact key's 24, within its 28 with tails.
    static let longCity = "a city, fifteen"

    /// Part 1 (slots 0..<4096): short names and cities only (narrow and compact columns without
    /// tails). Part 2: cities long enough for tails, and only there. Part 3: names longer than
    /// the inline bytes, and only there.
    static func person(_ i: Int, _ rng: inout SplitMix64) -> Person {
        var name = shortNames[Int(rng.next() % UInt64(shortNames.count))]
        var city = cities[Int(rng.next() % UInt64(cities.count))]
        if i >= 8_192, rng.next() % 4 == 0 { name = longNames[Int(rng.next() % 3)] }
        if (4_096..<8_192).contains(i), rng.next() % 5 == 0 { city = longCity }
        return Person(id: UUID(), name: name, city: city, group: Int(rng.next() % 4))
    }

    /// Every query of the test's shapes, with the model's answer.
    static func cases() -> [QueryCase<Person>] {
        typealias Case = QueryCase<Person>
        let name: (Person) -> IndexValue = { $0.name.indexValue }, group: (Person) -> IndexValue = { $0.group.indexValue }
        var all: [Case] = []
        for n in shortNames + longNames {
            all.append(Case(query: EntityQuery<Person>().where(\.name, equals: n), filter: { $0.name == n }, order: [], limit: nil, offset: 0))
        }
        for (bound, ascending) in [("a", true), ("a rather", false), ("b", true)] {
            all.append(Case(query: EntityQuery<Person>().where(\.name, greaterThan: bound, orEqual: true).orderBy(\.name, ascending: ascending).limit(700).offset(100),
                            filter: { !Array($0.name.utf8).lexicographicallyPrecedes(Array(bound.utf8)) },
                            order: [(name, !ascending)], limit: 700, offset: 100))
        }
        for c in cities + [longCity] {
            all.append(Case(query: EntityQuery<Person>().where(\.city, equals: c).orderBy(\.group, ascending: false),
                            filter: { $0.city == c }, order: [(group, true)], limit: nil, offset: 0))
            for g in 0..<4 {
                all.append(Case(query: EntityQuery<Person>().where(\.city, equals: c).where(\.group, equals: g),
                                filter: { $0.city == c && $0.group == g }, order: [], limit: nil, offset: 0))
            }
        }
        for g in 0..<4 {
            all.append(Case(query: EntityQuery<Person>().where(\.group, equals: g).orderBy(\.name, ascending: false),
                            filter: { $0.group == g }, order: [(name, true)], limit: nil, offset: 0))
        }
        return all
    }

    static func check(_ people: EventSourcedRepository<Person>, _ model: QueryModel<Person>) throws {
        #expect(people.fetchAll() == model.items.values.sorted { $0.sequence < $1.sequence }.map(\.item))
        for c in cases() {
            let got = try people.fetch(c.query)
            #expect(got == c.expected(model), "\(people.explain(c.query))")
        }
    }

    @Test func partsOfMixedLayoutsJoinToTheColumnsOfEveryKey() async throws {
        let dir = TemporaryDirectory("ek-mixed-parts")
        var rng = SplitMix64(seed: 39)
        var model = QueryModel<Person>()
        let count = 9_000
        do {
            let (store, people) = try Self.open(dir.url)
            let all = (0..<count).map { Self.person($0, &rng) }
            for start in stride(from: 0, to: count, by: 1_500) { try await people.addAll(Array(all[start..<min(start + 1_500, count)])) }
            for person in all { model.save(person) }
            try await store.close()
        }
        let body = try RepositorySnapshotBody(try SnapshotFile(decoding: Array(try Data(contentsOf: try #require(SnapshotDirectory(storeDirectory: dir.url).files(for: "repository:Person").last)))).body)
        #expect(body.parts.count == 3 && body.heads.count == count, "three parts")
        // Each part's own columns, as the open encodes them, before the join.
        let parts = stride(from: 0, to: count, by: 4_096).map { start in
            EventSourcedRepository<Person>.restoredKeys(of: model.ids[start..<min(start + 4_096, count)].map { model.items[$0]!.item },
                                                        Self.indexes, rows: EventSourcedRepository<Person>.State(indexes: Self.indexes).rows)
        }
        #expect(parts.map { $0.columns[0].layout } == [.narrow, .narrow, .full], "names: only the last part is whole keys")
        #expect(parts.map { $0.columns[1].tails.isEmpty } == [true, false, true], "cities: only the second part has tails")

        do {
            let (store, people) = try Self.open(dir.url)
            #expect(people.projection.eventsApplied == 0, "restored from the snapshot")
            let columns = people.projection.withLockedState { $0.rows.columns }
            #expect(columns[0].layout == .full && !columns[1].tails.isEmpty, "the joined columns are the widest part's")
            try Self.check(people, model)
            // Writes after the open: renames across layouts, and deletes in every part.
            for i in stride(from: 7, to: count, by: 61) {
                var person = model.items[model.ids[i]]!.item
                person.name = i % 2 == 0 ? Self.longNames[i % 3] : Self.shortNames[i % 7]
                person.city = i % 3 == 0 ? Self.longCity : Self.cities[i % 3]
                try await people.update(person)
                model.save(person)
            }
            for i in stride(from: 3, to: count, by: 97) {
                _ = try await people.delete(id: model.ids[i])
                model.items[model.ids[i]] = nil
            }
            try Self.check(people, model)
            try await store.close()
        }

        // The close wrote a new snapshot: one stored order out of order (its first and last
        // entries swapped, keys that differ) is refused, and the log is replayed.
        let damaged = try RepositorySnapshotBody.rewrite(in: dir.url, projection: "repository:Person") { body in
            let last = body.orders[0].ordinals.count - 1
            body.orders[0].ordinals.swapAt(0, last)
        }
        #expect(throws: BinaryDecodingError.self) {
            _ = try EventSourcedRepository<Person>.decodeSnapshot(damaged, schema: EntitySchema<Person>(), indexes: Self.indexes)
        }
        let (store, people) = try Self.open(dir.url)
        #expect(people.projection.eventsApplied > 0, "replayed, not restored")
        try Self.check(people, model)
        try await store.close()
    }

    /// Narrow and compact indexes are restored straight from their columns, checking the stored
    /// order as the entries are built: an order whose keys descend somewhere, whose equal keys
    /// are not in insertion order, or that names a row twice is refused (the store replays),
    /// and the unchanged one restores an index that answers as the model does.
    @Test func narrowAndCompactOrdersAreCheckedAsTheyAreBuilt() async throws {
        let dir = TemporaryDirectory("ek-narrow-compact-orders")
        var model = QueryModel<Person>()
        do {
            let (store, people) = try Self.open(dir.url)
            let all = (0..<600).map { Person(id: UUID(), name: Self.shortNames[$0 % 7], city: Self.cities[$0 % 3], group: $0 % 4) }
            try await people.addAll(all)
            for person in all { model.save(person) }
            try await store.close()
        }
        let file = try #require(SnapshotDirectory(storeDirectory: dir.url).files(for: "repository:Person").last)
        let original = try SnapshotFile(decoding: Array(try Data(contentsOf: file)))
        let body = try RepositorySnapshotBody(original.body)
        let restored = try EventSourcedRepository<Person>.decodeSnapshot(original.body, schema: EntitySchema<Person>(), indexes: Self.indexes)
        #expect(restored.rows.columns.map(\.layout)[1...] == [.compact, .narrow, .narrow, .compact], "the premise: (city, group) compact, group narrow")
        #expect(restored.rows.indexes.map(\.layout)[1...] == [.compact, .narrow, .narrow, .compact])

        let people = Dictionary(uniqueKeysWithValues: model.items.map { ($0.key, $0.value.item) })
        func person(_ ordinal: UInt64) -> Person {
            guard case .uuid(let id) = body.heads[Int(ordinal)].id else { preconditionFailure("UUID ids") }
            return people[id]!
        }
        let keys: [Int: (Person) -> [String]] = [1: { [$0.city, "\($0.group)"] }, 2: { ["\($0.group)"] }, 3: { ["\($0.group)"] }, 4: { [$0.city, "\($0.group)"] }]
        for (number, key) in keys.sorted(by: { $0.key < $1.key }) {
            let ordinals = body.orders[number].ordinals
            let tie = try #require(ordinals.indices.dropLast().first { key(person(ordinals[$0])) == key(person(ordinals[$0 + 1])) })
            let damages: [(String, (inout [UInt64]) -> Void)] = [
                ("keys descend", { $0.swapAt(0, $0.count - 1) }),
                ("equal keys out of insertion order", { $0.swapAt(tie, tie + 1) }),
                ("a row named twice", { $0[tie + 1] = $0[tie] }),
            ]
            for (what, damage) in damages {
                var changed = body
                damage(&changed.orders[number].ordinals)
                #expect(throws: BinaryDecodingError.self, "index \(number): \(what)") {
                    _ = try EventSourcedRepository<Person>.decodeSnapshot(changed.encoded(), schema: EntitySchema<Person>(), indexes: Self.indexes)
                }
            }
        }
        let (store, reopened) = try Self.open(dir.url)
        #expect(reopened.projection.eventsApplied == 0, "restored from the snapshot")
        try Self.check(reopened, model)
        try await store.close()
    }
}
