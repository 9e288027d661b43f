import KernelPrimitives
import Synchronization

/// The plans of the query shapes run on one declaration of a table's indexes, so that a query run again with other
/// values (the next 7-day window, another account) pays neither the grouping of its
/// conditions nor the planner again: only binding its values (merging them per property,
/// the checks of its ranges, its key ranges' prefixes).
///
/// Why the plan can be kept: it depends only on the query's shape and the declared indexes,
/// never on the rows (`EntityTable/compile(_:defaultOrder:cached:)`), and the cache belongs to
/// the declaration: it is the table's (`EntityTable.planCache`), created with the table's
/// indexes, so a table built for other indexes (a rebuild) starts with an empty one and a
/// query that read the old table inserts its plan into the old table's cache, never the new
/// one's. The shape is what the planner reads:
/// - the properties of the conditions, in order (which conditions merge into one filter);
/// - after merging, how many values each filter accepts (`nil`: a range), since a single
///   value fixes its property and a list is one key range per value (so `IN` lists of other
///   lengths are other shapes);
/// - the overlap conditions' properties, and the ordering terms (the default order's, when
///   the query has none).
///
/// The values (equalities, `IN` lists, bounds, overlap ranges) are the call's: a hit takes
/// the plan's choices and rebinds its key-range prefixes and its overlap condition to them.
/// Limit, offset and cursor are not part of the shape: they are read when the query runs.
///
/// Key paths are compared by identity first (a key path literal is one object per call site,
/// so a query built again at the same place matches at once), then by `==`; an entry holds its
/// key paths, so an identity it matched on cannot be reused by another key path.
/// At most `capacity` shapes are kept; beyond that the one used least recently is replaced
/// (each entry keeps the stamp of its last use, set without the lock), and a shape already
/// kept is not kept twice (tasks that missed it at once all compute it; one keeps it).
/// `IN` lists of other lengths stay other shapes: the planner reads the product of the
/// lengths (key-range combinations) as well as each, so no coarser class is safe to key on.
/// The lock guards only the list: no closure of the caller runs under it.
/// Not generic: the query's parts it compares are concrete types (`QueryCondition`,
/// `IndexedField`), so a lookup runs no generic code.
final class QueryPlanCache: Sendable {
    /// One compiled shape. A class: handing an entry out of the list is one retain.
    final class Entry: Sendable {
        /// Per condition, its property.
        let conditionPaths: [any AnyKeyPath & Sendable]
        /// The overlap conditions' properties, in order.
        let overlapStarts: [any AnyKeyPath & Sendable]
        let overlapEnds: [any AnyKeyPath & Sendable]
        /// The ordering terms the query asked for (the default order's when it has none).
        let terms: [IndexedField]
        /// Per condition, the filter it merges into.
        let filterOf: [Int]
        /// Per filter, its property.
        let filterPaths: [any AnyKeyPath & Sendable]
        /// Per filter, the number of the first condition on its property (its value getter).
        let firstCondition: [Int]
        /// Per filter after merging, how many values it accepts; -1 for a range.
        let accepted: [Int]
        /// The numbers (in `terms`) of the ordering terms left after those a single value fixes.
        let orderingNumbers: [Int]
        /// The plan, with the values of the query that compiled it (rebound on a hit).
        let plan: IndexedRows.Plan
        /// Per filter of the plan's prefixes (`Plan.prefixFilters`), the values they were made of.
        let prefixValues: [[IndexValue]]
        /// When it was last used (the cache's clock): the least recent is replaced first.
        let lastUse = Atomic<UInt64>(0)

        init(conditions: [QueryCondition], overlaps: [IndexedRows.OverlapFilter], terms: [IndexedField], filterOf: [Int],
             filters: [IndexedRows.FieldFilter], firstCondition: [Int], orderingNumbers: [Int], plan: IndexedRows.Plan) {
            conditionPaths = conditions.map(\.keyPath)
            overlapStarts = overlaps.map(\.start)
            overlapEnds = overlaps.map(\.end)
            self.terms = terms
            self.filterOf = filterOf
            filterPaths = filters.map(\.keyPath)
            self.firstCondition = firstCondition
            accepted = filters.map { $0.values?.count ?? -1 }
            self.orderingNumbers = orderingNumbers
            self.plan = plan
            prefixValues = plan.prefixFilters.map { filters[$0].values! }
        }

        /// Whether a query with these conditions, overlap conditions and ordering terms groups
        /// its conditions as this entry's did and has the same overlaps and ordering.
        func matches(_ conditions: [QueryCondition], _ overlaps: [IndexedRows.OverlapFilter], _ queryTerms: [IndexedField]) -> Bool {
            guard conditions.count == conditionPaths.count, overlaps.count == overlapStarts.count,
                  queryTerms.count == terms.count else { return false }
            for i in conditions.indices where !QueryPlanCache.same(conditions[i].keyPath, conditionPaths[i]) { return false }
            for i in overlaps.indices {
                guard QueryPlanCache.same(overlaps[i].start, overlapStarts[i]), QueryPlanCache.same(overlaps[i].end, overlapEnds[i]) else { return false }
            }
            for i in queryTerms.indices {
                guard queryTerms[i].descending == terms[i].descending, QueryPlanCache.same(queryTerms[i].keyPath, terms[i].keyPath) else { return false }
            }
            return true
        }

        /// Whether `other` is the same shape: what `matches` and `accepts` compare.
        func sameShape(as other: Entry) -> Bool {
            guard conditionPaths.count == other.conditionPaths.count, overlapStarts.count == other.overlapStarts.count,
                  terms.count == other.terms.count, accepted == other.accepted else { return false }
            for i in conditionPaths.indices where !QueryPlanCache.same(conditionPaths[i], other.conditionPaths[i]) { return false }
            for i in overlapStarts.indices {
                guard QueryPlanCache.same(overlapStarts[i], other.overlapStarts[i]),
                      QueryPlanCache.same(overlapEnds[i], other.overlapEnds[i]) else { return false }
            }
            for i in terms.indices {
                guard terms[i].descending == other.terms[i].descending, QueryPlanCache.same(terms[i].keyPath, other.terms[i].keyPath) else { return false }
            }
            return true
        }

        /// Whether the merged `filters` accept as many values each as this entry's did.
        func accepts(_ filters: [IndexedRows.FieldFilter]) -> Bool {
            guard filters.count == accepted.count else { return false }
            for i in filters.indices where (filters[i].values?.count ?? -1) != accepted[i] { return false }
            return true
        }
    }

    /// The most shapes kept: a repository's code has a few query shapes, each run many times.
    static var capacity: Int { 32 }

    private let state = Locked(State())
    private let hits = Atomic<Int>(0)
    private let misses = Atomic<Int>(0)
    /// Counts uses (hits and insertions): the stamps of `Entry.lastUse`.
    private let clock = Atomic<UInt64>(0)

    private struct State: Sendable {
        var entries: [Entry] = []
    }

    init() {}

    /// The entries kept: a copy (one retain), searched outside the lock.
    var entries: [Entry] { state.withLock { $0.entries } }

    /// How many compilations found their plan here (`hits`) and computed it (`misses`): for tests.
    var statistics: (hits: Int, misses: Int) { (hits.load(ordering: .relaxed), misses.load(ordering: .relaxed)) }

    /// Counts a compilation that found its plan in `entry`, and stamps the entry as used.
    func recordHit(_ entry: Entry) {
        hits.add(1, ordering: .relaxed)
        entry.lastUse.store(clock.wrappingAdd(1, ordering: .relaxed).newValue, ordering: .relaxed)
    }

    /// Keeps a newly compiled shape, unless an equal shape is kept already (another task
    /// compiled it meanwhile); when the list is full, in place of the entry used least recently.
    func insert(_ entry: Entry) {
        misses.add(1, ordering: .relaxed)
        entry.lastUse.store(clock.wrappingAdd(1, ordering: .relaxed).newValue, ordering: .relaxed)
        state.withLock { state in
            if state.entries.contains(where: { $0.sameShape(as: entry) }) { return }
            if state.entries.count < Self.capacity {
                state.entries.append(entry)
                return
            }
            var oldest = 0
            for i in state.entries.indices.dropFirst()
            where state.entries[i].lastUse.load(ordering: .relaxed) < state.entries[oldest].lastUse.load(ordering: .relaxed) {
                oldest = i
            }
            state.entries[oldest] = entry
        }
    }

    /// Whether two key paths are the same property: one object (the common case, a literal at
    /// one call site), else equal.
    @inline(__always)
    static func same(_ a: any AnyKeyPath & Sendable, _ b: any AnyKeyPath & Sendable) -> Bool {
        let a = a as AnyKeyPath, b = b as AnyKeyPath
        return a === b || a == b
    }
}

