import Activities
import ActivityWorkload
import Foundation
import Testing
import EventKernelTestSupport

func generatedIndex(count: Int, seed: UInt64 = 5) throws -> ActivityIndex {
    var index = ActivityIndex()
    for op in ActivityHistoryGenerator(seed: seed, activityCount: count) {
        switch op {
        case .add(let m): try index.insert(m)
        case .update(let m): try index.update(m)
        case .end(let id, let date): try index.end(id: id, at: date)
        case .delete(let id): index.remove(id: id)
        }
    }
    return index
}

@Suite struct SnapshotTests {
    @Test func roundTripPreservesContentsAndQueries() throws {
        let index = try generatedIndex(count: 3000)
        var bytes: [UInt8] = []
        index.serialize(into: &bytes)
        let loaded = try ActivityIndex(deserializing: bytes)
        #expect(loaded.count == index.count)
        #expect(loaded.all() == index.all())
        let all = index.all()
        let mid = all[all.count / 2].startDate
        for types in [nil, Set([ActivityType.sleep]), Set(["feeding", "bath"] as [ActivityType])] {
            for order in ActivitySortOrder.allCases {
                let q = ActivityQuery(afterDate: mid.addingTimeInterval(-3 * 86_400), beforeDate: mid, types: types, limit: 40, sortOrder: order)
                #expect(try loaded.fetch(q) == index.fetch(q))
                #expect(try loaded.fetch(overlappingFrom: mid, to: mid.addingTimeInterval(3600), types: types, sortOrder: order)
                            == index.fetch(overlappingFrom: mid, to: mid.addingTimeInterval(3600), types: types, sortOrder: order))
            }
        }
        // The loaded index stays fully mutable.
        var copy = loaded
        try copy.insert(ActivityModel(startDate: mid, type: "new type"))
        #expect(copy.count == index.count + 1 && loaded.count == index.count)
        // Serializing is deterministic and appends.
        var again: [UInt8] = [1, 2, 3]
        loaded.serialize(into: &again)
        #expect(Array(again.dropFirst(3)) == bytes)
    }

    @Test func emptyIndexRoundTrips() throws {
        var bytes: [UInt8] = []
        ActivityIndex().serialize(into: &bytes)
        #expect(try ActivityIndex(deserializing: bytes).isEmpty)
    }

    @Test func truncatedSnapshotsThrow() throws {
        let index = try generatedIndex(count: 200)
        var bytes: [UInt8] = []
        index.serialize(into: &bytes)
        for length in 0..<bytes.count {
            #expect(throws: ActivityIndexError.self, "length \(length)") {
                try ActivityIndex(deserializing: Array(bytes[..<length]))
            }
        }
        #expect(throws: ActivityIndexError.self) { try ActivityIndex(deserializing: bytes + [0]) }
    }

    @Test func bitFlipsThrow() throws {
        let index = try generatedIndex(count: 200)
        var bytes: [UInt8] = []
        index.serialize(into: &bytes)
        var rng = SeededRandom(seed: 3)
        for position in 0..<bytes.count where position < 64 || Int.random(in: 0..<4, using: &rng) == 0 {
            var flipped = bytes
            flipped[position] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
            #expect(throws: ActivityIndexError.self, "byte \(position)") { try ActivityIndex(deserializing: flipped) }
        }
    }
}

@Suite struct GeneratorTests {
    @Test func deterministicForASeed() {
        let a = Array(ActivityHistoryGenerator(seed: 9, activityCount: 2000))
        let b = Array(ActivityHistoryGenerator(seed: 9, activityCount: 2000))
        let c = Array(ActivityHistoryGenerator(seed: 10, activityCount: 2000))
        #expect(a == b)
        #expect(a != c)
    }

    @Test func realisticChronologicalHistory() throws {
        let count = 20_000
        let generator = ActivityHistoryGenerator(seed: 1, activityCount: count)
        var adds = 0, updates = 0, ends = 0, deletes = 0
        var lastStart = Date.distantPast
        var types: Set<ActivityType> = []
        var added: [UUID: ActivityModel] = [:]
        for op in generator {
            switch op {
            case .add(let m):
                adds += 1
                #expect(m.startDate >= lastStart, "chronological")
                lastStart = m.startDate
                types.insert(m.type)
                #expect(added.updateValue(m, forKey: m.id) == nil)
                #expect(m.startDate >= generator.start && m.startDate < generator.start.addingTimeInterval(generator.span))
                if m.type == .sleep, let d = m.duration { #expect(d >= 8 * 3600 && d <= 11 * 3600) }
                if m.type == .tummyTime, let d = m.duration { #expect(d >= 5 * 60 && d <= 20 * 60) }
            case .update(let m):
                updates += 1
                #expect(added[m.id] != nil)
            case .end(let id, let at):
                ends += 1
                #expect(added[id]?.isActive == true && at >= added[id]!.startDate)
            case .delete(let id):
                deletes += 1
                #expect(added[id] != nil)
            }
        }
        #expect(Set(ActivityHistoryGenerator.allTypes).count == 6)
        #expect(types == Set(ActivityHistoryGenerator.allTypes))
        #expect(abs(adds - count) <= count / 50, "roughly the requested count: \(adds)")
        #expect(Double(updates) / Double(adds) > 0.02 && Double(updates) / Double(adds) < 0.04)
        #expect(Double(deletes) / Double(adds) > 0.005 && Double(deletes) / Double(adds) < 0.015)
        #expect(ends > adds / 100)
        // Spans the period: the last activity starts in its final month.
        #expect(lastStart > generator.start.addingTimeInterval(generator.span - 30 * 86_400))
        // A handful stay active, and the whole history applies cleanly.
        let index = try generatedIndex(count: count, seed: 1)
        let active = index.all().filter(\.isActive).count
        #expect(active >= 1 && active <= 10, "active: \(active)")
        #expect(index.count == adds - deletes)
    }
}
