@_spi(Indexing) @testable import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// Interval indexes (``EntityIndex/interval(start:end:)``) and overlap queries
/// (``EntityQuery/where(_:_:overlapping:)``), checked against a naive model: every query the
/// generator makes (random ranges, point ranges, bounds on existing starts and ends, prefixes by
/// equality and `IN`, both orders, limits, offsets, cursor paging, counts, residual predicates)
/// returns exactly what filtering all entities by `start ≤ b && (end == nil || end ≥ a)` and
/// sorting gives, through inserts, updates that lengthen, shorten, end and reopen intervals,
/// and deletes; after a snapshot restore; in the past (time travel); and in a repository
/// without an interval index (the documented scan), which must agree.
@Suite struct IntervalIndexTests {
    struct Span: Identifiable, Codable, Sendable, Equatable {
        var id: UUID
        var kind: Int
        var start: Date
        var end: Date?
        var tick: Int
        var until: Int?
        var weight: Int
    }

    static let indexed: [EntityIndex<Span>] = [
        .interval(on: \.kind, start: \.start, end: \.end),
        .interval(start: \.tick, end: \.until),
        .on(\.weight),
    ]
    /// The same entities without an interval index: overlap queries scan.
    static let plain: [EntityIndex<Span>] = [.on(\.kind, \.start)]

    static let day0 = Date(timeIntervalSinceReferenceDate: 700_000_000)

    static func open(_ dir: URL) throws -> (EventStore, EventSourcedRepository<Span>, EventSourcedRepository<Span>) {
        let log = try SegmentedLog.open(at: dir, configuration: .init(segmentSize: 256 << 10))
        let store = try EventStore(log: log, directory: dir, snapshotPolicy: .default)
        return (store,
                try EventSourcedRepository<Span>(store: store, typeName: "Span", indexes: indexed),
                try EventSourcedRepository<Span>(store: store, typeName: "PlainSpan", indexes: plain))
    }

    /// The brute-force twin (EventKernelTestSupport).
    typealias Model = QueryModel<Span>

    /// A duration: mostly short, sometimes open (`nil`), zero, negative, or very long (what
    /// the histogram must bound, and forget again once corrected).
    static func randomDuration(_ rng: inout SplitMix64) -> Double? {
        switch rng.next() % 100 {
        case 0..<20: nil
        case 20..<25: 0
        case 25..<28: -Double(rng.next() % 50 + 1)
        case 28..<33: Double(rng.next() % 20_000 + 1_000)
        case 33..<40: Double(rng.next() % 200) + 0.5
        default: Double(rng.next() % 200)
        }
    }

    static func randomSpan(_ id: UUID, _ rng: inout SplitMix64) -> Span {
        let start = Double(rng.next() % 10_000)
        let tick = Int(rng.next() % 10_000) - 2_000
        return Span(id: id, kind: Int(rng.next() % 4), start: day0 + start, end: randomDuration(&rng).map { day0 + start + $0 },
                    tick: tick, until: randomDuration(&rng).map { tick + Int($0) }, weight: Int(rng.next() % 7))
    }

    /// Changes one interval the way an app does: lengthens, shortens, ends or reopens it.
    static func edit(_ span: Span, _ rng: inout SplitMix64) -> Span {
        var span = span
        switch rng.next() % 6 {
        case 0: span.end = span.start + Double(rng.next() % 40_000 + 5_000)        // lengthen a lot
        case 1: span.end = span.start + Double(rng.next() % 10)                    // shorten
        case 2: span.end = span.end == nil ? span.start + Double(rng.next() % 300) : nil   // end or reopen
        case 3: span.until = span.until == nil ? span.tick + Int(rng.next() % 300) : nil
        case 4: span.start = span.start + Double(rng.next() % 3_000) - 1_500        // move the start
        default: span.kind = Int(rng.next() % 4); span.until = span.tick + Int(rng.next() % 30_000)
        }
        return span
    }

    /// A random overlap query and its naive answer (EventKernelTestSupport).
    typealias Case = QueryCase<Span>

    /// A range's bounds: random, on an existing start or end (the inclusive edges), points.
    static func randomBounds(_ model: Model, _ rng: inout SplitMix64, _ point: (Span) -> [Double]) -> (Double, Double) {
        var a = Double(rng.next() % 14_000) - 2_000
        if rng.next() % 3 == 0, !model.ids.isEmpty, let span = model.items[model.ids[Int(rng.next() % UInt64(model.ids.count))]]?.item {
            let edges = point(span)
            a = edges[Int(rng.next() % UInt64(edges.count))]
        }
        let width: Double = switch rng.next() % 5 {
        case 0: 0
        case 1: Double(rng.next() % 10)
        case 2: Double(rng.next() % 300)
        case 3: Double(rng.next() % 3_000)
        default: Double(rng.next() % 20_000)
        }
        return (a, a + width)
    }

    static func randomCase(_ model: Model, _ rng: inout SplitMix64) -> Case {
        var query = EntityQuery<Span>()
        var filters: [(Span) -> Bool] = []
        var order: [(key: (Span) -> IndexValue, descending: Bool)] = []
        let onTicks = rng.next() % 3 == 0
        if onTicks || rng.next() % 8 == 0 {
            let (a, b) = randomBounds(model, &rng) { [Double($0.tick)] + ($0.until.map { [Double($0)] } ?? []) }
            let (x, y) = (Int(a), Int(b))
            query = query.where(\.tick, \.until, overlapping: x...y)
            filters.append { $0.tick <= y && ($0.until.map { $0 >= x } ?? true) }
        }
        if !onTicks && rng.next() % 10 == 0 {
            // A plain start range: the interval index serves it as an ordinary index on (kind, start).
            let (a, b) = randomBounds(model, &rng) { [$0.start.timeIntervalSince(day0)] }
            let (x, y) = (day0 + a, day0 + b)
            query = query.where(\.start, in: x...y)
            filters.append { $0.start >= x && $0.start <= y }
        } else if !onTicks {
            let (a, b) = randomBounds(model, &rng) { [$0.start.timeIntervalSince(day0)] + ($0.end.map { [$0.timeIntervalSince(day0)] } ?? []) }
            let (x, y) = (day0 + a, day0 + b)
            query = rng.next() % 2 == 0
                ? query.where(\.start, \.end, overlapping: x...y)
                : query.where(\.start, \.end, overlappingFrom: x, through: y)
            filters.append { $0.start <= y && ($0.end.map { $0 >= x } ?? true) }
        }
        switch rng.next() % 4 {
        case 0: break
        case 1:
            let kind = Int(rng.next() % 4)
            query = query.where(\.kind, equals: kind)
            filters.append { $0.kind == kind }
        case 2:
            let kinds = Set((0..<Int(rng.next() % 4)).map { _ in Int(rng.next() % 4) })
            query = query.where(\.kind, isIn: kinds)
            filters.append { kinds.contains($0.kind) }
        default:
            let kinds: Set<Int> = [0, 1, 2, 3]
            query = query.where(\.kind, isIn: kinds)
            filters.append { kinds.contains($0.kind) }
        }
        if rng.next() % 5 == 0 {
            query = query.where { $0.weight % 2 == 0 }
            filters.append { $0.weight % 2 == 0 }
        }
        switch rng.next() % 5 {
        case 0: break
        case 1, 2:
            let descending = rng.next() % 2 == 0
            query = onTicks ? query.orderBy(\.tick, ascending: !descending) : query.orderBy(\.start, ascending: !descending)
            order.append((onTicks ? { $0.tick.indexValue } : { $0.start.indexValue }, descending))
        case 3:
            query = query.orderBy(\.weight, ascending: false)
            order.append(({ $0.weight.indexValue }, true))
        default:
            query = query.orderBy(\.start, ascending: false)
            order.append(({ $0.start.indexValue }, true))
        }
        let limit: Int? = switch rng.next() % 4 {
        case 0: nil
        case 1: 0
        default: Int(rng.next() % 30) + 1
        }
        let offset = rng.next() % 4 == 0 ? Int(rng.next() % 10) : 0
        query = query.limit(limit).offset(offset)
        let all = filters
        return Case(query: query, filter: { span in all.allSatisfy { $0(span) } }, order: order,
                    limit: limit == 0 ? nil : limit, offset: offset)
    }

    /// Every row's stored keys and interval ends are what its entity gives now: what updates
    /// that change a key, and those that leave it, must keep (an end is kept apart from the
    /// keys, in ``IndexedRows/ends``).
    static func expectKeysMatchEntities(_ table: EntityTable<Span>) {
        let rows = table.rows
        var wrong: [String] = []
        for slot in rows.slotsByID.slots {
            let id = rows.heads[Int(slot)].id
            guard let span = table.bySlot[Int(slot)] else { wrong.append("\(id): no entity"); continue }
            for (number, index) in indexed.enumerated() {
                let stored = rows.key(slot, number), expected = index.key(of: span)
                if stored.values != expected.values { wrong.append("\(id): index \(number) keeps \(stored.values), not \(expected.values)") }
            }
            for interval in rows.intervals {
                let expected = indexed[interval.number].intervalEnd!.value(span)
                if rows.intervalEnd(slot, interval) != expected {
                    wrong.append("\(id): interval \(interval.number) ends at \(rows.intervalEnd(slot, interval)), not \(expected)")
                }
            }
        }
        #expect(wrong == [])
    }

    /// Runs random cases on both repositories (and their counts and cursor paging on the indexed one).
    func check(_ indexed: EventSourcedRepository<Span>, _ plain: EventSourcedRepository<Span>, _ model: Model,
               _ rng: inout SplitMix64, queries: Int) throws {
        #if EVENTKERNEL_INTERNAL_CHECKS
        #expect(indexed.projection.state.rows.intervalInvariantViolations() == [])
        #expect(indexed.projection.state.rows.keyInvariantViolations() == [])
        #endif
        Self.expectKeysMatchEntities(indexed.projection.state)
        for _ in 0..<queries {
            let c = Self.randomCase(model, &rng)
            let expected = c.expected(model).map(\.id)
            #expect(try indexed.fetch(c.query).map(\.id) == expected, "\(indexed.explain(c.query))")
            #expect(try plain.fetch(c.query).map(\.id) == expected, "\(plain.explain(c.query))")
            var unpaged = c
            unpaged.limit = nil
            unpaged.offset = 0
            let all = unpaged.expected(model).map(\.id)
            #expect(try indexed.count(c.query) == all.count, "count: \(indexed.explain(c.query))")
            #expect(try plain.count(c.query) == all.count, "count: \(plain.explain(c.query))")
            // Cursor paging walks the whole result exactly once (in at most about 25 pages:
            // a page of a sorted plan sorts every match again).
            let pageSize = Int(rng.next() % 40) + 1 + all.count / 25
            var walked: [UUID] = []
            var page = try indexed.fetchPage(c.query.offset(0).limit(pageSize))
            walked += page.entities.map(\.id)
            var pages = 0
            while let next = page.nextCursor, pages < 10_000 {
                page = try indexed.fetchPage(c.query.offset(0).limit(pageSize).after(next))
                walked += page.entities.map(\.id)
                pages += 1
            }
            #expect(walked == all, "paging: \(indexed.explain(c.query))")
        }
    }

    @Test func overlapQueriesMatchTheNaiveModelLiveAfterRestoreAndInThePast() async throws {
        let dir = TemporaryDirectory("ek-interval")
        var rng = SplitMix64(seed: 26)
        var model = Model()
        var ids: [UUID] = []
        var past: (position: UInt64, model: Model)?
        do {
            let (store, indexed, plain) = try Self.open(dir.url)
            for round in 0..<12 {
                var batch: [Span] = []
                for _ in 0..<250 {
                    let id = UUID(); ids.append(id)
                    batch.append(Self.randomSpan(id, &rng))
                }
                try await indexed.addAll(batch)
                try await plain.addAll(batch)
                batch.forEach { model.save($0) }
                for _ in 0..<80 {
                    let id = ids[Int(rng.next() % UInt64(ids.count))]
                    switch rng.next() % 6 {
                    case 0:
                        let deleted = try await indexed.delete(id: id)
                        #expect(try await plain.delete(id: id) == deleted)
                        if deleted { model.items[id] = nil }
                    case 1:
                        let span = Self.randomSpan(id, &rng)
                        try await indexed.save(span)
                        try await plain.save(span)
                        model.save(span)
                    default:
                        guard let current = model.items[id]?.item else { continue }
                        let span = Self.edit(current, &rng)
                        try await indexed.save(span)
                        try await plain.save(span)
                        model.save(span)
                    }
                }
                try check(indexed, plain, model, &rng, queries: round == 11 ? 120 : 25)
                if round == 5 { past = (store.nextPosition - 1, model) }
            }
            try await store.close()   // writes the snapshots
        }
        let (store, indexed, plain) = try Self.open(dir.url)
        #expect(indexed.projection.eventsApplied == 0, "restored from the snapshot, not replayed")
        try check(indexed, plain, model, &rng, queries: 150)
        // The restored index keeps folding: edits, reopenings and deletes after the restore.
        for _ in 0..<300 {
            let id = ids[Int(rng.next() % UInt64(ids.count))]
            if rng.next() % 4 == 0 {
                let deleted = try await indexed.delete(id: id)
                _ = try await plain.delete(id: id)
                if deleted { model.items[id] = nil }
            } else {
                let span = model.items[id].map { Self.edit($0.item, &rng) } ?? Self.randomSpan(id, &rng)
                try await indexed.save(span)
                try await plain.save(span)
                model.save(span)
            }
        }
        try check(indexed, plain, model, &rng, queries: 100)
        // Time travel: the table as it was after round 5 answers as the model did then.
        let (position, then) = try #require(past)
        let pastState = try store.state(of: { indexed.projection.makeFresh() }, throughPosition: position)
        let table = pastState.read { $0 }
        #expect(table.count == then.items.count)
        for _ in 0..<60 {
            let c = Self.randomCase(then, &rng)
            let (slots, _) = try table.run(c.query, defaultOrder: .init())
            #expect(table.entities(at: slots).map(\.id) == c.expected(then).map(\.id))
        }
        try await store.close()
    }

    /// The edges of `start ≤ b && (end == nil || end ≥ a)`: both inclusive, running intervals
    /// reach forever, one starting after the range never overlaps it, point ranges work.
    @Test func theOverlapRuleIsInclusiveAndOpenIntervalsRunForever() async throws {
        let store = try EventStore(log: InMemoryLog())
        let spans = try EventSourcedRepository<Span>(store: store, typeName: "Span", indexes: Self.indexed)
        func span(_ start: Double, _ end: Double?, kind: Int = 0) -> Span {
            Span(id: UUID(), kind: kind, start: Self.day0 + start, end: end.map { Self.day0 + $0 }, tick: 0, until: 0, weight: 0)
        }
        let endsAtA = span(0, 100), startsAtB = span(200, 300), runningLongAgo = span(-1_000_000, nil)
        let before = span(0, 99.5), after = span(200.5, nil), inside = span(150, 160), around = span(50, 250)
        let runningLater = span(201, nil), otherKind = span(120, 130, kind: 1)
        try await spans.addAll([endsAtA, startsAtB, runningLongAgo, before, after, inside, around, runningLater, otherKind])
        let window = EntityQuery<Span>().where(\.kind, equals: 0).where(\.start, \.end, overlapping: (Self.day0 + 100)...(Self.day0 + 200))
        #expect(try spans.fetch(window.orderBy(\.start)).map(\.id) == [runningLongAgo, endsAtA, around, inside, startsAtB].map(\.id))
        #expect(try spans.fetch(window.orderBy(\.start, ascending: false)).map(\.id) == [startsAtB, inside, around, endsAtA, runningLongAgo].map(\.id))
        #expect(try spans.fetch(window.orderBy(\.start, ascending: false).limit(2).offset(1)).map(\.id) == [inside, around].map(\.id))
        #expect(try spans.count(window) == 5)
        let point = EntityQuery<Span>().where(\.start, \.end, overlapping: (Self.day0 + 100)...(Self.day0 + 100)).orderBy(\.start)
        #expect(try spans.fetch(point).map(\.id) == [runningLongAgo, endsAtA, around].map(\.id))
        // Ending the long-running one takes it out of a later window; reopening brings it back.
        var ended = runningLongAgo
        ended.end = Self.day0 - 10
        try await spans.save(ended)
        #expect(try spans.fetch(window.orderBy(\.start)).map(\.id) == [endsAtA, around, inside, startsAtB].map(\.id))
        try await spans.save(runningLongAgo)
        #expect(try spans.fetch(window.orderBy(\.start)).first?.id == runningLongAgo.id)
    }

    /// Integers beyond 2^53 (durations computed in doubles round) and at the ends of `Int`:
    /// the scan's lower bound is clamped and widened, never past a match.
    @Test func extremeIntegerIntervalsAreFound() async throws {
        let store = try EventStore(log: InMemoryLog())
        let spans = try EventSourcedRepository<Span>(store: store, typeName: "Span", indexes: Self.indexed)
        func span(_ tick: Int, _ until: Int?) -> Span {
            Span(id: UUID(), kind: 0, start: Self.day0, end: nil, tick: tick, until: until, weight: 0)
        }
        let big = 1 << 60
        let nearMax = span(.max - 5, .max), nearMin = span(.min, .min + 10), huge = span(big, big + 1)
        let everything = span(.min, .max), openHigh = span(.max, nil)
        try await spans.addAll([nearMax, nearMin, huge, openHigh])
        func overlapping(_ a: Int, _ b: Int) throws -> [UUID] {
            try spans.fetch(EntityQuery().where(\.tick, \.until, overlappingFrom: a, through: b).orderBy(\.tick)).map(\.id)
        }
        // Bounded scans (the longest duration is 10): clamped at both ends of `Int`.
        #expect(try overlapping(.max, .max) == [nearMax, openHigh].map(\.id))
        #expect(try overlapping(.min, .min) == [nearMin].map(\.id))
        #expect(try overlapping(big + 1, big + 1) == [huge].map(\.id))
        #expect(try overlapping(big + 2, big + 2) == [])
        #expect(try overlapping(.min + 11, big - 1) == [])
        // A duration beyond 2^62 leaves the scan unbounded, and still right.
        try await spans.add(everything)
        #expect(try overlapping(.max, .max) == [everything, nearMax, openHigh].map(\.id))
        #expect(try overlapping(.min, .min) == [nearMin, everything].map(\.id))
        #expect(try overlapping(big + 1, big + 1) == [everything, huge].map(\.id))
        #expect(try overlapping(.min + 11, big - 1) == [everything].map(\.id))
    }

    /// Interval ends are kept as 9-byte encodings per row (dates, integers, `nil`), live and
    /// after a snapshot restore, and read back as the values stored: what `keys(of:)`, the
    /// histogram and an update's comparison of the old end see.
    @Test func intervalEndsAreKeptNarrowAndReadBackExactly() async throws {
        let dir = TemporaryDirectory()
        let ended = Span(id: UUID(), kind: 1, start: Self.day0 + 0.25, end: Self.day0 + 90.5, tick: .min, until: .max, weight: 0)
        let running = Span(id: UUID(), kind: 2, start: Self.day0, end: nil, tick: -7, until: nil, weight: 0)
        func expectEnds(_ spans: EventSourcedRepository<Span>) throws {
            let rows = spans.projection.state.rows
            #expect(rows.ends.isNarrow)
            #expect(rows.ends.count == 2 * rows.intervals.count)
            let endedKeys = try #require(rows.keys(of: .uuid(ended.id)))
            #expect(endedKeys.suffix(2).map(\.first) == [.double((Self.day0 + 90.5).timeIntervalSinceReferenceDate), .int(.max)])
            let runningKeys = try #require(rows.keys(of: .uuid(running.id)))
            #expect(runningKeys.suffix(2).map(\.first) == [.null, .null])
            #expect(try spans.fetch(EntityQuery().where(\.start, \.end, overlapping: (Self.day0 + 90.5)...(Self.day0 + 100)).orderBy(\.start)).map(\.id)
                    == [running.id, ended.id])
        }
        do {
            let (store, spans, _) = try Self.open(dir.url)
            try await spans.addAll([ended, running])
            try expectEnds(spans)
            try await store.close()   // writes the snapshots
        }
        let (store, spans, _) = try Self.open(dir.url)
        #expect(spans.projection.eventsApplied == 0, "restored from the snapshot, not replayed")
        try expectEnds(spans)
        // An update that keeps the end moves nothing; one that ends the running span counts it.
        var endedNow = running
        endedNow.end = Self.day0 + 1
        try await spans.save(endedNow)
        #expect(spans.projection.state.rows.keys(of: .uuid(running.id))?.suffix(2).first?.first == .double((Self.day0 + 1).timeIntervalSinceReferenceDate))
        #expect(try spans.fetch(EntityQuery().where(\.start, \.end, overlapping: (Self.day0 + 2)...(Self.day0 + 3)).orderBy(\.start)).map(\.id) == [ended.id])
        try await store.close()
    }

    /// The histogram bounds the longest ended duration, and shrinks when the long interval is
    /// corrected or removed, so one mistaken entry does not widen every later scan.
    @Test func theDurationBoundShrinksWhenALongIntervalIsCorrectedOrRemoved() async throws {
        let store = try EventStore(log: InMemoryLog())
        let spans = try EventSourcedRepository<Span>(store: store, typeName: "Span", indexes: Self.indexed)
        func bound() -> Double? { spans.projection.state.rows.intervals[0].longestDurationBound }
        let short = (0..<20).map { i in
            Span(id: UUID(), kind: 0, start: Self.day0 + Double(i * 100), end: Self.day0 + Double(i * 100 + 60), tick: 0, until: nil, weight: 0)
        }
        try await spans.addAll(short)
        #expect(bound() == 64)
        var mistake = Span(id: UUID(), kind: 0, start: Self.day0, end: Self.day0 + 30 * 86_400, tick: 0, until: nil, weight: 0)
        try await spans.add(mistake)
        #expect(bound()! >= 30 * 86_400)
        mistake.end = Self.day0 + 10
        try await spans.save(mistake)
        #expect(bound() == 64, "corrected")
        mistake.end = Self.day0 + 30 * 86_400
        try await spans.save(mistake)
        #expect(bound()! >= 30 * 86_400)
        _ = try await spans.delete(id: mistake.id)
        #expect(bound() == 64, "removed")
        // Open intervals are not in the histogram: they are found through the open entries.
        try await spans.add(Span(id: UUID(), kind: 0, start: Self.day0 - 1e9, end: nil, tick: 0, until: nil, weight: 0))
        #expect(bound() == 64)
        #expect(spans.projection.state.rows.intervals[0].open.count == 1)
        // Durations that are not finite numbers leave the scan unbounded rather than wrong.
        #expect(IntervalIndex.bucket(start: .double(0), end: .double(.infinity)) == 63)
        #expect(IntervalIndex.bucket(start: .double(0), end: .double(.nan)) == 63)
        #expect(IntervalIndex.bucket(start: .string("a"), end: .string("b")) == 63)
        #expect(IntervalIndex.bucket(start: .int(5), end: .int(3)) == 0)
        #expect(IntervalIndex.bucket(start: .int(0), end: .int(64)) == 6)
        #expect(IntervalIndex.bucket(start: .int(0), end: .int(65)) == 7)
    }

    #if EVENTKERNEL_INTERNAL_CHECKS
    /// The invariant checks see a broken histogram and a broken open set.
    @Test func invariantChecksSeeABrokenIntervalIndex() async throws {
        let store = try EventStore(log: InMemoryLog())
        let spans = try EventSourcedRepository<Span>(store: store, typeName: "Span", indexes: Self.indexed)
        try await spans.addAll([
            Span(id: UUID(), kind: 0, start: Self.day0, end: Self.day0 + 60, tick: 0, until: nil, weight: 0),
            Span(id: UUID(), kind: 0, start: Self.day0 + 5, end: nil, tick: 1, until: 3, weight: 0),
        ])
        let rows = spans.projection.state.rows
        #expect(rows.intervalInvariantViolations() == [])
        var miscounted = rows
        miscounted.intervals[0].buckets[6] -= 1
        miscounted.intervals[0].buckets[7] += 1
        #expect(miscounted.intervalInvariantViolations().contains { $0.contains("interval index 0: the histogram") })
        var lostOpen = rows
        lostOpen.intervals[1].open = lostOpen.intervals[0].open
        #expect(lostOpen.intervalInvariantViolations().contains { $0.contains("interval index 1: the open entries are not the rows without an end (1 entries, 1 rows, 1 of them missing)") })
        #expect(rows.keyInvariantViolations() == [])
        var movedKey = rows
        let moved = IndexKey(.int(9), .double(0))
        movedKey.columns[0].set(0, moved, normalized: NormalizedKey(moved, descending: movedKey.indexes[0].descending))
        #expect(movedKey.keyInvariantViolations() == ["index 0: 1 entries do not encode their row's key, sequence or a live slot"])
        var lostEnd = rows
        lostEnd.ends.restore((0..<Int32(rows.ends.count - 1)).map { rows.ends[$0] })
        #expect(lostEnd.keyInvariantViolations() == ["3 interval ends for 2 slots of 2"])
        var lostEntry = rows
        lostEntry.indexes[2].remove(at: lostEntry.indexes[2].startPosition)
        #expect(lostEntry.keyInvariantViolations() == ["index 2: 1 entries for 2 rows"])
    }
    #endif

    @Test func plansNameTheIntervalIndexOrTheScan() throws {
        let store = try EventStore(log: InMemoryLog())
        let spans = try EventSourcedRepository<Span>(store: store, typeName: "Span", indexes: Self.indexed)
        let plain = try EventSourcedRepository<Span>(store: store, typeName: "PlainSpan", indexes: Self.plain)
        let range = Self.day0...(Self.day0 + 10)
        let name = "interval(\\Span.kind, \\Span.start ... \\Span.end)"
        let overlap = "overlapping (\\Span.start, \\Span.end): starts from the range's start less the longest duration, then open-ended entries starting earlier"
        #expect(spans.explain(EntityQuery().where(\.kind, equals: 1).where(\.start, \.end, overlapping: range).orderBy(\.start))
                == "interval index \(name) \(overlap)")
        #expect(spans.explain(EntityQuery().where(\.kind, equals: 1).where(\.start, \.end, overlapping: range).orderBy(\.start, ascending: false))
                == "interval index \(name) backwards \(overlap)")
        // Several key ranges: merged when the order is by start, else collected and sorted.
        #expect(spans.explain(EntityQuery().where(\.kind, isIn: [1, 2]).where(\.start, \.end, overlapping: range).orderBy(\.start))
                == "interval index \(name) \(overlap), 2 key ranges merged by start")
        #expect(spans.explain(EntityQuery().where(\.kind, isIn: [1, 2]).where(\.start, \.end, overlapping: range))
                == "interval index \(name) \(overlap), 2 key ranges, then sort")
        #expect(spans.explain(EntityQuery().where(\.tick, \.until, overlapping: 1...5).orderBy(\.tick).where { $0.weight > 1 })
                == "interval index interval(\\Span.tick ... \\Span.until) overlapping (\\Span.tick, \\Span.until): starts from the range's start less the longest duration, then open-ended entries starting earlier, then the predicate")
        // Without the prefix fixed the interval index cannot apply the condition: a scan.
        #expect(spans.explain(EntityQuery().where(\.start, \.end, overlapping: range))
                == "insertion order, then filter on overlapping (\\Span.start, \\Span.end)")
        #expect(plain.explain(EntityQuery().where(\.kind, equals: 1).where(\.start, \.end, overlapping: range).orderBy(\.start))
                == "index (\\Span.kind, \\Span.start), then filter on overlapping (\\Span.start, \\Span.end)")
        // It serves start ranges and orders like an ordinary index on (kind, start).
        #expect(spans.explain(EntityQuery().where(\.kind, equals: 1).where(\.start, in: range).orderBy(\.start, ascending: false))
                == "index \(name) backwards")
    }

    @Test func invalidOverlapRangesAreRefusedWithTheirBounds() async throws {
        let store = try EventStore(log: InMemoryLog())
        let spans = try EventSourcedRepository<Span>(store: store, typeName: "Span", indexes: Self.indexed)
        let plain = try EventSourcedRepository<Span>(store: store, typeName: "PlainSpan", indexes: Self.plain)
        try await spans.add(Span(id: UUID(), kind: 0, start: Self.day0, end: nil, tick: 0, until: nil, weight: 0))
        let reversed = EntityQuery<Span>().where(\.kind, equals: 0).where(\.start, \.end, overlappingFrom: Self.day0 + 60, through: Self.day0)
        let nan = EntityQuery<Span>().where(\.start, \.end, overlappingFrom: Date(timeIntervalSinceReferenceDate: .nan), through: Self.day0)
        let reversedTicks = EntityQuery<Span>().where(\.tick, \.until, overlappingFrom: 5, through: 4)
        for repository in [spans, plain] {
            for query in [reversed, reversedTicks] {
                #expect { try repository.fetch(query) } throws: { error in
                    guard case RepositoryError.invalidQuery(let message) = error else { return false }
                    return message.contains("is reversed") && message.contains("\\Span.")
                }
                #expect(throws: RepositoryError.self) { try repository.count(query) }
                #expect(throws: RepositoryError.self) { try repository.fetchPage(query) }
            }
            #expect { try repository.fetch(nan) } throws: { error in
                guard case RepositoryError.invalidQuery(let message) = error else { return false }
                return message.contains("NaN") && message.contains("\\Span.start")
            }
            #expect(repository.explain(reversed) == "invalid query")
            await #expect(throws: RepositoryError.self) { _ = try await repository.deleteAll(matching: reversed) }
        }
        #expect(try spans.count(EntityQuery().where(\.tick, \.until, overlappingFrom: -5, through: -5)) == 0, "a point range is valid")
        #expect(try spans.count(EntityQuery().where(\.tick, \.until, overlappingFrom: 0, through: 0)) == 1)
    }
}
