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
        /// not its text, so that building a query formats nothing.
        var original: (any Sendable)?

        /// The bound as the caller wrote it (an optional's wrapped value).
        var text: String {
            guard let original else { return "nil" }
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
        mutating func merge(values new: [IndexValue]) {
            let sorted = new.count == 1 ? new : Array(Set(new)).sorted()
            values = values.map { old in sorted.filter(old.contains) } ?? sorted
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
        var reversedRange: RepositoryError? {
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

    /// How a query is answered.
    struct Plan: Sendable {
        /// The declared index scanned, or `nil` for the insertion-order scan.
        var index: Int?
        /// Per filter: whether the index's key ranges apply it.
        var consumed: [Bool]
        /// Equality prefixes, one key range each (several for `IN`).
        var prefixes: [[IndexValue]] = [[]]
        /// The range filter on the component after the prefix, if any (a filter number).
        var range: Int?
        /// Whether the scan yields results in the query's order.
        var servesOrder = false
        /// Whether the index is scanned backwards.
        var reversed = false

        /// The filters the scan must still check on each candidate.
        func residual(_ filters: [FieldFilter]) -> [Int] { filters.indices.filter { !consumed[$0] } }
    }

    /// Chooses the index that applies the most conditions, then serves the order.
    static func plan(filters: [FieldFilter], orderings: [IndexedField], fields declared: [[IndexedField]]) -> Plan {
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
                plan.prefixes = values.count == 1
                    ? plan.prefixes.map { $0 + values }
                    : plan.prefixes.flatMap { prefix in values.map { prefix + [$0] } }
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
            if plan.prefixes.count == 1 {
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
        return best
    }

    /// What a cursor records of the plan it was taken from.
    static func planTag(_ plan: Plan) -> UInt64 { plan.index.map(UInt64.init) ?? UInt64.max }
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
