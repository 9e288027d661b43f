public import Foundation
@_spi(Indexing) import EventKernel

/// The set of type codes a query accepts.
@usableFromInline
struct TypeMask {
    @usableFromInline var small: UInt64 = 0
    /// Used only when more than 64 types are interned.
    @usableFromInline var large: [Bool]? = nil

    @inlinable
    func contains(_ code: UInt32) -> Bool {
        if let large { return large[Int(code)] }
        return small & (1 << UInt64(code)) != 0
    }
}

extension ActivityIndex {
    /// How to enumerate candidates for a type filter.
    @usableFromInline
    enum Plan {
        /// Nothing can match.
        case empty
        /// Walk the global index, keeping types in the mask (`nil` = all).
        case global(TypeMask?)
        /// Walk the per-type indexes of these codes, merged lazily.
        case perType([Int])
    }

    /// Chooses between the global index and the per-type indexes. Per-type
    /// indexes win when the selected types are a minority (under half of
    /// the activities): the global walk would discard most entries it
    /// visits, while a k-way merge over a handful of sources costs only a
    /// few comparisons per result. Above half, the global walk discards
    /// less than one entry per result and needs no merge.
    @usableFromInline
    func plan(for types: Set<ActivityType>?) -> Plan {
        guard let types else { return .global(nil) }
        var mask = TypeMask()
        if typeTable.count > 64 { mask.large = Array(repeating: false, count: typeTable.count) }
        var selected = 0
        var selectedTypes = 0
        for type in types {
            guard let code = typeCodes[type], byType[Int(code)].count > 0 else { continue }
            if mask.large != nil { mask.large![Int(code)] = true } else { mask.small |= 1 << UInt64(code) }
            selected += byType[Int(code)].count
            selectedTypes += 1
        }
        if selectedTypes == 0 { return .empty }
        if selected * 2 >= count { return .global(mask) }
        var codes: [Int] = []
        codes.reserveCapacity(selectedTypes)
        for code in 0..<typeTable.count where mask.contains(UInt32(code)) { codes.append(code) }
        return .perType(codes)
    }

    /// Enumerates `[lo, hi)` of each chosen index (as computed by `bounds`)
    /// in sort order, skipping `offset` matches and stopping at `limit`.
    func collect(
        types: Set<ActivityType>?, order: ActivitySortOrder, offset: Int, limit: Int,
        bounds: (SortedSlotIndex) -> (IndexPosition, IndexPosition)
    ) -> [ActivityModel] {
        var result: [ActivityModel] = []
        if limit <= 64 { result.reserveCapacity(limit) }
        var skip = offset
        let reversed = order == .newestFirst
        switch plan(for: types) {
        case .empty:
            return []
        case .global(let mask):
            let (lo, hi) = bounds(byStart)
            byStart.scan(from: lo, to: hi, reversed: reversed) { e in
                if let mask, !mask.contains(rows[Int(e.slot)].type) { return true }
                if skip > 0 { skip -= 1; return true }
                result.append(model(at: e.slot))
                return result.count < limit
            }
        case .perType(let codes) where codes.count == 1:
            let index = byType[codes[0]]
            let (lo, hi) = bounds(index)
            index.scan(from: lo, to: hi, reversed: reversed) { e in
                if skip > 0 { skip -= 1; return true }
                result.append(model(at: e.slot))
                return result.count < limit
            }
        case .perType(let codes):
            // Each source contributes at most offset + limit entries, so take
            // that many from each (a tight scan over contiguous chunks), then
            // merge; with small limits this beats stepping nested positions.
            let needed = offset > Int.max - limit ? Int.max : offset + limit
            var sources: [[IndexEntry]] = []
            sources.reserveCapacity(codes.count)
            for code in codes {
                let index = byType[code]
                let (lo, hi) = bounds(index)
                var taken: [IndexEntry] = []
                if needed <= 256 { taken.reserveCapacity(needed) }
                index.scan(from: lo, to: hi, reversed: reversed) { e in
                    taken.append(e)
                    return taken.count < needed
                }
                sources.append(taken)
            }
            var heads = [Int](repeating: 0, count: sources.count)
            while result.count < limit {
                var best = -1
                var bestEntry = IndexEntry(start: 0, slot: 0)
                for s in 0..<sources.count where heads[s] < sources[s].count {
                    let e = sources[s][heads[s]]
                    if best < 0 || (reversed ? entryLess(bestEntry, e) : entryLess(e, bestEntry)) {
                        best = s
                        bestEntry = e
                    }
                }
                if best < 0 { break }
                heads[best] += 1
                if skip > 0 { skip -= 1; continue }
                result.append(model(at: bestEntry.slot))
            }
        }
        return result
    }

    /// Returns the activities a query selects, filtered, sorted and paginated
    /// as documented on `ActivityQuery`.
    ///
    /// Edge cases: `types: []` and `afterDate == beforeDate` return `[]`;
    /// `limit: 0` is no limit; a negative limit or offset, or `afterDate > beforeDate`,
    /// throws.
    ///
    /// - Parameter query: The query.
    /// - Returns: The matching activities in `query.sortOrder`.
    /// - Throws: `ActivityQueryError` if the query is malformed.
    /// - Complexity: O(log n + offset + k) for k results when no type filter
    ///   is set or the filter covers most activities; with a minority type
    ///   filter, O(t log n + (offset + k) t) for t selected types.
    public func fetch(_ query: ActivityQuery) throws(ActivityQueryError) -> [ActivityModel] {
        try query.validate()
        if query.isTriviallyEmpty || isEmpty { return [] }
        let after = query.afterDate?.timeIntervalSinceReferenceDate
        let before = query.beforeDate?.timeIntervalSinceReferenceDate
        let cursor = query.cursor
        let order = query.sortOrder
        let rows = self.rows
        return collect(types: query.types, order: order, offset: query.offset, limit: query.effectiveLimit ?? .max) { index in
            var lo = after.map { index.position(ofStart: $0, strict: true) } ?? index.startPosition
            var hi = before.map { index.position(ofStart: $0, strict: false) } ?? index.endPosition
            if let cursor {
                let start = cursor.startDate.timeIntervalSinceReferenceDate
                if order == .oldestFirst {
                    lo = Swift.max(lo, index.position(ofKey: start, id: cursor.id, strict: true, rows: rows))
                } else {
                    hi = Swift.min(hi, index.position(ofKey: start, id: cursor.id, strict: false, rows: rows))
                }
            }
            return (lo, hi)
        }
    }

    /// Returns the activities whose start date lies in a closed range.
    ///
    /// - Parameters:
    ///   - range: The window; both ends inclusive.
    ///   - types: The types to keep, `nil` for all, `[]` for none.
    ///   - sortOrder: The result order (oldest first unless specified).
    ///   - limit: The maximum result count, or `nil` for all.
    /// - Returns: The matching activities in `sortOrder`.
    /// - Throws: `ActivityQueryError` if `limit` is negative.
    /// - Complexity: O(log n + k) for k results (see `fetch(_:)` for type
    ///   filters).
    public func fetch(
        startingIn range: ClosedRange<Date>, types: Set<ActivityType>? = nil,
        sortOrder: ActivitySortOrder = .oldestFirst, limit: Int? = nil
    ) throws(ActivityQueryError) -> [ActivityModel] {
        try fetch(ActivityRangeQuery(.startingIn, from: range.lowerBound, to: range.upperBound,
                                     types: types, sortOrder: sortOrder, limit: limit))
    }

    /// Returns the activities whose lifetime overlaps the closed interval
    /// `[start, end]`: those with `startDate <= end` and either
    /// `endDate >= start` or still active.
    ///
    /// - Parameters:
    ///   - start: The inclusive start of the interval.
    ///   - end: The inclusive end of the interval.
    ///   - types: The types to keep, `nil` for all, `[]` for none.
    ///   - sortOrder: The result order (oldest first unless specified).
    ///   - limit: The maximum result count, or `nil` for all.
    /// - Returns: The overlapping activities in `sortOrder`.
    /// - Throws: `ActivityQueryError` if `end < start` or `limit` is negative.
    /// - Complexity: O(log n + m + a log a), where m is the number of
    ///   activities starting in `[start - d, end]` for the longest ended
    ///   duration d, and a the number of active activities starting earlier.
    public func fetch(
        overlappingFrom start: Date, to end: Date, types: Set<ActivityType>? = nil,
        sortOrder: ActivitySortOrder = .oldestFirst, limit: Int? = nil
    ) throws(ActivityQueryError) -> [ActivityModel] {
        try fetch(ActivityRangeQuery(.overlapping, from: start, to: end,
                                     types: types, sortOrder: sortOrder, limit: limit))
    }

    /// Returns the activities whose lifetime overlaps a closed range; see
    /// `fetch(overlappingFrom:to:types:sortOrder:limit:)`.
    ///
    /// - Parameters:
    ///   - range: The interval; both ends inclusive.
    ///   - types: The types to keep, `nil` for all, `[]` for none.
    ///   - sortOrder: The result order (oldest first unless specified).
    ///   - limit: The maximum result count, or `nil` for all.
    /// - Returns: The overlapping activities in `sortOrder`.
    /// - Throws: `ActivityQueryError` if `limit` is negative.
    /// - Complexity: See `fetch(overlappingFrom:to:types:sortOrder:limit:)`.
    public func fetch(
        overlapping range: ClosedRange<Date>, types: Set<ActivityType>? = nil,
        sortOrder: ActivitySortOrder = .oldestFirst, limit: Int? = nil
    ) throws(ActivityQueryError) -> [ActivityModel] {
        try fetch(overlappingFrom: range.lowerBound, to: range.upperBound, types: types, sortOrder: sortOrder, limit: limit)
    }

    /// Runs a window query; see `ActivityRangeQuery`.
    ///
    /// - Parameter query: The window query.
    /// - Returns: The matching activities in `query.sortOrder`.
    /// - Throws: `ActivityQueryError` if the query is malformed.
    /// - Complexity: See `fetch(startingIn:types:sortOrder:limit:)` and
    ///   `fetch(overlappingFrom:to:types:sortOrder:limit:)`.
    public func fetch(_ query: ActivityRangeQuery) throws(ActivityQueryError) -> [ActivityModel] {
        try query.validate()
        let limit = query.effectiveLimit ?? .max
        if isEmpty { return [] }
        let a = query.lowerBound.timeIntervalSinceReferenceDate
        let b = query.upperBound.timeIntervalSinceReferenceDate
        switch query.kind {
        case .startingIn:
            return collect(types: query.types, order: query.sortOrder, offset: 0, limit: limit) { index in
                (index.position(ofStart: a, strict: false), index.position(ofStart: b, strict: true))
            }
        case .overlapping:
            let mask: TypeMask?
            switch plan(for: query.types) {
            case .empty: return []
            case .global(let m): mask = m
            case .perType:
                var m = TypeMask()
                if typeTable.count > 64 { m.large = Array(repeating: false, count: typeTable.count) }
                for type in query.types ?? [] {
                    guard let code = typeCodes[type] else { continue }
                    if m.large != nil { m.large![Int(code)] = true } else { m.small |= 1 << UInt64(code) }
                }
                mask = m
            }
            // Every ended activity overlapping [a, b] starts at or after
            // a - (longest duration); the extra second absorbs rounding.
            let scanFrom = a - maxEndedDurationBound - 1
            let reversed = query.sortOrder == .newestFirst
            // Active activities that started before the scanned window;
            // they precede every scanned one.
            var early: [Int32] = []
            for slot in activeSlots {
                let row = rows[Int(slot)]
                if row.start < scanFrom, mask?.contains(row.type) ?? true { early.append(slot) }
            }
            early.sort { entryLess(IndexEntry(start: rows[Int($0)].start, slot: $0),
                                   IndexEntry(start: rows[Int($1)].start, slot: $1)) }
            var slots: [Int32] = []
            if !reversed {
                slots = Array(early.prefix(limit))
            }
            if slots.count < limit {
                let lo = byStart.position(ofStart: scanFrom, strict: false)
                let hi = byStart.position(ofStart: b, strict: true)
                byStart.scan(from: lo, to: hi, reversed: reversed) { e in
                    let row = rows[Int(e.slot)]
                    if let mask, !mask.contains(row.type) { return true }
                    if row.end.isNaN || row.end >= a { slots.append(e.slot) }
                    return slots.count < limit
                }
            }
            if reversed && slots.count < limit {
                slots += early.reversed().prefix(limit - slots.count)
            }
            return slots.map { model(at: $0) }
        }
    }
}
