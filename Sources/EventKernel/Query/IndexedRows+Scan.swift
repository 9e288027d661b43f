/// The scans that answer a planned query over `IndexedRows` (`IndexedRows+Plan.swift` chose
/// the index): key-range bounds, ordered pages after a cursor, candidates for a sort, and
/// counts.
extension IndexedRows {
    /// The positions `[lo, hi)` of the entries of index `number` whose key starts with
    /// `prefix` and whose next component passes `range`.
    func bounds(of number: Int, prefix: [IndexValue], range: FieldFilter?) -> (ChunkedPosition, ChunkedPosition) {
        bounds(in: indexes[number], of: number, prefix: prefix, range: range)
    }

    /// ``bounds(of:prefix:range:)`` in `index`: index `number`'s entries, or entries in the
    /// same order (an interval index's open ones).
    func bounds(in index: IndexStorage, of number: Int, prefix: [IndexValue], range: FieldFilter?) -> (ChunkedPosition, ChunkedPosition) {
        var start: RangeBound?
        var end: RangeBound?
        if let range {
            // In a descending component the upper bound comes first.
            let descending = fields[number][prefix.count].descending
            start = descending ? range.upper : range.lower
            end = descending ? range.lower : range.upper
        }
        let keys = keysOf(index: number)
        let lo: ChunkedPosition
        if let start {
            let bound = index.prefixProbe(prefix, then: start.value)
            lo = index.partitionPoint { e in
                let c = index.compare(e, prefix: bound, keys: keys)
                return start.inclusive ? c < 0 : c <= 0
            }
        } else {
            let bound = index.prefixProbe(prefix)
            lo = index.partitionPoint { index.compare($0, prefix: bound, keys: keys) < 0 }
        }
        let hi: ChunkedPosition
        if let end {
            let bound = index.prefixProbe(prefix, then: end.value)
            hi = index.partitionPoint { e in
                let c = index.compare(e, prefix: bound, keys: keys)
                return end.inclusive ? c <= 0 : c < 0
            }
        } else {
            let bound = index.prefixProbe(prefix)
            hi = index.partitionPoint { index.compare($0, prefix: bound, keys: keys) <= 0 }
        }
        return (lo, max(lo, hi))
    }

    /// The cursor after `slot` in a plan that serves the query's order: the index's whole key
    /// (none in insertion order) and the row's sequence. The one rule of every ordered scan's
    /// cursor (one range, merged ranges, overlaps), computed only for a page that hands it on:
    /// reading a key back from its column allocates its values, and a plain fetch drops it.
    func cursor(after slot: Int32, _ plan: Plan) -> QueryCursor {
        QueryCursor(key: plan.index.map { key(slot, $0).values } ?? [], sequence: heads.sequence(Int(slot)), plan: planTag(plan))
    }

    /// The slots of a plan that serves the query's order, in that order, after `cursor`,
    /// skipping `offset` accepted rows, at most `limit` (``cursor(after:_:)`` continues after
    /// the last one).
    /// - Parameter accept: Checks a candidate's residual conditions; `nil` when there are none.
    /// - Complexity: O(log n + offset / c + k) without `accept`, for chunks of c entries.
    func orderedSlots(
        _ plan: Plan, filters: [FieldFilter], offset: Int, limit: Int, cursor: QueryCursor?,
        accept: ((Int32) -> Bool)?
    ) -> [Int32] {
        if let scan = plan.overlapScan {
            return overlapOrderedSlots(plan, scan, offset: offset, limit: limit, cursor: cursor, accept: accept)
        }
        var skip = offset
        var out: [Int32] = []
        if limit != Int.max { out.reserveCapacity(limit) }
        guard let number = plan.index else {
            // Insertion order, no index applies a condition: a scan in sequence order.
            var lo = bySequence.startPosition
            if let cursor { lo = bySequence.partitionPoint { $0.sequence <= cursor.sequence } }
            if accept == nil && skip > 0 {
                lo = bySequence.position(skip, from: lo, to: bySequence.endPosition, reversed: false)
                skip = 0
            }
            bySequence.scan(from: lo, to: bySequence.endPosition, reversed: false) { entry in
                if let accept, !accept(entry.slot) { return true }
                if skip > 0 { skip -= 1; return true }
                out.append(entry.slot)
                return out.count < limit
            }
            return out
        }
        if plan.prefixes.count > 1 {
            return mergedOrderedSlots(plan, number: number, filters: filters, offset: offset, limit: limit, cursor: cursor, accept: accept)
        }
        // One key range, scanned in order, stopping at the limit.
        let index = indexes[number]
        var (lo, hi) = bounds(of: number, prefix: plan.prefixes[0], range: plan.range.map { filters[$0] })
        if let cursor {
            let probe = index.probe(IndexKey(cursor.key)), keys = keysOf(index: number)
            if plan.reversed {
                hi = min(hi, index.partitionPoint { index.compare($0, probe, cursor.sequence, keys: keys) < 0 })
            } else {
                lo = max(lo, index.partitionPoint { index.compare($0, probe, cursor.sequence, keys: keys) <= 0 })
            }
        }
        if accept == nil && skip > 0 {
            let p = index.position(skip, from: lo, to: hi, reversed: plan.reversed)
            if plan.reversed { hi = p } else { lo = p }
            skip = 0
        }
        index.scan(from: lo, to: hi, reversed: plan.reversed) { entry in
            if let accept, !accept(entry.slot) { return true }
            if skip > 0 { skip -= 1; return true }
            out.append(entry.slot)
            return out.count < limit
        }
        return out
    }

    /// The slots of a plan with several key ranges (`IN` on a fixed component) that serves the
    /// query's order: each range gives at most its first `offset + limit` accepted entries after
    /// the cursor, and those are merged by the components after the fixed ones, then by
    /// sequence, in the directions the ranges are scanned in: the order a sort of every match
    /// gives, without collecting every match (a window of two types, newest 50, reads about
    /// 100 entries instead of every match in the window).
    /// How many entries a merge of `ranges` key ranges reserves for, each giving up to `wanted`
    /// (`Int.max`: no limit, nothing reserved) of an index of `entries`: the ranges are
    /// disjoint, so together they give at most `entries`, and a small table reserves little
    /// (the bound per range alone reserved up to 64 × 4,096 entries for a 10-row table).
    static func mergeReservation(wanted: Int, ranges: Int, entries: Int) -> Int {
        wanted == Int.max ? 0 : min(min(wanted, 4_096).multipliedReportingOverflow(by: ranges).partialValue, entries)
    }

    /// - Complexity: O(r log n + r (offset + k)) for r ranges, without `accept`.
    private func mergedOrderedSlots(
        _ plan: Plan, number: Int, filters: [FieldFilter], offset: Int, limit: Int, cursor: QueryCursor?,
        accept: ((Int32) -> Bool)?
    ) -> [Int32] {
        let index = indexes[number], keys = keysOf(index: number), components = fields[number]
        let fixed = plan.prefixes[0].count
        let wanted = limit == Int.max ? Int.max : offset.addingReportingOverflow(limit).overflow ? Int.max : offset + limit
        // Each range's first matches, in its scan order (so each run is sorted), with what the
        // merge compares read once: the components after the prefix, flat, and the sequence.
        let width = components.count - fixed
        var slots: [Int32] = [], values: [IndexValue] = [], sequences: [UInt64] = []
        // While every key is exact (prefixes and entries of at most 32 bytes, as in every
        // compact index), the merge compares the entries' encodings after the prefix
        // (`suffixes`), which order as the components do, each in its own direction: no
        // component decoded, no column read. Decoding the start of each entry of a two-types
        // window from a compact column (skipping the type's string) made it a quarter slower
        // (`BenchProbe generic-activities`). The first inexact entry moves the merge to the
        // components, read from the column for the entries taken so far too.
        let encodedPrefixes = plan.prefixes.map { index.prefixProbe($0).normalized }
        var bySuffix = encodedPrefixes.allSatisfy(\.isExact)
        var suffixes: [NormalizedKey] = []
        let expected = Self.mergeReservation(wanted: wanted, ranges: plan.prefixes.count, entries: index.count)
        slots.reserveCapacity(expected)
        sequences.reserveCapacity(expected)
        if bySuffix { suffixes.reserveCapacity(expected) } else { values.reserveCapacity(expected &* width) }
        var runs: [Range<Int>] = []
        // The column taken outside the scan's closure: `self` inside it copied the whole
        // `IndexedRows` (a retain and release of each of its arrays) per entry (perf: a sixth
        // of a two-types window); a component is read without copying its whole key.
        let column = columns[number]
        do {
            for (r, prefix) in plan.prefixes.enumerated() {
                // Every entry of this range starts with the prefix's bytes (the range's bounds
                // compare encodings), so its components after the prefix start at the same byte.
                let suffixStart = Int(encodedPrefixes[r].length)
                var (lo, hi) = bounds(of: number, prefix: prefix, range: plan.range.map { filters[$0] })
                if let cursor {
                    // The cursor's key holds its own range's prefix: each range resumes after the
                    // cursor's later components and sequence under its own prefix.
                    let probe = index.probe(IndexKey(prefix + cursor.key[fixed...]))
                    if plan.reversed {
                        hi = min(hi, index.partitionPoint { index.compare($0, probe, cursor.sequence, keys: keys) < 0 })
                    } else {
                        lo = max(lo, index.partitionPoint { index.compare($0, probe, cursor.sequence, keys: keys) <= 0 })
                    }
                    hi = max(lo, hi)
                }
                let first = slots.count
                index.scan(from: lo, to: hi, reversed: plan.reversed) { entry in
                    if let accept, !accept(entry.slot) { return true }
                    slots.append(entry.slot)
                    sequences.append(entry.sequence)
                    if bySuffix && entry.key.isExact {
                        suffixes.append(entry.key.droppingFirst(suffixStart))
                    } else {
                        if bySuffix {
                            bySuffix = false
                            suffixes = []
                            #if EVENTKERNEL_INTERNAL_CHECKS
                            MergeChecks.switchesToComponents.withLock { $0 += 1 }
                            #endif
                            for slot in slots.dropLast() {
                                precondition(Int(slot) < column.count, "an index entry's slot has its keys")
                                for c in fixed..<components.count { values.append(column.component(slot, c)) }
                            }
                        }
                        // Checked in every build: the read below is unchecked, and a wrong slot
                        // would read another row's memory rather than trap.
                        precondition(Int(entry.slot) < column.count, "an index entry's slot has its keys")
                        for c in fixed..<components.count { values.append(column.component(entry.slot, c)) }
                    }
                    return slots.count - first < wanted
                }
                if slots.count > first { runs.append(first..<slots.count) }
            }
        }
        // A component's effective direction: its own, flipped when the ranges are scanned
        // backwards; ties fall to the sequence in the last component's (IndexStorage's rule).
        let descending = components[fixed...].map { $0.descending != plan.reversed }
        let sequenceDescending = components[components.count - 1].descending != plan.reversed
        let reversed = plan.reversed, mergedBySuffix = bySuffix
        func before(_ a: Int, _ b: Int) -> Bool {
            if mergedBySuffix {
                // The encodings hold each component's own direction; a backward scan flips them all.
                let order = NormalizedKey.compare(suffixes[a], suffixes[b], bytes: NormalizedKey.inlineBytes)
                if order != 0 { return reversed ? order > 0 : order < 0 }
                return sequenceDescending ? sequences[a] > sequences[b] : sequences[a] < sequences[b]
            }
            for c in 0..<width {
                let order = IndexValue.compare(values[a &* width &+ c], values[b &* width &+ c])
                if order != 0 { return descending[c] ? order > 0 : order < 0 }
            }
            return sequenceDescending ? sequences[a] > sequences[b] : sequences[a] < sequences[b]
        }
        // The runs merged, stopping after `offset + limit`: a few heads compared per result.
        var heads = runs.map(\.lowerBound)
        var merged = 0
        var out: [Int32] = []
        if limit != Int.max { out.reserveCapacity(limit) }
        while out.count < limit {
            var best = -1
            for r in runs.indices where heads[r] < runs[r].upperBound {
                if best < 0 || before(heads[r], heads[best]) { best = r }
            }
            guard best >= 0 else { break }
            let i = heads[best]
            heads[best] += 1
            merged += 1
            if merged > offset { out.append(slots[i]) }
        }
        return out
    }

    /// The accepted slots of a plan that does not serve the order, in no particular order:
    /// the candidates the index (if any) narrows to, for a sort.
    func candidateSlots(_ plan: Plan, filters: [FieldFilter], accept: ((Int32) -> Bool)?) -> [Int32] {
        var out: [Int32] = []
        if let scan = plan.overlapScan {
            for prefix in plan.prefixes {
                overlapScan(scan, prefix: prefix, reversed: false, cursor: nil) { slot in
                    if accept?(slot) ?? true { out.append(slot) }
                    return true
                }
            }
        } else if let number = plan.index {
            let index = indexes[number]
            for prefix in plan.prefixes {
                let (lo, hi) = bounds(of: number, prefix: prefix, range: plan.range.map { filters[$0] })
                index.scan(from: lo, to: hi, reversed: false) { entry in
                    if accept?(entry.slot) ?? true { out.append(entry.slot) }
                    return true
                }
            }
        } else {
            bySequence.scan(from: bySequence.startPosition, to: bySequence.endPosition, reversed: false) { entry in
                if accept?(entry.slot) ?? true { out.append(entry.slot) }
                return true
            }
        }
        return out
    }

    /// How many rows the plan's key ranges hold: the count of a query whose every condition
    /// the index applies.
    /// - Complexity: O(log n + k / c), for chunks of c entries.
    func count(_ plan: Plan, filters: [FieldFilter]) -> Int? {
        guard let number = plan.index, plan.overlapScan == nil, !plan.consumed.contains(false) else { return nil }
        return plan.prefixes.reduce(0) { total, prefix in
            let (lo, hi) = bounds(of: number, prefix: prefix, range: plan.range.map { filters[$0] })
            return total + indexes[number].distance(from: lo, to: hi)
        }
    }
}

#if EVENTKERNEL_INTERNAL_CHECKS
import KernelPrimitives

/// What tests read of the `IN` merge's path (builds with `EVENTKERNEL_INTERNAL_CHECKS`).
enum MergeChecks {
    /// How many merges moved from comparing encodings to comparing components at an inexact
    /// entry (a key longer than 32 bytes) after taking exact ones: the path a differential
    /// test must be seen to run.
    static let switchesToComponents = Locked(0)
}
#endif
