@testable import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// Comparisons on an optional property never match `nil` (as in SQL and `NSPredicate`), in the
/// index's key ranges and in the scan alike; a range whose end precedes its start is refused.
@Suite struct ComparisonsAndRangesTests {
    /// A forum thread: `lastRefresh` is nil until the thread is first refreshed.
    struct Topic: Identifiable, Codable, Sendable, Equatable {
        var id: UUID
        var forum: Int
        var lastRefresh: Date?
    }

    static let day0 = Date(timeIntervalSinceReferenceDate: 760_000_000)
    static func day(_ n: Int) -> Date { day0.addingTimeInterval(Double(n) * 86_400) }

    /// Every way the property can be indexed, and none: each must answer the same.
    static let layouts: [(name: String, indexes: [EntityIndex<Topic>])] = [
        ("no index", []),
        ("ascending", [.on(\.lastRefresh)]),
        ("descending", [.on(.descending(\.lastRefresh))]),
        ("after an equality", [.on(\.forum, \.lastRefresh)]),
    ]

    static func topics() -> [Topic] {
        var rng = SplitMix64(seed: 25)
        return (0..<120).map { _ in
            Topic(id: UUID(), forum: Int(rng.next() % 3),
                  lastRefresh: rng.next() % 3 == 0 ? nil : day(Int(rng.next() % 10)))
        }
    }

    static func open(_ indexes: [EntityIndex<Topic>], _ topics: [Topic]) async throws -> EventSourcedRepository<Topic> {
        let store = try EventStore(log: InMemoryLog())
        let repository = try EventSourcedRepository<Topic>(store: store, typeName: "Topic", indexes: indexes)
        try await repository.addAll(topics)
        return repository
    }

    /// A query and what it must return, by brute force: `nil` passes no comparison.
    struct Case {
        var name: String
        var query: EntityQuery<Topic>
        var keep: (Date) -> Bool
        var forum: Int?
    }

    static func cases() -> [Case] {
        let (d3, d6) = (day(3), day(6))
        var cases = [
            Case(name: "lessThan", query: EntityQuery().where(\.lastRefresh, lessThan: d3), keep: { $0 < d3 }),
            Case(name: "lessThan orEqual", query: EntityQuery().where(\.lastRefresh, lessThan: d3, orEqual: true), keep: { $0 <= d3 }),
            Case(name: "greaterThan", query: EntityQuery().where(\.lastRefresh, greaterThan: d3), keep: { $0 > d3 }),
            Case(name: "greaterThan orEqual", query: EntityQuery().where(\.lastRefresh, greaterThan: d3, orEqual: true), keep: { $0 >= d3 }),
            Case(name: "from through", query: EntityQuery().where(\.lastRefresh, from: d3, through: d6), keep: { $0 >= d3 && $0 <= d6 }),
            Case(name: "from upTo", query: EntityQuery().where(\.lastRefresh, from: d3, upTo: d6), keep: { $0 >= d3 && $0 < d6 }),
            Case(name: "two conditions", query: EntityQuery().where(\.lastRefresh, greaterThan: d3).where(\.lastRefresh, lessThan: d6, orEqual: true),
                 keep: { $0 > d3 && $0 <= d6 }),
            // A nil bound: below every value, and still never matching nil.
            Case(name: "lessThan nil", query: EntityQuery().where(\.lastRefresh, lessThan: nil as Date?, orEqual: true), keep: { _ in false }),
            Case(name: "greaterThan nil", query: EntityQuery().where(\.lastRefresh, greaterThan: nil as Date?, orEqual: true), keep: { _ in true }),
        ]
        cases += cases.map { c in
            Case(name: c.name + " in forum 1", query: c.query.where(\.forum, equals: 1), keep: c.keep, forum: 1)
        }
        return cases
    }

    /// The expected ids in insertion order: the matches of `c`, never a nil date.
    static func expected(_ c: Case, _ topics: [Topic]) -> [Topic] {
        topics.filter { t in
            guard let date = t.lastRefresh else { return false }
            return c.keep(date) && (c.forum.map { t.forum == $0 } ?? true)
        }
    }

    /// Sorted by date in the given direction; ties by insertion, in the direction of the term.
    static func sorted(_ topics: [Topic], all: [Topic], descending: Bool) -> [Topic] {
        let sequence = Dictionary(uniqueKeysWithValues: all.enumerated().map { ($1.id, $0) })
        return topics.sorted { a, b in
            let c = IndexValue.compare(a.lastRefresh.indexValue, b.lastRefresh.indexValue)
            if c != 0 { return descending ? c > 0 : c < 0 }
            return descending ? sequence[a.id]! > sequence[b.id]! : sequence[a.id]! < sequence[b.id]!
        }
    }

    @Test(arguments: 0..<layouts.count)
    func comparisonsNeverMatchNil(layout: Int) async throws {
        let (name, indexes) = Self.layouts[layout]
        let topics = Self.topics()
        #expect(topics.contains { $0.lastRefresh == nil } && topics.contains { $0.lastRefresh != nil })
        let repository = try await Self.open(indexes, topics)
        for c in Self.cases() {
            let expected = Self.expected(c, topics)
            let label = "\(name), \(c.name): \(repository.explain(c.query))"
            #expect(try repository.fetch(c.query).map(\.id) == expected.map(\.id), "\(label)")
            #expect(try repository.count(c.query) == expected.count, "count, \(label)")
            for descending in [false, true] {
                let ordered = c.query.orderBy(\.lastRefresh, ascending: !descending)
                let want = Self.sorted(expected, all: topics, descending: descending).map(\.id)
                #expect(try repository.fetch(ordered).map(\.id) == want, "ordered (descending: \(descending)), \(label)")
                // Paging by cursor and by offset walks the same answer.
                for size in [1, 7] {
                    var walked: [UUID] = []
                    var page = try repository.fetchPage(ordered.limit(size))
                    walked += page.entities.map(\.id)
                    while let next = page.nextCursor {
                        page = try repository.fetchPage(ordered.limit(size).after(next))
                        walked += page.entities.map(\.id)
                    }
                    #expect(walked == want, "cursor pages of \(size), descending: \(descending), \(label)")
                    #expect(try repository.fetch(ordered.offset(size).limit(size)).map(\.id) == Array(want.dropFirst(size).prefix(size)),
                            "offset, \(label)")
                }
            }
        }
        // Equality with nil still finds them, alone and beside a comparison (which excludes them).
        #expect(try repository.fetch(EntityQuery().where(\.lastRefresh, equals: nil)).map(\.id)
                == topics.filter { $0.lastRefresh == nil }.map(\.id), "\(name)")
        #expect(try repository.fetch(EntityQuery().where(\.lastRefresh, isIn: [nil, Self.day(2)])).map(\.id)
                == topics.filter { $0.lastRefresh == nil || $0.lastRefresh == Self.day(2) }.map(\.id), "\(name)")
        #expect(try repository.fetch(EntityQuery().where(\.lastRefresh, equals: nil).where(\.lastRefresh, lessThan: Self.day(5))).isEmpty, "\(name)")
    }

    /// The forum's retention one-liner keeps the threads never refreshed (and answers the same
    /// through `deleteAll(matching:)` and `updateAll(matching:)`).
    @Test(arguments: 0..<layouts.count)
    func retentionKeepsEntitiesWithoutADate(layout: Int) async throws {
        let (name, indexes) = Self.layouts[layout]
        let topics = Self.topics()
        let repository = try await Self.open(indexes, topics)
        let cutoff = Self.day(4)
        let doomed = topics.filter { $0.lastRefresh.map { $0 < cutoff } ?? false }
        let touched = try await repository.updateAll(matching: EntityQuery().where(\.lastRefresh, lessThan: cutoff)) { $0.forum += 10 }
        #expect(touched == doomed.count, "\(name)")
        #expect(try await repository.deleteAll(where: \.lastRefresh, before: cutoff) == doomed.count, "\(name)")
        let left = Set(repository.fetchAll().map(\.id))
        #expect(left.symmetricDifference(Set(topics.map(\.id)).subtracting(doomed.map(\.id))).isEmpty, "\(name)")
        #expect(topics.filter { $0.lastRefresh == nil }.allSatisfy { left.contains($0.id) }, "never-refreshed threads kept, \(name)")
    }

    /// Bounds that cross are refused with the property and both bounds, whether one condition
    /// or two make them, for fetch, count, observe and batch deletes (which then delete nothing);
    /// equal bounds with an exclusive end are an empty range, not an error.
    @Test(arguments: 0..<layouts.count)
    func aReversedRangeIsRefused(layout: Int) async throws {
        let (name, indexes) = Self.layouts[layout]
        let topics = Self.topics()
        let repository = try await Self.open(indexes, topics)
        let (early, late) = (Self.day(2), Self.day(7))
        let message = "invalid query: the range on \\Topic.lastRefresh is reversed: its end \(early) precedes its start \(late)"
        let reversed: [EntityQuery<Topic>] = [
            EntityQuery().where(\.lastRefresh, from: late, through: early),
            EntityQuery().where(\.lastRefresh, from: late, upTo: early),
            EntityQuery().where(\.lastRefresh, greaterThan: late, orEqual: true).where(\.lastRefresh, lessThan: early, orEqual: true),
            EntityQuery().where(\.lastRefresh, lessThan: early).where(\.lastRefresh, greaterThan: late).where(\.forum, equals: 1),
        ]
        for query in reversed {
            let error = #expect(throws: RepositoryError.self, "\(name)") { try repository.fetch(query) }
            #expect(error?.description.hasPrefix(message) == true, "\(name): \(String(describing: error))")
            #expect(throws: RepositoryError.self, "\(name)") { try repository.count(query) }
            #expect(throws: RepositoryError.self, "\(name)") { try repository.observe(query) }
            await #expect(throws: RepositoryError.self, "\(name)") { try await repository.deleteAll(matching: query) }
        }
        #expect(repository.fetchAll().count == topics.count, "nothing deleted, \(name)")
        // Equal bounds: inclusive matches that day, exclusive is empty (as `a..<a`).
        #expect(try repository.fetch(EntityQuery().where(\.lastRefresh, from: early, through: early)).map(\.id)
                == topics.filter { $0.lastRefresh == early }.map(\.id), "\(name)")
        #expect(try repository.fetch(EntityQuery().where(\.lastRefresh, from: early, upTo: early)).isEmpty, "\(name)")
        #expect(try repository.fetch(EntityQuery().where(\.lastRefresh, greaterThan: early).where(\.lastRefresh, lessThan: early)).isEmpty, "\(name)")
        // `in:` with a non-optional property goes the same way.
        #expect(try repository.fetch(EntityQuery().where(\.forum, in: 1...1)).map(\.id) == topics.filter { $0.forum == 1 }.map(\.id))
        #expect(throws: RepositoryError.invalidQuery("the range on \\Topic.forum is reversed: its end 0 precedes its start 2")) {
            try repository.fetch(EntityQuery().where(\.forum, from: 2, through: 0))
        }
    }

    /// Numbers of different cases compare by their exact values, so the order is total and
    /// transitive: through `Double`, 2^53 + 1 and 2^53 both equalled the double 2^53 while
    /// 2^53 + 1 > 2^53 (and Int64.max equalled 2^63, which it is below).
    @Test func mixedNumbersCompareExactlyAndTransitively() {
        let p53 = Int64(1) << 53
        #expect(IndexValue.compare(.int(p53 + 1), .double(Double(p53))) == 1)
        #expect(IndexValue.compare(.double(Double(p53)), .int(p53 + 1)) == -1)
        #expect(IndexValue.compare(.int(p53), .double(Double(p53))) == 0)
        #expect(IndexValue.compare(.int(.max), .double(0x1p63)) == -1)
        #expect(IndexValue.compare(.int(.min), .double(-0x1p63)) == 0)
        #expect(IndexValue.compare(.uint(.max), .double(0x1p64)) == -1)
        #expect(IndexValue.compare(.int(2), .double(2.5)) == -1)
        #expect(IndexValue.compare(.int(-2), .double(-2.5)) == 1)
        #expect(IndexValue.compare(.uint(0), .double(-0.0)) == 0)
        let values: [IndexValue] = [
            .int(p53), .int(p53 + 1), .int(p53 - 1), .int(-p53 - 1), .int(.max), .int(.min), .int(0), .int(-1),
            .uint(UInt64(p53) + 1), .uint(.max), .uint(UInt64(Int64.max) + 1), .uint(0),
            .double(Double(p53)), .double(Double(p53) + 2), .double(-Double(p53)), .double(0x1p63), .double(-0x1p63),
            .double(0x1p64), .double(0.5), .double(-0.5), .double(-0.0), .double(.infinity), .double(-.infinity),
        ]
        for a in values {
            for b in values {
                #expect(IndexValue.compare(a, b) == -IndexValue.compare(b, a), "\(a) vs \(b)")
                for c in values where IndexValue.compare(a, b) <= 0 && IndexValue.compare(b, c) <= 0 {
                    #expect(IndexValue.compare(a, c) <= 0, "\(a) ≤ \(b) ≤ \(c)")
                    if IndexValue.compare(a, b) < 0 || IndexValue.compare(b, c) < 0 {
                        #expect(IndexValue.compare(a, c) < 0, "\(a) ≤ \(b) ≤ \(c), one strictly")
                    }
                }
            }
        }
    }
}
