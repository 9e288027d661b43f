/// Query planning over `IndexedRows`: the one place that decides which index serves a query
/// and in what order results come (the scans that follow the plan are in
/// `IndexedRows+Scan.swift`). Concrete code: the entity-typed parts (the residual predicate,
/// values of unindexed properties) reach it as closures over slots.
extension IndexedRows {
    /// One end of a range condition.
    struct RangeBound: Sendable {
        var value: IndexValue
        var inclusive: Bool
        /// The bound as the caller passed it, described only for a message (`text`): a date
        /// reads `2025-06-30 00:00:00 +0000`, not the index value's seconds. Kept as the value,
        /// not its text, so that building a query formats nothing; in a box, because filters
        /// are copied while a query is planned and an existential's copy goes through its value
        /// witnesses (perf: copies of filters were a tenth of a 50-row query), a box's is a retain.
        private var original: Original?

        private final class Original: Sendable {
            let value: any Sendable
            init(_ value: any Sendable) { self.value = value }
        }

        init(value: IndexValue, inclusive: Bool, original: (any Sendable)?) {
            self.value = value
            self.inclusive = inclusive
            self.original = original.map(Original.init)
        }

        /// The bound as the caller wrote it (an optional's wrapped value).
        var text: String {
            guard let original = original?.value else { return "nil" }
            if let optional = original as? any OptionalDescribing { return optional.wrappedDescription }
            return String(describing: original)
        }

        /// The lower bound every comparison carries: above `nil`. In SQL (`NULL < x` is
        /// unknown) and `NSPredicate`, `nil` never passes a comparison; here it sorts before
        /// every value, so without this bound a `lessThan` would match every `nil` (and the
        /// forum's retention one-liner would delete every thread never refreshed).
        static let aboveNil = RangeBound(value: .null, inclusive: false, original: nil)
    }

    /// The conditions on one property, merged (AND).
    struct FieldFilter: Sendable {
        var keyPath: any AnyKeyPath & Sendable
        /// Accepted values (equality and `IN`), sorted and unique; `nil`: any.
        var values: [IndexValue]?
        var lower: RangeBound?
        var upper: RangeBound?

        var hasRange: Bool { lower != nil || upper != nil }

        func accepts(_ v: IndexValue) -> Bool {
            if let values, !values.contains(v) { return false }
            if let lower {
                let c = IndexValue.compare(v, lower.value)
                if c < 0 || (c == 0 && !lower.inclusive) { return false }
            }
            if let upper {
                let c = IndexValue.compare(v, upper.value)
                if c > 0 || (c == 0 && !upper.inclusive) { return false }
            }
            return true
        }

        /// Narrows this filter by one more condition.
        /// - Throws: ``RepositoryError/invalidQuery(_:)`` when a value is NaN: it equals
        ///   nothing by `==` (a scan would match no row) while an index key files every NaN as
        ///   one value (a key range would match NaN rows), and it has no place in a sorted list
        ///   (`IndexValue.compare` calls it greater both ways, so repeats would survive).
        mutating func merge(values new: [IndexValue]) throws {
            for value in new {
                if case .double(let x) = value, x.isNaN {
                    throw RepositoryError.invalidQuery(
                        "the equality or IN condition on \(String(describing: keyPath)) has a value that is not a number (NaN)")
                }
            }
            let new = Self.sortedUnique(new)
            values = values.map { Self.intersection($0, new) } ?? new
        }

        /// The values in both `a` and `b` (each sorted and unique): one pass over both, where
        /// a search of `a` for each value of `b` was O(|a| × |b|).
        static func intersection(_ a: [IndexValue], _ b: [IndexValue]) -> [IndexValue] {
            var out: [IndexValue] = []
            var i = 0, j = 0
            while i < a.count && j < b.count {
                let c = IndexValue.compare(a[i], b[j])
                if c == 0 { out.append(b[j]); i += 1; j += 1 } else if c < 0 { i += 1 } else { j += 1 }
            }
            return out
        }

        /// `values` sorted, without repeats (equal by ``IndexValue/compare(_:_:)``, as `==`
        /// and so a `Set` has them): a sort and one pass, where a `Set` hashed every value of
        /// every `IN` list of every query.
        static func sortedUnique(_ values: [IndexValue]) -> [IndexValue] {
            guard values.count > 1 else { return values }
            var sorted = values.sorted()
            var kept = 1
            for i in 1..<sorted.count where IndexValue.compare(sorted[i], sorted[kept - 1]) != 0 {
                sorted.swapAt(kept, i)
                kept += 1
            }
            sorted.removeLast(sorted.count - kept)
            return sorted
        }

        /// Narrows this filter by one more comparison or range: the one place that says a
        /// comparison never matches `nil` (``RangeBound/aboveNil``), for the index's key
        /// ranges and the scan's checks alike.
        mutating func merge(lower new: RangeBound?, upper newUpper: RangeBound?) {
            func tighten(_ bound: RangeBound) {
                if lower.map({ IndexValue.compare(bound.value, $0.value) > 0 || (IndexValue.compare(bound.value, $0.value) == 0 && !bound.inclusive) }) ?? true {
                    lower = bound
                }
            }
            tighten(.aboveNil)
            if let new { tighten(new) }
            if let newUpper, upper.map({ IndexValue.compare(newUpper.value, $0.value) < 0 || (IndexValue.compare(newUpper.value, $0.value) == 0 && !newUpper.inclusive) }) ?? true {
                upper = newUpper
            }
        }

        /// The error for bounds that cross (the end precedes the start): a caller's mistake,
        /// most often swapped arguments, reported rather than answered with `[]`. Equal bounds
        /// with an exclusive end (`from: a, upTo: a`, or `greaterThan: a` with `lessThan: a`)
        /// are an empty range, as Swift's `a..<a` is, and answer `[]`.
        ///
        /// A NaN bound is refused too: NaN compares with nothing, so the scan's checks would
        /// match no row while the index, which files NaN above every number, would answer with
        /// the NaN rows (or all rows above a bound): two answers to one query.
        var invalidRange: RepositoryError? {
            for bound in [lower, upper] {
                if let bound, case .double(let x) = bound.value, x.isNaN {
                    return RepositoryError.invalidQuery(
                        "the range on \(String(describing: keyPath)) has a bound that is not a number (NaN)")
                }
            }
            guard let lower, let upper, IndexValue.compare(lower.value, upper.value) > 0 else { return nil }
            return RepositoryError.invalidQuery(
                "the range on \(String(describing: keyPath)) is reversed: its end \(upper.text) precedes its start \(lower.text)")
        }

        /// A range beside a value list narrows the list: then the property is an equality.
        mutating func settle() {
            guard values != nil, hasRange else { return }
            values = values!.filter(accepts)
            lower = nil
            upper = nil
        }
    }

    /// An overlap condition (``EntityQuery/where(_:_:overlapping:)``): `start ≤ upper` and
    /// (`end` is `nil` or `end ≥ lower`), both bounds inclusive, as Activities' `overlapping`.
    struct OverlapFilter: Sendable {
        var start: any AnyKeyPath & Sendable
        var end: any AnyKeyPath & Sendable
        var lower: RangeBound
        var upper: RangeBound

        /// The one statement of the rule, for the scan's checks (the overlap plan applies the
        /// same rule through its key ranges and ``IndexedRows/overlapContinues(_:_:_:)``).
        func accepts(start s: IndexValue, end e: IndexValue) -> Bool {
            guard IndexValue.compare(s, upper.value) <= 0 else { return false }
            if case .null = e { return true }
            return IndexValue.compare(e, lower.value) >= 0
        }

        /// The condition's name, for messages and `explain`: `(\Activity.startDate, \Activity.endDate)`.
        var name: String { "(\(String(describing: start)), \(String(describing: end)))" }

        /// Why the condition cannot run, if it cannot: a NaN bound (it overlaps nothing and
        /// everything at once) or a reversed range (most often swapped arguments). A point
        /// range (`a...a`) is valid.
        var invalid: RepositoryError? {
            for bound in [lower, upper] {
                if case .double(let x) = bound.value, x.isNaN {
                    return .invalidQuery("the overlapping range on \(name) has a bound that is not a number (NaN)")
                }
            }
            guard IndexValue.compare(lower.value, upper.value) > 0 else { return nil }
            return .invalidQuery("the overlapping range on \(name) is reversed: its end \(upper.text) precedes its start \(lower.text)")
        }
    }

    /// How an overlap plan answers its condition.
    struct OverlapScan: Sendable {
        /// The interval index (in ``IndexedRows/intervals``).
        var interval: Int
        /// The overlap condition it applies (its number in the query's).
        var overlap: Int
        var filter: OverlapFilter
    }

    /// How a query is answered.
    struct Plan: Sendable {
        /// The overlap condition an interval index applies, if any: then ``index`` is that
        /// index's, ``range`` is `nil`, and the scan is the one in `IndexedRows+Overlap.swift`.
        var overlapScan: OverlapScan?
        /// The declared index scanned, or `nil` for the insertion-order scan.
        var index: Int?
        /// Per filter: whether the index's key ranges apply it.
        var consumed: [Bool]
        /// Equality prefixes, one key range each (several for `IN`).
        var prefixes: [[IndexValue]] = [[]]
        /// The filters whose values make up `prefixes`, in the index's order: what a plan
        /// kept for the query's shape (`QueryPlanCache`) rebinds to another query's values.
        var prefixFilters: [Int] = []
        /// The range filter on the component after the prefix, if any (a filter number).
        var range: Int?
        /// Whether the scan yields results in the query's order.
        var servesOrder = false
        /// Whether the index is scanned backwards.
        var reversed = false

        /// `prefixes` extended by one more fixed component accepting `values`: one key range
        /// per combination, in the order of the values (sorted).
        static func extend(_ prefixes: [[IndexValue]], _ values: [IndexValue]) -> [[IndexValue]] {
            values.count == 1 ? prefixes.map { $0 + values } : prefixes.flatMap { prefix in values.map { prefix + [$0] } }
        }

        /// This plan with its key ranges' prefixes and its overlap condition taken from
        /// `filters` and `overlaps`: those of a query of the same shape (`QueryPlanCache`).
        /// - Parameter keptValues: Per prefix filter, the values this plan's prefixes were made
        ///   of: when `filters` accept the same (the same `IN` list again), the prefixes stay.
        func rebound(to filters: [FieldFilter], _ overlaps: [OverlapFilter], keptValues: [[IndexValue]]) -> Plan {
            var plan = self
            if !prefixFilters.isEmpty && !prefixFilters.indices.allSatisfy({ filters[prefixFilters[$0]].values! == keptValues[$0] }) {
                plan.prefixes = prefixFilters.reduce([[]]) { Self.extend($0, filters[$1].values!) }
            }
            if let scan = overlapScan { plan.overlapScan!.filter = overlaps[scan.overlap] }
            return plan
        }

        /// The filters the scan must still check on each candidate.
        func residual(_ filters: [FieldFilter]) -> [Int] { filters.indices.filter { !consumed[$0] } }

        /// The overlap conditions the scan must still check on each candidate.
        func residual(_ overlaps: [OverlapFilter]) -> [Int] { overlaps.indices.filter { $0 != overlapScan?.overlap } }
    }

    /// Chooses the index that applies the most conditions, then serves the order; an interval
    /// index applying an overlap condition counts that as one more condition applied.
    static func plan(
        filters: [FieldFilter], overlaps: [OverlapFilter] = [], orderings: [IndexedField], fields declared: [[IndexedField]],
        intervals: [IntervalIndex] = []
    ) -> Plan {
        func filterNumber(_ keyPath: AnyKeyPath) -> Int? { filters.firstIndex { $0.keyPath == keyPath } }
        var best = Plan(consumed: Array(repeating: false, count: filters.count))
        best.servesOrder = orderings.isEmpty
        var bestScore = best.servesOrder ? 1 : 0
        // Single-value equalities fix their property: an ordering term on one is moot.
        let terms = orderings.filter { term in
            guard let f = filterNumber(term.keyPath) else { return true }
            return filters[f].values?.count != 1
        }
        for (number, components) in declared.enumerated() {
            var plan = Plan(index: number, consumed: Array(repeating: false, count: filters.count))
            var consumedCount = 0
            var fixed = 0
            var combinations = 1
            while fixed < components.count, let f = filterNumber(components[fixed].keyPath), let values = filters[f].values {
                combinations *= max(1, values.count)
                plan.consumed[f] = true
                consumedCount += 1
                plan.prefixes = Plan.extend(plan.prefixes, values)
                plan.prefixFilters.append(f)
                fixed += 1
                if combinations > 4_096 { break }
            }
            if fixed < components.count, let f = filterNumber(components[fixed].keyPath), filters[f].values == nil, filters[f].hasRange {
                plan.range = f
                plan.consumed[f] = true
                consumedCount += 1
            }
            // The order: the components after the fixed prefix, all in the index's directions
            // or all reversed, covering the rest of the key (so ties fall to the sequence).
            // Several key ranges (`IN`) serve it too, merged (``maxMergedRanges``).
            if plan.prefixes.count <= maxMergedRanges {
                if terms.isEmpty {
                    if fixed == components.count {
                        plan.servesOrder = true
                        // Ties run by sequence in the last component's direction; insertion
                        // order wants it ascending.
                        plan.reversed = components[components.count - 1].descending
                    }
                } else if fixed + terms.count == components.count {
                    let flip = terms[0].descending != components[fixed].descending
                    plan.servesOrder = terms.indices.allSatisfy { j in
                        terms[j].keyPath == components[fixed + j].keyPath
                            && (terms[j].descending != components[fixed + j].descending) == flip
                    }
                    plan.reversed = flip
                }
            }
            let score = consumedCount * 4 + (plan.servesOrder ? 1 : 0)
            if score > bestScore {
                best = plan
                bestScore = score
            }
        }
        if !overlaps.isEmpty && !intervals.isEmpty,
           let (plan, score) = overlapPlan(filters: filters, overlaps: overlaps, terms: terms, fields: declared, intervals: intervals),
           score > bestScore {
            best = plan
        }
        return best
    }

    /// The best plan through an interval index applying an overlap condition: its prefix
    /// components each fixed by an equality or `IN` (one key range per combination), and its
    /// order served when the terms are its start, either way (several key ranges are merged).
    private static func overlapPlan(
        filters: [FieldFilter], overlaps: [OverlapFilter], terms: [IndexedField], fields declared: [[IndexedField]],
        intervals: [IntervalIndex]
    ) -> (Plan, Int)? {
        var best: (Plan, Int)?
        for (j, interval) in intervals.enumerated() {
            let components = declared[interval.number]
            let start = components[components.count - 1].keyPath
            guard let o = overlaps.firstIndex(where: { $0.start == start && $0.end == interval.end }) else { continue }
            var plan = Plan(index: interval.number, consumed: Array(repeating: false, count: filters.count))
            plan.overlapScan = OverlapScan(interval: j, overlap: o, filter: overlaps[o])
            var consumedCount = 1
            var combinations = 1
            var covered = true
            for component in components.dropLast() {
                guard let f = filters.firstIndex(where: { $0.keyPath == component.keyPath }), let values = filters[f].values else {
                    covered = false
                    break
                }
                combinations *= max(1, values.count)
                plan.consumed[f] = true
                consumedCount += 1
                plan.prefixes = Plan.extend(plan.prefixes, values)
                plan.prefixFilters.append(f)
            }
            guard covered, combinations <= 4_096 else { continue }
            // Several key ranges (`IN`) serve it too: their first matches are merged by start.
            if terms.count == 1, terms[0].keyPath == start {
                plan.servesOrder = true
                plan.reversed = terms[0].descending
            }
            let score = consumedCount * 4 + (plan.servesOrder ? 1 : 0)
            if score > best?.1 ?? 0 { best = (plan, score) }
        }
        return best
    }

    /// The most key ranges whose first matches are merged to serve an order: each range is a
    /// search and gives up to `offset + limit` entries, so beyond this many a sort of every
    /// match is as cheap.
    static var maxMergedRanges: Int { 64 }

    /// What a cursor records of the plan it was taken from: the declaration of the indexes
    /// (`declaration`: an index number means another index under another declaration), the
    /// index, and whether the plan serves the order (its cursors hold the index's whole key)
    /// or sorts the matches (theirs hold the ordering's values), so that a cursor is never read
    /// with another key's shape.
    func planTag(_ plan: Plan) -> UInt64 {
        declaration << 33 | (plan.index.map(UInt64.init) ?? UInt64(UInt32.max)) << 1 | (plan.servesOrder ? 0 : 1)
    }
}

/// An optional's description without `Optional(...)`, for ``IndexedRows/RangeBound/text``.
protocol OptionalDescribing { var wrappedDescription: String { get } }

extension Optional: OptionalDescribing {
    var wrappedDescription: String {
        guard let wrapped = self else { return "nil" }
        if let optional = wrapped as? any OptionalDescribing { return optional.wrappedDescription }
        return String(describing: wrapped)
    }
}
