import Activities
import Foundation
import Testing
import EventKernelTestSupport

func date(_ minutes: Double) -> Date { Date(timeIntervalSinceReferenceDate: 700_000_000 + minutes * 60) }

func uuid(_ n: UInt8) -> UUID {
    UUID(uuid: (n, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, n))
}

/// Ten activities a minute apart, alternating sleep and tummy time.
func sampleIndex() throws -> (ActivityIndex, [ActivityModel]) {
    var index = ActivityIndex()
    var models: [ActivityModel] = []
    for i in 0..<10 {
        let m = ActivityModel(id: uuid(UInt8(i + 1)), startDate: date(Double(i)), endDate: date(Double(i) + 0.5),
                              type: i % 2 == 0 ? .sleep : .tummyTime)
        try index.insert(m)
        models.append(m)
    }
    return (index, models)
}

@Suite struct QueryEdgeTests {
    @Test func emptyTypesMatchNothing() throws {
        let (index, _) = try sampleIndex()
        #expect(try index.fetch(ActivityQuery(types: [])) == [])
        #expect(try index.fetch(ActivityQuery(types: [.sleep])).count == 5)
        #expect(try index.fetch(ActivityQuery(types: ["unknown"])) == [])
        #expect(try index.fetch(startingIn: date(-10)...date(100), types: []) == [])
        #expect(try index.fetch(overlappingFrom: date(-10), to: date(100), types: []) == [])
    }

    @Test func limitZeroReturnsEmpty() throws {
        let (index, _) = try sampleIndex()
        #expect(try index.fetch(ActivityQuery(limit: 0)).count == index.count, "limit 0 is no limit")
        #expect(try index.fetch(ActivityQuery(limit: 3)).count == 3)
    }

    @Test func negativeLimitOrOffsetThrows() throws {
        let (index, _) = try sampleIndex()
        let e1 = #expect(throws: ActivityQueryError.self) { try index.fetch(ActivityQuery(limit: -1)) }
        #expect(e1?.message.contains("-1") == true)
        let e2 = #expect(throws: ActivityQueryError.self) { try index.fetch(ActivityQuery(offset: -5)) }
        #expect(e2?.message.contains("offset") == true && e2?.message.contains("-5") == true)
        #expect(throws: ActivityQueryError.self) { try index.fetch(startingIn: date(0)...date(1), limit: -2) }
    }

    @Test func afterLaterThanBeforeThrows() throws {
        let (index, _) = try sampleIndex()
        let e = #expect(throws: ActivityQueryError.self) {
            try index.fetch(ActivityQuery(afterDate: date(5), beforeDate: date(2)))
        }
        #expect(e?.message.contains("\(date(5))") == true)
        #expect(e?.message.contains("\(date(2))") == true)
    }

    @Test func afterEqualBeforeReturnsEmpty() throws {
        let (index, _) = try sampleIndex()
        // An activity starts exactly at date(3); both bounds are exclusive.
        #expect(try index.fetch(ActivityQuery(afterDate: date(3), beforeDate: date(3))) == [])
    }

    @Test func afterAndBeforeAreExclusive() throws {
        let (index, models) = try sampleIndex()
        let r = try index.fetch(ActivityQuery(afterDate: date(3), sortOrder: .oldestFirst))
        #expect(r == Array(models[4...]))
        let r2 = try index.fetch(ActivityQuery(beforeDate: date(3), sortOrder: .oldestFirst))
        #expect(r2 == Array(models[..<3]))
        let r3 = try index.fetch(ActivityQuery(afterDate: date(2), beforeDate: date(6)))
        #expect(r3 == Array(models[3...5].reversed()))
    }

    @Test func defaultOrderIsNewestFirstAndOffsetSkips() throws {
        let (index, models) = try sampleIndex()
        #expect(try index.fetch(ActivityQuery()) == models.reversed())
        #expect(try index.fetch(ActivityQuery(limit: 2, offset: 3)) == [models[6], models[5]])
        #expect(try index.fetch(ActivityQuery(types: [.tummyTime], limit: 2, sortOrder: .oldestFirst, offset: 1))
                    == [models[3], models[5]])
    }

    @Test func tieBreakIsByIdBytesAndDeterministic() throws {
        let ids = [uuid(9), uuid(3), UUID(uuid: (3, 1, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0)), uuid(200), uuid(1)]
        let models = ids.map { ActivityModel(id: $0, startDate: date(1), type: .sleep) }
        var a = ActivityIndex()
        var b = ActivityIndex()
        for m in models { try a.insert(m) }
        for m in models.reversed() { try b.insert(m) }
        let expected = [uuid(1), uuid(3), ids[2], uuid(9), uuid(200)]
        #expect(try a.fetch(ActivityQuery(sortOrder: .oldestFirst)).map(\.id) == expected)
        #expect(try b.fetch(ActivityQuery(sortOrder: .oldestFirst)).map(\.id) == expected)
        #expect(try a.fetch(ActivityQuery(sortOrder: .newestFirst)).map(\.id) == expected.reversed())
        #expect(a.all(sortedBy: .newestFirst).map(\.id) == expected.reversed())
    }

    @Test func rangeQueryEdges() throws {
        let (index, models) = try sampleIndex()
        // Both ends inclusive.
        #expect(try index.fetch(startingIn: date(2)...date(4)) == Array(models[2...4]))
        #expect(try index.fetch(startingIn: date(2)...date(4), sortOrder: .newestFirst) == models[2...4].reversed())
        // models[i] spans [i, i + 0.5]: end == lower and start == upper count.
        #expect(try index.fetch(overlappingFrom: date(2.5), to: date(4)) == Array(models[2...4]))
        #expect(try index.fetch(overlappingFrom: date(2.6), to: date(3.9)) == [models[3]])
        #expect(try index.fetch(overlapping: date(2.5)...date(4), sortOrder: .newestFirst) == models[2...4].reversed())
        let e = #expect(throws: ActivityQueryError.self) { try index.fetch(overlappingFrom: date(4), to: date(2)) }
        #expect(e?.message.contains("\(date(2))") == true)
    }

    @Test func overlapIncludesActiveAndLongActivities() throws {
        var (index, models) = try sampleIndex()
        let active = ActivityModel(id: uuid(50), startDate: date(-1000), type: .sleep)
        let long = ActivityModel(id: uuid(51), startDate: date(-500), endDate: date(2.7), type: "feeding")
        try index.insert(active)
        try index.insert(long)
        #expect(try index.fetch(overlappingFrom: date(2.6), to: date(3.9)) == [active, long, models[3]])
        #expect(try index.fetch(overlappingFrom: date(2.6), to: date(3.9), types: [.sleep]) == [active])
        #expect(try index.fetch(overlappingFrom: date(2.6), to: date(3.9), sortOrder: .newestFirst, limit: 2) == [models[3], long])
        try index.end(id: active.id, at: date(-999))
        models = try index.fetch(overlappingFrom: date(2.6), to: date(3.9))
        #expect(models.map(\.id) == [long.id, uuid(4)])
    }

    @Test func mutationErrors() throws {
        var (index, models) = try sampleIndex()
        #expect(throws: ActivityIndexError.alreadyExists(models[0].id)) { try index.insert(models[0]) }
        let ghost = ActivityModel(id: uuid(99), startDate: date(0), type: .sleep)
        #expect(throws: ActivityIndexError.notFound(ghost.id)) { try index.update(ghost) }
        #expect(throws: ActivityIndexError.notFound(ghost.id)) { try index.end(id: ghost.id, at: date(1)) }
        #expect(throws: ActivityIndexError.endBeforeStart(id: models[2].id, start: date(2), end: date(1))) {
            try index.end(id: models[2].id, at: date(1))
        }
        #expect(index.remove(id: ghost.id) == nil)
        #expect(index.remove(id: models[2].id) == models[2])
        #expect(index.count == 9)
        #expect(index[id: models[2].id] == nil)
        #expect(index[id: models[3].id] == models[3])
        var moved = models[3]
        moved.startDate = date(100)
        moved.type = "bath"
        moved.endDate = nil
        try index.update(moved)
        #expect(try index.fetch(ActivityQuery(limit: 1)) == [moved])
        #expect(try index.fetch(ActivityQuery(types: [.tummyTime])).contains(moved) == false)
    }

    @Test func matchesAgreesWithFilters() throws {
        let (index, models) = try sampleIndex()
        let q = ActivityQuery(afterDate: date(1), beforeDate: date(8), types: [.sleep], sortOrder: .newestFirst,
                              cursor: ActivityCursor(after: models[6]))
        let expected = Set(try index.fetch(q))
        for m in models { #expect(index.matches(m, q) == expected.contains(m)) }
    }

    @Test func modelBasics() throws {
        let m = ActivityModel(startDate: date(0), type: .sleep)
        #expect(m.isActive && m.duration == nil)
        #expect(m.duration(asOf: date(2)) == 120)
        let e = ActivityModel(startDate: date(0), endDate: date(1), type: "bath")
        #expect(e.duration == 60 && e.duration(asOf: date(10)) == 60)
        let json = try JSONEncoder().encode(ActivityType.tummyTime)
        #expect(String(decoding: json, as: UTF8.self) == "\"Tummy time\"")
        #expect(try JSONDecoder().decode(ActivityModel.self, from: JSONEncoder().encode(e)) == e)
    }
}
