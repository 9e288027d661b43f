/// Query planning and execution over an ``EntityTable``: the one place that decides which
/// index serves a query and in what order results come. It runs on a copy of the table,
/// outside every lock, because it calls the query's predicate.
extension EntityTable {
    /// The conditions on one property, merged (AND).
    struct FieldFilter {
        var keyPath: AnyKeyPath
        var value: @Sendable (Entity) -> IndexValue
        /// Accepted values (equality and `IN`), sorted and unique; `nil`: any.
        var values: [IndexValue]?
        var lower: (value: IndexValue, inclusive: Bool)?
        var upper: (value: IndexValue, inclusive: Bool)?

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
    }

    /// How a query is answered.
    struct Plan {
        /// The declared index scanned, or `nil` for the insertion-order scan.
        var index: Int?
        /// Filters (by property) that the index's key ranges apply.
        var consumed: Set<AnyKeyPath> = []
        /// Equality prefixes, one key range each (several for `IN`).
        var prefixes: [[IndexValue]] = [[]]
        /// The range filter on the component after the prefix, if any.
        var range: FieldFilter?
        /// Whether the scan yields results in the query's order.
        var servesOrder = false
        /// Whether the index is scanned backwards.
        var reversed = false
    }

    /// Merges the query's conditions per property.
    static func filters(of query: EntityQuery<Entity>) -> [FieldFilter] {
        var filters: [FieldFilter] = []
        for condition in query.conditions {
            let keyPath: AnyKeyPath = condition.keyPath
            var filter = filters.first { $0.keyPath == keyPath } ?? FieldFilter(keyPath: keyPath, value: condition.value)
            switch condition.test {
            case .values(let values):
                let sorted = Array(Set(values)).sorted()
                filter.values = filter.values.map { old in sorted.filter(old.contains) } ?? sorted
            case .range(let lower, let upper):
                if let lower, filter.lower.map({ IndexValue.compare(lower.0, $0.value) > 0 || (IndexValue.compare(lower.0, $0.value) == 0 && !lower.inclusive) }) ?? true {
                    filter.lower = (lower.0, lower.inclusive)
                }
                if let upper, filter.upper.map({ IndexValue.compare(upper.0, $0.value) < 0 || (IndexValue.compare(upper.0, $0.value) == 0 && !upper.inclusive) }) ?? true {
                    filter.upper = (upper.0, upper.inclusive)
                }
            }
            if let index = filters.firstIndex(where: { $0.keyPath == keyPath }) { filters[index] = filter } else { filters.append(filter) }
        }
        // A range beside a value list narrows the list: then the property is an equality.
        for i in filters.indices where filters[i].values != nil && filters[i].hasRange {
            let filter = filters[i]
            filters[i].values = filter.values!.filter(filter.accepts)
            filters[i].lower = nil
            filters[i].upper = nil
        }
        return filters
    }

    /// Chooses the index that applies the most conditions, then serves the order.
    static func plan(
        filters: [FieldFilter], orderings: [EntityQuery<Entity>.Ordering], declared: [EntityIndex<Entity>]
    ) -> Plan {
        var best = Plan()
        best.servesOrder = orderings.isEmpty
        var bestScore = best.servesOrder ? 1 : 0
        for (number, index) in declared.enumerated() {
            let components = index.components
            var plan = Plan(index: number)
            var fixed = 0
            var combinations = 1
            while fixed < components.count, let filter = filters.first(where: { $0.keyPath == components[fixed].keyPath as AnyKeyPath }), let values = filter.values {
                combinations *= max(1, values.count)
                plan.consumed.insert(filter.keyPath)
                plan.prefixes = plan.prefixes.flatMap { prefix in values.map { prefix + [$0] } }
                fixed += 1
                if combinations > 4_096 { break }
            }
            var rangeComponent = false
            if fixed < components.count, let filter = filters.first(where: { $0.keyPath == components[fixed].keyPath as AnyKeyPath }), filter.values == nil, filter.hasRange {
                plan.range = filter
                plan.consumed.insert(filter.keyPath)
                rangeComponent = true
            }
            _ = rangeComponent
            // The order: the components after the fixed prefix, all in the index's directions
            // or all reversed, covering the rest of the key (so ties fall to the sequence).
            let single = plan.prefixes.count == 1
            let fixedPaths = Set(filters.filter { $0.values?.count == 1 }.map(\.keyPath))
            let terms = orderings.filter { !fixedPaths.contains($0.keyPath as AnyKeyPath) }
            if single {
                if terms.isEmpty {
                    if fixed == components.count {
                        plan.servesOrder = true
                        // Ties run by sequence in the last component's direction; insertion
                        // order wants it ascending.
                        plan.reversed = components[components.count - 1].descending
                    }
                } else if fixed + terms.count == components.count {
                    let flip = terms[0].descending != components[fixed].descending
                    plan.servesOrder = terms.enumerated().allSatisfy { j, term in
                        term.keyPath as AnyKeyPath == components[fixed + j].keyPath as AnyKeyPath
                            && (term.descending != components[fixed + j].descending) == flip
                    }
                    plan.reversed = flip
                }
            }
            let score = plan.consumed.count * 4 + (plan.servesOrder ? 1 : 0)
            if score > bestScore {
                best = plan
                bestScore = score
            }
        }
        return best
    }

    /// The checks every query passes before it runs, and its plan: the one place for ``run``
    /// and for observation, which checks once up front. Validity depends only on the query and
    /// the declared indexes, never on the rows, so a query valid once is valid after every commit.
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` for a negative offset or limit, or a cursor
    ///   from another query.
    static func checkedPlan(
        for query: EntityQuery<Entity>, defaultOrder: [EntityQuery<Entity>.Ordering], declared: [EntityIndex<Entity>]
    ) throws -> (filters: [FieldFilter], orderings: [EntityQuery<Entity>.Ordering], plan: Plan) {
        guard query.offset >= 0 else { throw RepositoryError.invalidQuery("offset \(query.offset) must not be negative") }
        if let limit = query.limit, limit < 0 { throw RepositoryError.invalidQuery("limit \(limit) must not be negative") }
        let filters = Self.filters(of: query)
        let orderings = query.orderings.isEmpty ? defaultOrder : query.orderings
        let plan = Self.plan(filters: filters, orderings: orderings, declared: declared)
        if let cursor = query.cursor, cursor.plan != planTag(plan) {
            throw RepositoryError.invalidQuery("the cursor belongs to another query (or the repository's indexes changed); start again without it")
        }
        return (filters, orderings, plan)
    }

    /// What a cursor records of the plan it was taken from.
    private static func planTag(_ plan: Plan) -> UInt64 { plan.index.map(UInt64.init) ?? UInt64.max }

    /// The rows matching `query`, in its order, and the cursor after the last one.
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` for a negative offset or a cursor from another query.
    func run(
        _ query: EntityQuery<Entity>, defaultOrder: [EntityQuery<Entity>.Ordering], declared: [EntityIndex<Entity>]
    ) throws -> (rows: [Row], next: QueryCursor?) {
        let (filters, orderings, plan) = try Self.checkedPlan(for: query, defaultOrder: defaultOrder, declared: declared)
        if filters.contains(where: { $0.values?.isEmpty == true }) { return ([], nil) }
        let residual = filters.filter { !plan.consumed.contains($0.keyPath) }
        let predicate = query.predicate
        let limit = query.effectiveLimit ?? Int.max
        func accepts(_ row: Row) -> Bool {
            for filter in residual where !filter.accepts(filter.value(row.entity)) { return false }
            return predicate?(row.entity) ?? true
        }
        let planTag = Self.planTag(plan)

        if plan.servesOrder, let number = plan.index {
            // One key range, scanned in order, stopping at the limit: O(log n + offset/1,024 + k).
            let index = indexes[number]
            var (lo, hi) = bounds(of: index, prefix: plan.prefixes[0], range: plan.range, component: plan.prefixes[0].count, declared: declared[number])
            if let cursor = query.cursor {
                let key = IndexKey(cursor.key)
                if plan.reversed {
                    hi = min(hi, index.entries.partitionPoint { index.compare($0.key, $0.sequence, key, cursor.sequence) < 0 })
                } else {
                    lo = max(lo, index.entries.partitionPoint { index.compare($0.key, $0.sequence, key, cursor.sequence) <= 0 })
                }
            }
            var skip = query.offset
            if residual.isEmpty && predicate == nil && skip > 0 {
                let p = index.entries.position(skip, from: lo, to: hi, reversed: plan.reversed)
                if plan.reversed { hi = p } else { lo = p }
                skip = 0
            }
            var out: [Row] = []
            index.entries.scan(from: lo, to: hi, reversed: plan.reversed) { entry in
                let row = rows[Int(entry.slot)]!
                guard accepts(row) else { return true }
                if skip > 0 { skip -= 1; return true }
                out.append(row)
                return out.count < limit
            }
            let next = out.last.map { QueryCursor(key: $0.keys[number].values, sequence: $0.sequence, plan: planTag) }
            return (out, next)
        }
        if plan.servesOrder {
            // Insertion order, no index applies a condition: a scan in sequence order.
            var lo = bySequence.startPosition
            if let cursor = query.cursor {
                lo = bySequence.partitionPoint { $0.sequence <= cursor.sequence }
            }
            var skip = query.offset
            if residual.isEmpty && predicate == nil && skip > 0 {
                lo = bySequence.position(skip, from: lo, to: bySequence.endPosition, reversed: false)
                skip = 0
            }
            var out: [Row] = []
            bySequence.scan(from: lo, to: bySequence.endPosition, reversed: false) { entry in
                let row = rows[Int(entry.slot)]!
                guard accepts(row) else { return true }
                if skip > 0 { skip -= 1; return true }
                out.append(row)
                return out.count < limit
            }
            return (out, out.last.map { QueryCursor(key: [], sequence: $0.sequence, plan: planTag) })
        }

        // The index (if any) narrows the candidates; the matches are then sorted.
        var matches: [Row] = []
        if let number = plan.index {
            let index = indexes[number]
            for prefix in plan.prefixes {
                let (lo, hi) = bounds(of: index, prefix: prefix, range: plan.range, component: prefix.count, declared: declared[number])
                index.entries.scan(from: lo, to: hi, reversed: false) { entry in
                    let row = rows[Int(entry.slot)]!
                    if accepts(row) { matches.append(row) }
                    return true
                }
            }
        } else {
            bySequence.scan(from: bySequence.startPosition, to: bySequence.endPosition, reversed: false) { entry in
                let row = rows[Int(entry.slot)]!
                if accepts(row) { matches.append(row) }
                return true
            }
        }
        var keyed = matches.map { row in (key: orderings.map { $0.value(row.entity) }, row: row) }
        let descending = orderings.map(\.descending)
        let lastDescending = descending.last ?? false
        func less(_ a: [IndexValue], _ aSequence: UInt64, _ b: [IndexValue], _ bSequence: UInt64) -> Bool {
            for i in 0..<a.count {
                let c = IndexValue.compare(a[i], b[i])
                if c != 0 { return descending[i] ? c > 0 : c < 0 }
            }
            return lastDescending ? aSequence > bSequence : aSequence < bSequence
        }
        keyed.sort { less($0.key, $0.row.sequence, $1.key, $1.row.sequence) }
        if let cursor = query.cursor {
            keyed.removeAll { !less(cursor.key, cursor.sequence, $0.key, $0.row.sequence) }
        }
        let start = min(query.offset, keyed.count)
        let end = limit >= keyed.count - start ? keyed.count : start + limit
        let page = keyed[start..<end]
        return (page.map(\.row), page.last.map { QueryCursor(key: $0.key, sequence: $0.row.sequence, plan: planTag) })
    }

    /// The positions `[lo, hi)` of the entries whose key starts with `prefix` and whose next
    /// component passes `range`.
    func bounds(
        of index: IndexStorage, prefix: [IndexValue], range: FieldFilter?, component: Int, declared: EntityIndex<Entity>
    ) -> (ChunkedPosition, ChunkedPosition) {
        let entries = index.entries
        var start: (value: IndexValue, inclusive: Bool)?
        var end: (value: IndexValue, inclusive: Bool)?
        if let range {
            // In a descending component the upper bound comes first.
            let descending = declared.components[component].descending
            start = descending ? range.upper : range.lower
            end = descending ? range.lower : range.upper
        }
        let lo: ChunkedPosition
        if let start {
            let bound = prefix + [start.value]
            lo = entries.partitionPoint { e in
                let c = index.compare(e.key, prefix: bound)
                return start.inclusive ? c < 0 : c <= 0
            }
        } else {
            lo = entries.partitionPoint { index.compare($0.key, prefix: prefix) < 0 }
        }
        let hi: ChunkedPosition
        if let end {
            let bound = prefix + [end.value]
            hi = entries.partitionPoint { e in
                let c = index.compare(e.key, prefix: bound)
                return end.inclusive ? c <= 0 : c < 0
            }
        } else {
            hi = entries.partitionPoint { index.compare($0.key, prefix: prefix) <= 0 }
        }
        return (lo, max(lo, hi))
    }

    /// How many rows match `query` (ignoring its limit, offset and cursor).
    /// - Complexity: O(log n + k / 1,024) when one index applies every condition; otherwise
    ///   that of ``run(_:defaultOrder:declared:)``.
    func count(_ query: EntityQuery<Entity>, declared: [EntityIndex<Entity>]) throws -> Int {
        let filters = Self.filters(of: query)
        if filters.contains(where: { $0.values?.isEmpty == true }) { return 0 }
        if filters.isEmpty && query.predicate == nil { return count }
        let plan = Self.plan(filters: filters, orderings: [], declared: declared)
        if let number = plan.index, plan.consumed.count == filters.count, query.predicate == nil {
            let index = indexes[number]
            return plan.prefixes.reduce(0) { total, prefix in
                let (lo, hi) = bounds(of: index, prefix: prefix, range: plan.range, component: prefix.count, declared: declared[number])
                return total + index.entries.distance(from: lo, to: hi)
            }
        }
        let all = EntityQuery<Entity>(conditions: query.conditions, predicate: query.predicate)
        return try run(all, defaultOrder: [], declared: declared).rows.count
    }

    /// A description of the plan for `query`, for ``EventSourcedRepository/explain(_:)``.
    func explain(_ query: EntityQuery<Entity>, defaultOrder: [EntityQuery<Entity>.Ordering], declared: [EntityIndex<Entity>]) -> String {
        let filters = Self.filters(of: query)
        let orderings = query.orderings.isEmpty ? defaultOrder : query.orderings
        let plan = Self.plan(filters: filters, orderings: orderings, declared: declared)
        var parts: [String] = []
        if let number = plan.index {
            parts.append("index \(declared[number].name)" + (plan.reversed ? " backwards" : ""))
            if plan.prefixes.count > 1 { parts.append("\(plan.prefixes.count) key ranges") }
        } else {
            parts.append(plan.servesOrder ? "insertion order" : "scan of every entity")
        }
        let residual = filters.filter { !plan.consumed.contains($0.keyPath) }
        if !residual.isEmpty { parts.append("then filter on " + residual.map { String(describing: $0.keyPath) }.joined(separator: ", ")) }
        if query.predicate != nil { parts.append("then the predicate") }
        if !plan.servesOrder { parts.append("then sort") }
        return parts.joined(separator: ", ")
    }
}
