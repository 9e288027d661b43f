import Activities
import ActivityWorkload
import Foundation
import Testing
import EventKernelTestSupport

/// Random operations and queries, checked against `BruteForceActivityStore`.
@Suite struct ModelCheckTests {
    static let types: [ActivityType] = ["a", "b", "c", "d", "e", "f"]

    struct Harness {
        var rng: SeededRandom
        var index = ActivityIndex()
        var reference = BruteForceActivityStore()
        var ids: [UUID] = []

        // A coarse grid of start minutes makes ties common.
        mutating func randomDate() -> Date { date(Double(Int.random(in: 0..<1500, using: &rng))) }

        mutating func randomTypes() -> Set<ActivityType>? {
            switch Int.random(in: 0..<5, using: &rng) {
            case 0: return nil
            case 1: return []
            default:
                // Skewed counts so both the global and per-type plans run.
                return Set((0..<Int.random(in: 1...5, using: &rng)).map { _ in ModelCheckTests.types.randomElement(using: &rng)! })
            }
        }

        mutating func randomType() -> ActivityType {
            // "a" is common, the others rare.
            Bool.random(using: &rng) ? "a" : ModelCheckTests.types.randomElement(using: &rng)!
        }

        mutating func randomModel(id: UUID) -> ActivityModel {
            let start = randomDate()
            let end: Date? = Int.random(in: 0..<10, using: &rng) == 0
                ? nil : start.addingTimeInterval(Double(Int.random(in: -1...600, using: &rng)) * 60)
            return ActivityModel(id: id, startDate: start, endDate: end, type: randomType())
        }

        mutating func existingOrNewID() -> UUID {
            if !ids.isEmpty && Int.random(in: 0..<10, using: &rng) > 0 { return ids.randomElement(using: &rng)! }
            return UUID(uuid: withUnsafeBytes(of: (rng.next(), rng.next())) { $0.load(as: uuid_t.self) })
        }

        mutating func step() {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:
                let m = randomModel(id: Int.random(in: 0..<20, using: &rng) == 0 ? existingOrNewID() : existingOrNewID0())
                let ok = reference.insert(m)
                let threw = (try? index.insert(m)) == nil
                #expect(ok == !threw, "insert \(m)")
                if ok { ids.append(m.id) }
            case 5..<7:
                let m = randomModel(id: existingOrNewID())
                let ok = reference.update(m)
                #expect(ok == ((try? index.update(m)) != nil), "update \(m)")
            case 7:
                let id = existingOrNewID()
                let d = randomDate()
                let ok = reference.end(id, d)
                #expect(ok == ((try? index.end(id: id, at: d)) != nil), "end \(id)")
            default:
                let id = existingOrNewID()
                #expect(reference.remove(id) == index.remove(id: id))
                ids.removeAll { $0 == id }
            }
        }

        mutating func existingOrNewID0() -> UUID {
            UUID(uuid: withUnsafeBytes(of: (rng.next(), rng.next())) { $0.load(as: uuid_t.self) })
        }

        mutating func checkQueries(seed: UInt64, step: Int) {
            #expect(index.count == reference.items.count, "seed \(seed) step \(step)")
            for _ in 0..<3 {
                let order: ActivitySortOrder = Bool.random(using: &rng) ? .oldestFirst : .newestFirst
                let limit: Int? = Bool.random(using: &rng) ? nil : Int.random(in: -1...60, using: &rng)
                switch Int.random(in: 0..<4, using: &rng) {
                case 0, 1:
                    var cursor: ActivityCursor? = nil
                    if Bool.random(using: &rng) {
                        cursor = reference.items.randomElement(using: &rng).map(ActivityCursor.init(after:))
                            ?? ActivityCursor(startDate: randomDate(), id: existingOrNewID0())
                        if Bool.random(using: &rng) { cursor?.id = existingOrNewID0() }  // a deleted item's key
                    }
                    let q = ActivityQuery(
                        afterDate: Bool.random(using: &rng) ? randomDate() : nil,
                        beforeDate: Bool.random(using: &rng) ? randomDate() : nil,
                        types: randomTypes(), limit: limit, sortOrder: order,
                        offset: Int.random(in: 0..<8, using: &rng) == 0 ? Int.random(in: -1...30, using: &rng) : 0,
                        cursor: cursor)
                    let expected = try? reference.fetch(q)
                    let actual = try? index.fetch(q)
                    #expect(expected == actual, "seed \(seed) step \(step) query \(q)")
                    if actual != nil {
                        let unpaged = Set((try? reference.fetch(ActivityQuery(
                            afterDate: q.afterDate, beforeDate: q.beforeDate, types: q.types,
                            sortOrder: q.sortOrder, cursor: q.cursor))) ?? [])
                        for m in reference.items.prefix(50) {
                            #expect(index.matches(m, q) == unpaged.contains(m), "seed \(seed) matches \(m) \(q)")
                        }
                    }
                case 2:
                    let (a, b) = (randomDate(), randomDate())
                    let types = randomTypes()
                    let lo = min(a, b), hi = max(a, b)
                    let expected = reference.fetch(startingIn: lo, hi, types: types, order: order, limit: limit.map { max(0, $0) })
                    let actual = try? index.fetch(startingIn: lo...hi, types: types, sortOrder: order, limit: limit.map { max(0, $0) })
                    #expect(expected == actual, "seed \(seed) step \(step) startingIn \(lo)...\(hi) \(String(describing: types))")
                default:
                    let (a, b) = (randomDate(), randomDate())
                    let types = randomTypes()
                    let actual = try? index.fetch(overlappingFrom: a, to: b, types: types, sortOrder: order, limit: limit)
                    if b < a || (limit ?? 0) < 0 {
                        #expect(actual == nil, "seed \(seed) overlap must throw")
                    } else {
                        let expected = reference.fetch(overlapping: a, b, types: types, order: order, limit: limit)
                        #expect(expected == actual, "seed \(seed) step \(step) overlapping \(a)...\(b) \(String(describing: types))")
                    }
                }
            }
        }
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func randomOperationsAgreeWithReference(seed: UInt64) {
        var h = Harness(rng: SeededRandom(seed: seed))
        for i in 0..<3000 {
            h.step()
            if i % 10 == 0 { h.checkQueries(seed: seed, step: i) }
        }
        // Sized so chunks split (more than 1,024 entries) along the way.
        #expect(h.index.all(sortedBy: .oldestFirst) == h.reference.sorted(h.reference.items, .oldestFirst), "seed \(seed)")
    }

    @Test func bulkInitMatchesIncrementalAndChunksSplitAndMerge() throws {
        var rng = SeededRandom(seed: 7)
        var index = ActivityIndex()
        var models: [ActivityModel] = []
        for i in 0..<6000 {
            let m = ActivityModel(id: UUID(uuid: withUnsafeBytes(of: (rng.next(), UInt64(i))) { $0.load(as: uuid_t.self) }),
                                  startDate: date(Double(Int.random(in: 0..<4000, using: &rng))), type: ModelCheckTests.types[i % 3])
            try index.insert(m)
            models.append(m)
        }
        let bulk = try ActivityIndex(models.shuffled(using: &rng))
        #expect(bulk.all() == index.all())
        // Remove most, in random order, so chunks drain and merge.
        for m in models.shuffled(using: &rng).prefix(5500) { #expect(index.remove(id: m.id) == m) }
        let remaining = models.filter { index[id: $0.id] != nil }
        let reference = BruteForceActivityStore(items: remaining)
        #expect(index.all() == reference.sorted(remaining, .oldestFirst))
        #expect(try index.fetch(ActivityQuery(types: ["a", "b"], limit: 30)) ==
                    (try reference.fetch(ActivityQuery(types: ["a", "b"], limit: 30))))
        #expect(throws: ActivityIndexError.alreadyExists(models[0].id)) { try ActivityIndex([models[0], models[0]]) }
    }
}

@Suite struct PaginationTests {
    @Test(arguments: [ActivitySortOrder.oldestFirst, .newestFirst])
    func cursorWalksEveryItemOnceDespiteInserts(order: ActivitySortOrder) throws {
        var rng = SeededRandom(seed: 11)
        var index = ActivityIndex()
        var original: Set<UUID> = []
        for _ in 0..<700 {
            let m = ActivityModel(id: UUID(uuid: withUnsafeBytes(of: (rng.next(), rng.next())) { $0.load(as: uuid_t.self) }),
                                  startDate: date(Double(Int.random(in: 0..<300, using: &rng))), type: Bool.random(using: &rng) ? .sleep : "x")
            try index.insert(m)
            original.insert(m.id)
        }
        var seen: [UUID] = []
        var cursor: ActivityCursor? = nil
        var pages = 0
        while true {
            let page = try index.fetch(ActivityQuery(limit: 37, sortOrder: order, cursor: cursor))
            if page.isEmpty { break }
            pages += 1
            let sorted = BruteForceActivityStore().sorted(page, order)
            #expect(page == sorted)
            seen += page.map(\.id)
            cursor = ActivityCursor(after: page[page.count - 1])
            // Inserts elsewhere (before and after the cursor) between pages.
            for _ in 0..<5 {
                try index.insert(ActivityModel(
                    id: UUID(uuid: withUnsafeBytes(of: (rng.next(), rng.next())) { $0.load(as: uuid_t.self) }),
                    startDate: date(Double(Int.random(in: 0..<300, using: &rng))), type: .sleep))
            }
        }
        #expect(pages > 15)
        #expect(Set(seen).count == seen.count, "no item twice")
        #expect(original.isSubset(of: Set(seen)), "every original item once")
    }

    @Test func cursorWithTypeFilterAndOffsetPages() throws {
        let (index, models) = try sampleIndex()
        let first = try index.fetch(ActivityQuery(types: [.sleep], limit: 2, sortOrder: .oldestFirst))
        #expect(first == [models[0], models[2]])
        let second = try index.fetch(ActivityQuery(types: [.sleep], limit: 2, sortOrder: .oldestFirst,
                                                   cursor: ActivityCursor(after: first[1])))
        #expect(second == [models[4], models[6]])
        let skipped = try index.fetch(ActivityQuery(types: [.sleep], limit: 2, sortOrder: .oldestFirst, offset: 1,
                                                    cursor: ActivityCursor(after: first[1])))
        #expect(skipped == [models[6], models[8]])
    }
}
