@_spi(Indexing) @testable import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// A one-component string index through its whole life, against a brute-force model: narrow
/// while every name fits 9 bytes, widened by an update to a long name (the old entry removed
/// by the key the column decodes), the long names deleted, then a snapshot and a reopen, whose
/// restore goes back to narrow. Every step compares the answers and the table's invariants.
@Suite struct NarrowIndexDifferentialTests {
    struct Named: Identifiable, Codable, Sendable, Equatable {
        var id: UUID
        var name: String
    }

    static let indexes: [EntityIndex<Named>] = [.on(\.name)]
    static let shortNames = ["", "a", "ab", "a\u{0}", "b", "é", "abcdef", "zz"]
    static let longNames = ["a long name past nine bytes", "b long name past nine bytes", "abcdefg"]

    static func open(_ dir: URL) throws -> (EventStore, EventSourcedRepository<Named>) {
        let log = try SegmentedLog.open(at: dir, configuration: .init(segmentSize: 64 << 10))
        let store = try EventStore(log: log, directory: dir, snapshotPolicy: .default)
        return (store, try EventSourcedRepository<Named>(store: store, typeName: "Named", indexes: indexes))
    }

    /// The entities by id, with their insertion sequence (an update keeps it).
    struct Model {
        var items: [UUID: (name: String, sequence: Int)] = [:]
        var next = 0
        mutating func save(_ item: Named) {
            let sequence = items[item.id]?.sequence ?? next
            if items[item.id] == nil { next += 1 }
            items[item.id] = (item.name, sequence)
        }

        /// Ids in name order (UTF-8 bytes), ties by insertion.
        func ordered(descending: Bool) -> [UUID] {
            items.sorted { a, b in
                let (x, y) = (Array(a.value.name.utf8), Array(b.value.name.utf8))
                if x != y { return descending ? y.lexicographicallyPrecedes(x) : x.lexicographicallyPrecedes(y) }
                return descending ? a.value.sequence > b.value.sequence : a.value.sequence < b.value.sequence
            }.map(\.key)
        }
    }

    func check(_ repository: EventSourcedRepository<Named>, _ model: Model, narrow: Bool, _ step: String) throws {
        let rows = repository.projection.state.rows
        #expect(rows.columns[0].isNarrow == narrow && rows.indexes[0].isNarrow == narrow, "\(step): narrow")
        #if EVENTKERNEL_INTERNAL_CHECKS
        #expect(rows.keyInvariantViolations() == [], "\(step)")
        #endif
        for descending in [false, true] {
            let got = try repository.fetch(EntityQuery<Named>().orderBy(\.name, ascending: !descending)).map(\.id)
            #expect(got == model.ordered(descending: descending), "\(step): order, descending \(descending)")
        }
        for name in Self.shortNames + Self.longNames {
            let got = try repository.fetch(EntityQuery<Named>().where(\.name, equals: name)).map(\.id)
            let expected = model.ordered(descending: false).filter { model.items[$0]!.name == name }
            #expect(got == expected, "\(step): name \(name.debugDescription)")
        }
    }

    @Test(arguments: [5, 6] as [UInt64])
    func aNameIndexWidensAndRestoresNarrowAgainstTheModel(seed: UInt64) async throws {
        let dir = TemporaryDirectory("ek-narrow-differential")
        var rng = SplitMix64(seed: seed)
        var model = Model()
        var ids: [UUID] = []
        func pick<T>(_ values: [T]) -> T { values[Int(rng.next() % UInt64(values.count))] }
        do {
            let (store, repository) = try Self.open(dir.url)
            // Short names only: adds, updates (many to the same name), deletes.
            for round in 0..<4 {
                let batch = (0..<12).map { _ in Named(id: UUID(), name: pick(Self.shortNames)) }
                ids += batch.map(\.id)
                try await repository.addAll(batch)
                for item in batch { model.save(item) }
                for _ in 0..<12 {
                    let id = pick(ids)
                    guard model.items[id] != nil else { continue }
                    if rng.next() % 4 == 0 {
                        #expect(try await repository.delete(id: id))
                        model.items[id] = nil
                    } else {
                        let item = Named(id: id, name: pick(Self.shortNames))
                        try await repository.save(item)
                        model.save(item)
                    }
                }
                try check(repository, model, narrow: true, "seed \(seed), short round \(round)")
            }
            // Long names by updates: the first widens the index while removing the old entry.
            var long: [UUID] = []
            for (n, id) in model.items.keys.sorted(by: { $0.uuidString < $1.uuidString }).prefix(6).enumerated() {
                let item = Named(id: id, name: Self.longNames[n % Self.longNames.count])
                try await repository.save(item)
                model.save(item)
                long.append(id)
                try check(repository, model, narrow: false, "seed \(seed), long update \(n)")
            }
            // Short again for some, then the long ones deleted: still wide until a restore.
            for id in long.prefix(2) {
                let item = Named(id: id, name: pick(Self.shortNames))
                try await repository.save(item)
                model.save(item)
            }
            try check(repository, model, narrow: false, "seed \(seed), short again")
            for id in long.dropFirst(2) {
                #expect(try await repository.delete(id: id))
                model.items[id] = nil
            }
            try check(repository, model, narrow: false, "seed \(seed), long ones deleted")
            try await store.close()   // writes the snapshot
        }
        let (store, repository) = try Self.open(dir.url)
        #expect(repository.projection.eventsApplied == 0, "restored from the snapshot, not replayed")
        try check(repository, model, narrow: true, "seed \(seed), reopened")
        for _ in 0..<12 {
            let id = pick(Array(model.items.keys).sorted { $0.uuidString < $1.uuidString })
            let item = Named(id: id, name: pick(Self.shortNames))
            try await repository.save(item)
            model.save(item)
        }
        try check(repository, model, narrow: true, "seed \(seed), updated after the reopen")
        try await store.close()
    }

    #if EVENTKERNEL_INTERNAL_CHECKS
    /// The checks added with the narrow entries, key columns and slot map see what they guard.
    @Test func invariantChecksSeeABrokenColumnOrIdMap() async throws {
        let store = try EventStore(log: InMemoryLog())
        let repository = try EventSourcedRepository<Named>(store: store, typeName: "Named", indexes: Self.indexes)
        try await repository.addAll([Named(id: UUID(), name: "a"), Named(id: UUID(), name: "b")])
        let rows = repository.projection.state.rows
        #expect(rows.keyInvariantViolations() == [])
        var shortColumn = rows
        shortColumn.columns[0].restore([IndexKey(.string("a"))])
        #expect(shortColumn.keyInvariantViolations().contains("index 0: 1 keys for 2 slots"))
        var brokenMap = rows
        brokenMap.slotsByID.corruptForTesting()
        #expect(brokenMap.keyInvariantViolations().contains { $0.hasPrefix("id map: ") })
        var wideKey = rows
        let long = IndexKey(.string("longer than nine bytes"))
        wideKey.columns[0].set(0, long, normalized: NormalizedKey(long, descending: [false]))
        #expect(wideKey.keyInvariantViolations() == ["index 0: 1 entries do not encode their row's key, sequence or a live slot"])
    }
    #endif
}
