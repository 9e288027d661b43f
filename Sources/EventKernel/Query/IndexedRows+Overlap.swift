/// The scan of an overlap plan (``IndexedRows/OverlapScan``): the entities of an interval index
/// whose `[start, end]` overlaps `[a, b]`, in the index's order (prefix, start, insertion).
///
/// An ended match starts no earlier than `a − d` for the longest duration d, which the index's
/// histogram bounds (``IntervalIndex/scanStart(overlappingFrom:)``); an open one (end `nil`)
/// matches whenever it starts by `b`. So the matches are the open entries starting before the
/// scanned window (all of them match), followed by the entries starting in `[a − d, b]` whose
/// end is open or at least `a`. Every start in the first part precedes every start in the
/// second, so the two concatenate in order: forwards first then second, backwards the reverse.
///
/// Concrete code: it reads starts and ends from the rows' keys, never an entity.
extension IndexedRows {
    /// Visits the slots matching `scan` with key prefix `prefix`, in the index's order (or
    /// reversed), strictly after `cursor`, until `body` returns `false`.
    /// - Returns: `false` when `body` stopped the scan.
    @discardableResult
    func overlapScan(
        _ scan: OverlapScan, prefix: [IndexValue], reversed: Bool, cursor: QueryCursor?, _ body: (Int32) -> Bool
    ) -> Bool {
        let interval = intervals[scan.interval], number = interval.number
        let startPath = fields[number][prefix.count].keyPath
        let lower = scan.filter.lower.value
        let from = interval.scanStart(overlappingFrom: lower)
        let window = FieldFilter(keyPath: startPath, values: nil,
                                 lower: from.map { RangeBound(value: $0, inclusive: true, original: nil) }, upper: scan.filter.upper)
        var parts: [(storage: IndexStorage, range: (ChunkedPosition, ChunkedPosition), checkEnd: Bool)] = []
        if let from {
            let before = FieldFilter(keyPath: startPath, values: nil, lower: nil, upper: RangeBound(value: from, inclusive: false, original: nil))
            parts.append((interval.open, bounds(in: interval.open, of: number, prefix: prefix, range: before), false))
        }
        parts.append((indexes[number], bounds(in: indexes[number], of: number, prefix: prefix, range: window), true))
        if reversed { parts.reverse() }
        let keys = keysOf(index: number)
        let narrowLower = Self.narrowEndBound(lower)
        for part in parts {
            var (lo, hi) = part.range
            let storage = part.storage
            if let cursor {
                let probe = storage.probe(IndexKey(cursor.key))
                if reversed {
                    hi = min(hi, storage.partitionPoint { storage.compare($0, probe, cursor.sequence, keys: keys) < 0 })
                } else {
                    lo = max(lo, storage.partitionPoint { storage.compare($0, probe, cursor.sequence, keys: keys) <= 0 })
                }
            }
            guard lo < hi else { continue }
            var going = true
            storage.scan(from: lo, to: hi, reversed: reversed) { entry in
                if part.checkEnd && !endIsOpenOrAtLeast(entry.slot, interval, lower, narrow: narrowLower) { return true }
                going = body(entry.slot)
                return going
            }
            if !going { return false }
        }
        return true
    }

    /// The slots of an overlap plan that serves the query's order (by start, either way),
    /// after `cursor`, skipping `offset` accepted rows, at most `limit` (``cursor(after:_:)``
    /// continues after the last one). The offset is skipped one match at a time (ended entries in the window
    /// need their end checked). Several key ranges (`IN` on the prefix) each give at most their
    /// first `offset + limit` matches, which are merged by (start, insertion) in the query's
    /// direction: the same order a sort of every match gives, without collecting every match.
    /// - Complexity: O(log n + m + k) for m entries scanned (see ``EntityIndex/interval(start:end:)``);
    ///   for r key ranges O(r log n + m + r (offset + k) log(r (offset + k))).
    func overlapOrderedSlots(
        _ plan: Plan, _ scan: OverlapScan, offset: Int, limit: Int, cursor: QueryCursor?, accept: ((Int32) -> Bool)?
    ) -> [Int32] {
        let interval = intervals[scan.interval]
        guard plan.prefixes.count > 1 else {
            var skip = offset
            var out: [Int32] = []
            if limit != Int.max { out.reserveCapacity(limit) }
            overlapScan(scan, prefix: plan.prefixes[0], reversed: plan.reversed, cursor: cursor) { slot in
                if let accept, !accept(slot) { return true }
                if skip > 0 { skip -= 1; return true }
                out.append(slot)
                return out.count < limit
            }
            return out
        }
        let wanted = limit == Int.max ? Int.max : offset.addingReportingOverflow(limit).overflow ? Int.max : offset + limit
        var gathered: [(start: IndexValue, sequence: UInt64, slot: Int32)] = []
        for prefix in plan.prefixes {
            // The cursor's key holds its own prefix: each range resumes after its start and
            // sequence under this range's prefix.
            let resume = cursor.map { QueryCursor(key: prefix + [$0.key.last ?? .null], sequence: $0.sequence, plan: $0.plan) }
            var found = 0
            overlapScan(scan, prefix: prefix, reversed: plan.reversed, cursor: resume) { slot in
                if let accept, !accept(slot) { return true }
                gathered.append((intervalStart(slot, interval), heads.sequence(Int(slot)), slot))
                found += 1
                return found < wanted
            }
        }
        let reversed = plan.reversed
        gathered.sort { a, b in
            let c = IndexValue.compare(a.start, b.start)
            if c != 0 { return reversed ? c > 0 : c < 0 }
            return reversed ? a.sequence > b.sequence : a.sequence < b.sequence
        }
        let from = min(offset, gathered.count)
        return gathered[from..<(limit >= gathered.count - from ? gathered.count : from + limit)].map(\.slot)
    }
}
