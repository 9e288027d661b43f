/// Queries over an ``EntityTable``: turns an ``EntityQuery`` into `IndexedRows`' filters and
/// plan, and the slots it finds into entities. It runs on a copy of the table, outside every
/// lock, because it calls the query's predicate.
extension EntityTable {
    /// A checked query, ready to run: its merged filters (with each property's value, for the
    /// filters no index applies), its ordering and its plan.
    struct CompiledQuery {
        var filters: [IndexedRows.FieldFilter]
        /// Per filter, the property's value.
        var values: [@Sendable (Entity) -> IndexValue]
        /// The overlap conditions, and per condition its start's and end's values.
        var overlaps: [IndexedRows.OverlapFilter]
        var overlapValues: [(start: @Sendable (Entity) -> IndexValue, end: @Sendable (Entity) -> IndexValue)]
        var orderings: [EntityQuery<Entity>.Ordering]
        var plan: IndexedRows.Plan
    }

    /// The checks every query passes before it runs, and its plan: the one place for ``run``
    /// and for observation, which checks once up front. Validity depends only on the query and
    /// the declared indexes, never on the rows, so a query valid once is valid after every commit.
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` for a negative offset or limit, a range
    ///   whose end precedes its start (after merging every condition on its property), an
    ///   overlapping range that is reversed or has a NaN bound, or a cursor from another query.
    func compile(_ query: EntityQuery<Entity>, defaultOrder: [EntityQuery<Entity>.Ordering]) throws -> CompiledQuery {
        guard query.offset >= 0 else { throw RepositoryError.invalidQuery("offset \(query.offset) must not be negative") }
        if let limit = query.limit, limit < 0 { throw RepositoryError.invalidQuery("limit \(limit) must not be negative") }
        var filters: [IndexedRows.FieldFilter] = []
        var values: [@Sendable (Entity) -> IndexValue] = []
        for condition in query.conditions {
            let keyPath: any AnyKeyPath & Sendable = condition.keyPath
            let number: Int
            if let existing = filters.firstIndex(where: { $0.keyPath == keyPath }) {
                number = existing
            } else {
                number = filters.count
                filters.append(IndexedRows.FieldFilter(keyPath: keyPath))
                values.append(condition.value)
            }
            switch condition.test {
            case .values(let accepted): filters[number].merge(values: accepted)
            case .range(let lower, let upper): filters[number].merge(lower: lower, upper: upper)
            }
        }
        for i in filters.indices {
            if let reversed = filters[i].reversedRange { throw reversed }
            filters[i].settle()
        }
        let overlaps = query.overlaps.map { IndexedRows.OverlapFilter(start: $0.start, end: $0.end, lower: $0.lower, upper: $0.upper) }
        for overlap in overlaps { if let invalid = overlap.invalid { throw invalid } }
        // A single-value equality fixes its property: an ordering term on it orders nothing and
        // is dropped, whether an index serves the order or the matches are sorted (ties then
        // follow the terms left, else insertion order).
        let fixed = filters.filter { $0.values?.count == 1 }.map(\.keyPath)
        let orderings = (query.orderings.isEmpty ? defaultOrder : query.orderings).filter { term in
            !fixed.contains { $0 == term.keyPath }
        }
        let plan = IndexedRows.plan(
            filters: filters, overlaps: overlaps,
            orderings: orderings.map { IndexedField(keyPath: $0.keyPath, descending: $0.descending) },
            fields: rows.fields, intervals: rows.intervals)
        // A cursor holds the key of the plan it came from: the index's whole key when the plan
        // serves the order (none for insertion order), else the ordering's values.
        let cursorKeyLength = plan.servesOrder ? plan.index.map { rows.fields[$0].count } ?? 0 : orderings.count
        if let cursor = query.cursor, cursor.plan != IndexedRows.planTag(plan) || cursor.key.count != cursorKeyLength {
            throw RepositoryError.invalidQuery("the cursor belongs to another query (or the repository's indexes changed); start again without it")
        }
        return CompiledQuery(filters: filters, values: values, overlaps: overlaps,
                             overlapValues: query.overlaps.map { ($0.startValue, $0.endValue) }, orderings: orderings, plan: plan)
    }

    /// Checks a candidate against the filters no index applies and the predicate; `nil` when
    /// there is nothing to check.
    private func acceptor(_ compiled: CompiledQuery, predicate: (@Sendable (Entity) -> Bool)?) -> ((Int32) -> Bool)? {
        let residual = compiled.plan.residual(compiled.filters)
        let overlaps = compiled.plan.residual(compiled.overlaps)
        guard !residual.isEmpty || !overlaps.isEmpty || predicate != nil else { return nil }
        let bySlot = self.bySlot
        return { slot in
            let entity = bySlot[Int(slot)]!
            for f in residual where !compiled.filters[f].accepts(compiled.values[f](entity)) { return false }
            for o in overlaps {
                let (start, end) = compiled.overlapValues[o]
                if !compiled.overlaps[o].accepts(start: start(entity), end: end(entity)) { return false }
            }
            return predicate?(entity) ?? true
        }
    }

    /// The slots matching `query`, in its order, and the cursor after the last one.
    /// - Throws: ``RepositoryError/invalidQuery(_:)`` for a negative offset or a cursor from another query.
    func run(_ query: EntityQuery<Entity>, defaultOrder: [EntityQuery<Entity>.Ordering]) throws -> (slots: [Int32], next: QueryCursor?) {
        run(try compile(query, defaultOrder: defaultOrder), query)
    }

    /// Runs `query` as `compiled` (its checks passed): the slots, in its order, and the cursor.
    private func run(_ compiled: CompiledQuery, _ query: EntityQuery<Entity>) -> (slots: [Int32], next: QueryCursor?) {
        if compiled.filters.contains(where: { $0.values?.isEmpty == true }) { return ([], nil) }
        let limit = query.effectiveLimit ?? Int.max
        let accept = acceptor(compiled, predicate: query.predicate)
        let plan = compiled.plan
        if plan.servesOrder {
            return rows.orderedSlots(plan, filters: compiled.filters, offset: query.offset, limit: limit,
                                     cursor: query.cursor, accept: accept)
        }
        // The index (if any) narrows the candidates; the matches are then sorted.
        let candidates = rows.candidateSlots(plan, filters: compiled.filters, accept: accept)
        let orderings = compiled.orderings
        var keyed = candidates.map { slot in
            (key: orderings.map { $0.value(bySlot[Int(slot)]!) }, sequence: rows.heads[Int(slot)].sequence, slot: slot)
        }
        let descending = orderings.map { $0.descending }
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
        let tag = IndexedRows.planTag(plan)
        return (page.map { $0.slot }, page.last.map { QueryCursor(key: $0.key, sequence: $0.sequence, plan: tag) })
    }

    /// How many rows match `query` (ignoring its limit, offset and cursor).
    /// - Complexity: O(log n + k / c) for chunks of c entries when one index applies every condition; otherwise
    ///   that of ``run(_:defaultOrder:)``.
    func count(_ query: EntityQuery<Entity>) throws -> Int {
        let all = EntityQuery<Entity>(conditions: query.conditions, overlaps: query.overlaps, predicate: query.predicate)
        let compiled = try compile(all, defaultOrder: [])
        if compiled.filters.contains(where: { $0.values?.isEmpty == true }) { return 0 }
        if compiled.filters.isEmpty && compiled.overlaps.isEmpty && query.predicate == nil { return count }
        // Key ranges alone count only when they apply every condition: an overlap condition
        // is never applied by them alone (an overlap plan checks ends as it scans).
        if query.predicate == nil && compiled.overlaps.isEmpty, let n = rows.count(compiled.plan, filters: compiled.filters) { return n }
        return run(compiled, all).slots.count
    }

    /// A description of the plan for `query`, for ``EventSourcedRepository/explain(_:)``.
    func explain(_ query: EntityQuery<Entity>, defaultOrder: [EntityQuery<Entity>.Ordering], declared: [EntityIndex<Entity>]) -> String {
        guard let compiled = try? compile(query.after(nil), defaultOrder: defaultOrder) else { return "invalid query" }
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
