/// Queries over an ``EntityTable``: turns an ``EntityQuery`` into `IndexedRows`' filters and
/// plan, and the slots it finds into entities. It runs on a copy of the table, outside every
/// lock, because it calls the query's predicate.
extension EntityTable {
    /// A checked query, ready to run: its merged filters, its ordering and its plan.
    struct CompiledQuery {
        var filters: [IndexedRows.FieldFilter]
        /// Per filter, the number of the query's first condition on its property: whose
        /// getter reads the property's value, for the filters no index applies.
        var firstCondition: [Int]
        /// The overlap conditions (their getters are the query's, by the same numbers).
        var overlaps: [IndexedRows.OverlapFilter]
        /// The ordering terms applied (the query's, else the default order's) and their numbers there.
        var orderings: [IndexedField]
        var orderingNumbers: [Int]
        var plan: IndexedRows.Plan
    }

    /// The checks every query passes before it runs, and its plan: the one place for ``run``,
    /// `count(_:cached:)`, `explain` and observation, which checks once up front. Validity and
    /// the plan depend only on the query and the declared indexes, never on the rows, so a
    /// query valid once is valid after every commit, and the table's `planCache` keeps the plan
    /// of each shape (`QueryPlanCache`): a query of a shape seen before binds its values to that plan.
    /// - Parameters:
    ///   - query: The query.
    ///   - defaultOrder: The ordering when the query has none.
    ///   - cached: Whether to use the table's plans by shape (`planCache`: its declaration's,
    ///     so a plan is never run against another declaration's indexes); `false` plans afresh.
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` for a negative offset or limit, a range
    ///   whose end precedes its start (after merging every condition on its property), an
    ///   overlapping range that is reversed or has a NaN bound, an equality or `IN` value that
    ///   is NaN, or a cursor from another query (or another declaration of the indexes).
    func compile(
        _ query: EntityQuery<Entity>, defaultOrder: EntityQuery<Entity>.Orderings, cached: Bool = false
    ) throws -> CompiledQuery {
        guard query.offset >= 0 else { throw RepositoryError.invalidQuery("offset \(query.offset) must not be negative") }
        if let limit = query.limit, limit < 0 { throw RepositoryError.invalidQuery("limit \(limit) must not be negative") }
        let terms = query.orderings.terms.isEmpty ? defaultOrder.terms : query.orderings.terms
        return try Self.compile(query.conditions, query.overlaps, terms: terms, cursor: query.cursor, rows: rows,
                                  cache: cached ? planCache : nil)
    }

    /// `compile(_:defaultOrder:cached:)` past its generic part: concrete code, compiled once
    /// (generic code asks the runtime for metadata at every step).
    private static func compile(
        _ conditions: [QueryCondition], _ overlaps: [IndexedRows.OverlapFilter], terms: [IndexedField], cursor: QueryCursor?,
        rows: IndexedRows, cache: QueryPlanCache?
    ) throws -> CompiledQuery {
        let entries = cache?.entries ?? []
        // The conditions grouped by property: as a kept shape grouped them, else by comparing
        // their key paths.
        var filters: [IndexedRows.FieldFilter] = []
        var filterOf: [Int] = []
        var firstCondition: [Int] = []
        var shape: QueryPlanCache.Entry?
        var firstMatch = entries.endIndex
        for (i, entry) in entries.enumerated() where entry.matches(conditions, overlaps, terms) {
            shape = entry
            firstMatch = i
            break
        }
        if let shape {
            filters.reserveCapacity(shape.filterPaths.count)
            for path in shape.filterPaths { filters.append(IndexedRows.FieldFilter(keyPath: path)) }
            filterOf = shape.filterOf
            firstCondition = shape.firstCondition
        } else {
            filterOf.reserveCapacity(conditions.count)
            for (i, condition) in conditions.enumerated() {
                if let existing = filters.firstIndex(where: { $0.keyPath == condition.keyPath }) {
                    filterOf.append(existing)
                } else {
                    filterOf.append(filters.count)
                    filters.append(IndexedRows.FieldFilter(keyPath: condition.keyPath))
                    firstCondition.append(i)
                }
            }
        }
        for i in conditions.indices {
            switch conditions[i].test {
            case .values(let accepted): try filters[filterOf[i]].merge(values: accepted)
            case .range(let lower, let upper): filters[filterOf[i]].merge(lower: lower, upper: upper)
            }
        }
        for i in filters.indices {
            if let invalid = filters[i].invalidRange { throw invalid }
            filters[i].settle()
        }
        for overlap in overlaps { if let invalid = overlap.invalid { throw invalid } }
        // The plan: kept for this shape and these numbers of accepted values, else computed.
        var kept: QueryPlanCache.Entry?
        // Only entries from the first that matched can match (the common case: that one), so
        // the search goes on from there, comparing the counts (a few integers) before the key paths.
        if let shape, shape.accepts(filters) {
            kept = shape
        } else if firstMatch < entries.endIndex {
            for entry in entries[(firstMatch + 1)...] where entry.accepts(filters) && entry.matches(conditions, overlaps, terms) {
                kept = entry
                break
            }
        }
        let orderingNumbers: [Int]
        let plan: IndexedRows.Plan
        if let kept {
            cache?.recordHit(kept)
            orderingNumbers = kept.orderingNumbers
            plan = kept.plan.rebound(to: filters, overlaps, keptValues: kept.prefixValues)
        } else {
            // A single-value equality fixes its property: an ordering term on it orders nothing and
            // is dropped, whether an index serves the order or the matches are sorted (ties then
            // follow the terms left, else insertion order).
            let fixed = filters.filter { $0.values?.count == 1 }.map(\.keyPath)
            orderingNumbers = terms.indices.filter { t in !fixed.contains { $0 == terms[t].keyPath } }
            plan = IndexedRows.plan(filters: filters, overlaps: overlaps, orderings: orderingNumbers.map { terms[$0] },
                                    fields: rows.fields, intervals: rows.intervals)
            cache?.insert(QueryPlanCache.Entry(
                conditions: conditions, overlaps: overlaps, terms: terms, filterOf: filterOf, filters: filters,
                firstCondition: firstCondition, orderingNumbers: orderingNumbers, plan: plan))
        }
        let orderings = orderingNumbers.count == terms.count ? terms : orderingNumbers.map { terms[$0] }
        // A cursor holds the key of the plan it came from: the index's whole key when the plan
        // serves the order (none for insertion order), else the ordering's values.
        if let cursor {
            let cursorKeyLength = plan.servesOrder ? plan.index.map { rows.fields[$0].count } ?? 0 : orderings.count
            if cursor.plan != rows.planTag(plan) || cursor.key.count != cursorKeyLength {
                throw RepositoryError.invalidQuery("the cursor belongs to another query (or the repository's indexes changed); start again without it")
            }
        }
        return CompiledQuery(filters: filters, firstCondition: firstCondition, overlaps: overlaps,
                             orderings: orderings, orderingNumbers: orderingNumbers, plan: plan)
    }

    /// Checks a candidate against the filters no index applies and the predicate; `nil` when
    /// there is nothing to check.
    private func acceptor(_ compiled: CompiledQuery, _ query: EntityQuery<Entity>) -> ((Int32) -> Bool)? {
        let residual = compiled.plan.residual(compiled.filters)
        let overlaps = compiled.plan.residual(compiled.overlaps)
        let predicate = query.predicate
        guard !residual.isEmpty || !overlaps.isEmpty || predicate != nil else { return nil }
        let bySlot = self.bySlot
        let values = residual.map { query.conditionValues[compiled.firstCondition[$0]] }
        let overlapValues = overlaps.map { query.overlapValues[$0] }
        return { slot in
            let entity = bySlot[Int(slot)]!
            for (i, f) in residual.enumerated() where !compiled.filters[f].accepts(values[i](entity)) { return false }
            for (i, o) in overlaps.enumerated() {
                let getters = overlapValues[i]
                if !compiled.overlaps[o].accepts(start: getters.start(entity), end: getters.end(entity)) { return false }
            }
            return predicate?(entity) ?? true
        }
    }

    /// The slots matching `query`, in its order, and the cursor after the last one.
    /// - Parameter wantsCursor: Whether to make the cursor (a page hands it on; `nil` otherwise).
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` for a negative offset or a cursor from another query.
    func run(
        _ query: EntityQuery<Entity>, defaultOrder: EntityQuery<Entity>.Orderings, cached: Bool = false, wantsCursor: Bool = true
    ) throws -> (slots: [Int32], next: QueryCursor?) {
        run(try compile(query, defaultOrder: defaultOrder, cached: cached), query, defaultOrder: defaultOrder, wantsCursor: wantsCursor)
    }

    /// Runs `query` as `compiled` (its checks passed): the slots, in its order, and the cursor.
    private func run(
        _ compiled: CompiledQuery, _ query: EntityQuery<Entity>, defaultOrder: EntityQuery<Entity>.Orderings, wantsCursor: Bool
    ) -> (slots: [Int32], next: QueryCursor?) {
        if compiled.filters.contains(where: { $0.values?.isEmpty == true }) { return ([], nil) }
        let limit = query.effectiveLimit ?? Int.max
        let accept = acceptor(compiled, query)
        let plan = compiled.plan
        if plan.servesOrder {
            let slots = rows.orderedSlots(plan, filters: compiled.filters, offset: query.offset, limit: limit,
                                          cursor: query.cursor, accept: accept)
            return (slots, wantsCursor ? slots.last.map { rows.cursor(after: $0, plan) } : nil)
        }
        // The index (if any) narrows the candidates; the matches are then sorted.
        let candidates = rows.candidateSlots(plan, filters: compiled.filters, accept: accept)
        let getters = (query.orderings.terms.isEmpty ? defaultOrder : query.orderings).values
        let orderings = compiled.orderingNumbers.map { getters[$0] }
        var keyed = candidates.map { slot in
            (key: orderings.map { $0(bySlot[Int(slot)]!) }, sequence: rows.heads.sequence(Int(slot)), slot: slot)
        }
        let descending = compiled.orderings.map { $0.descending }
        let lastDescending = descending.last ?? false
        func less(_ a: [IndexValue], _ aSequence: UInt64, _ b: [IndexValue], _ bSequence: UInt64) -> Bool {
            for i in 0..<a.count {
                let c = IndexValue.compare(a[i], b[i])
                if c != 0 { return descending[i] ? c > 0 : c < 0 }
            }
            return lastDescending ? aSequence > bSequence : aSequence < bSequence
        }
        keyed.sort { less($0.key, $0.sequence, $1.key, $1.sequence) }
        if let cursor = query.cursor {
            keyed.removeAll { !less(cursor.key, cursor.sequence, $0.key, $0.sequence) }
        }
        let start = min(query.offset, keyed.count)
        let end = limit >= keyed.count - start ? keyed.count : start + limit
        let page = keyed[start..<end]
        let tag = rows.planTag(plan)
        return (page.map { $0.slot }, page.last.map { QueryCursor(key: $0.key, sequence: $0.sequence, plan: tag) })
    }

    /// How many rows match `query` (ignoring its limit, offset and cursor).
    /// - Complexity: O(log n + k / c) for chunks of c entries when one index applies every condition; otherwise
    ///   that of ``run(_:defaultOrder:)``.
    func count(_ query: EntityQuery<Entity>, cached: Bool = false) throws -> Int {
        let all = query.conditionsOnly
        let compiled = try compile(all, defaultOrder: EntityQuery<Entity>.Orderings(), cached: cached)
        if compiled.filters.contains(where: { $0.values?.isEmpty == true }) { return 0 }
        if compiled.filters.isEmpty && compiled.overlaps.isEmpty && query.predicate == nil { return count }
        // Key ranges alone count only when they apply every condition: an overlap condition
        // is never applied by them alone (an overlap plan checks ends as it scans).
        if query.predicate == nil && compiled.overlaps.isEmpty, let n = rows.count(compiled.plan, filters: compiled.filters) { return n }
        return run(compiled, all, defaultOrder: EntityQuery<Entity>.Orderings(), wantsCursor: false).slots.count
    }

    /// A description of the plan for `query`, for ``EventSourcedRepository/explain(_:)``.
    func explain(
        _ query: EntityQuery<Entity>, defaultOrder: EntityQuery<Entity>.Orderings, declared: [EntityIndex<Entity>],
        cached: Bool = false
    ) -> String {
        guard let compiled = try? compile(query.after(nil), defaultOrder: defaultOrder, cached: cached) else { return "invalid query" }
        let plan = compiled.plan
        var parts: [String] = []
        if let scan = plan.overlapScan {
            parts.append("interval index \(declared[plan.index!].name)" + (plan.reversed ? " backwards" : "")
                + " overlapping \(scan.filter.name): starts from the range's start less the longest duration, then open-ended entries starting earlier")
            if plan.prefixes.count > 1 { parts.append("\(plan.prefixes.count) key ranges" + (plan.servesOrder ? " merged by start" : "")) }
        } else if let number = plan.index {
            parts.append("index \(declared[number].name)" + (plan.reversed ? " backwards" : ""))
            if plan.prefixes.count > 1 { parts.append("\(plan.prefixes.count) key ranges" + (plan.servesOrder ? " merged" : "")) }
        } else {
            parts.append(plan.servesOrder ? "insertion order" : "scan of every entity")
        }
        let residual = plan.residual(compiled.filters)
        let residualNames = residual.map { String(describing: compiled.filters[$0].keyPath) }
            + plan.residual(compiled.overlaps).map { "overlapping " + compiled.overlaps[$0].name }
        if !residualNames.isEmpty {
            parts.append("then filter on " + residualNames.joined(separator: ", "))
        }
        if query.predicate != nil { parts.append("then the predicate") }
        if !plan.servesOrder { parts.append("then sort") }
        return parts.joined(separator: ", ")
    }
}
