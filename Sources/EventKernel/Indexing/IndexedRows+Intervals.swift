/// An interval index's state beside its ordinary entries (which order the rows by prefix, start,
/// insertion): the rows whose end is `nil` (open), in the same order, and a histogram of the
/// ended rows' durations. An overlap query `[a, b]` finds every ended match among the starts in
/// `[a − longest, b]` and every open one among the open entries (see `IndexedRows+Overlap.swift`).
///
/// Concrete and kept in ``IndexedRows`` for the same reason as the rest of it: the repository's
/// generic code is not specialised for the entity type, so per-row work here touches only
/// `IndexValue`s and slots, never the entity (the ends arrive as keys, computed in `prepare`).
struct IntervalIndex: Sendable {
    /// The declared index this one extends: its last component is the start.
    let number: Int
    /// Where each row's end is among the ends (``IndexedRows/ends``): `slot × intervals.count + column`.
    let column: Int
    /// The end's property, for planning.
    let end: any AnyKeyPath & Sendable
    /// How many ended rows have a duration in `(2^(k−1), 2^k]` (bucket 0: at most 1, or
    /// negative; bucket 63: beyond 2^62, or no duration: not numbers, NaN, infinite). The
    /// highest non-empty bucket bounds the longest duration; unlike a running maximum it falls
    /// again when the long interval is removed or shortened.
    var buckets = [Int](repeating: 0, count: 64)
    /// The open rows (end `nil`), ordered as the index.
    var open: IndexStorage

    init(number: Int, column: Int, end: any AnyKeyPath & Sendable, open: IndexStorage) {
        self.number = number
        self.column = column
        self.end = end
        self.open = open
    }

    /// The bucket of the interval `[start, end]` (see ``buckets``).
    static func bucket(start: IndexValue, end: IndexValue) -> Int {
        let duration = end.doubleValue - start.doubleValue
        guard duration > 1 else { return duration.isNaN ? 63 : 0 }
        guard duration < 0x1p62 else { return 63 }
        // ceil(log2(duration)) from the binary exponent, without calling log2.
        let k = Int(duration.exponent)
        return duration.significandBitPattern == 0 ? k : k + 1
    }

    /// An upper bound on every ended row's duration (`nil`: none, or not bounded).
    var longestDurationBound: Double? {
        guard let k = buckets.lastIndex(where: { $0 > 0 }) else { return 0 }
        return k >= 63 ? nil : Double(sign: .plus, exponent: k, significand: 1)
    }

    /// The least start an ended row overlapping `[a, …]` can have, as a key component of the
    /// start's case (`nil`: no bound, scan from the first start). Twice the bucket bound and a
    /// relative margin absorb the rounding of durations and of this subtraction (integers
    /// beyond 2^53 and dates are doubles here).
    func scanStart(overlappingFrom a: IndexValue) -> IndexValue? {
        guard let longest = longestDurationBound else { return nil }
        let reach = 2 * longest
        switch a {
        case .double(let x):
            let from = x - reach - (abs(x) + reach) * 0x1p-40
            return from.isFinite ? .double(from) : nil
        case .int(let x):
            let from = (Double(x) - reach - (abs(Double(x)) + reach) * 0x1p-40).rounded(.down)
            guard from > -0x1p63 else { return nil }
            return from >= 0x1p63 ? .int(.max) : .int(Int64(from))
        default:
            return nil
        }
    }
}

extension IndexedRows {
    /// The start of `slot`'s row in interval index `interval`.
    @inline(__always)
    func intervalStart(_ slot: Int32, _ interval: IntervalIndex) -> IndexValue {
        let key = key(slot, interval.number)
        return key[key.count - 1]
    }

    /// The end of `slot`'s row in interval index `interval` (`.null`: open).
    @inline(__always)
    func intervalEnd(_ slot: Int32, _ interval: IntervalIndex) -> IndexValue {
        ends.component(Int32(truncatingIfNeeded: Int(slot) &* intervals.count &+ interval.column), 0)
    }

    /// The 9 bytes an overlap scan compares each row's end with (``endIsOpenOrAtLeast(_:_:_:narrow:)``):
    /// `lower`'s encoding, for a number that is not NaN (whose order among its kind the encoding
    /// keeps exactly); `nil` for anything else, whose rows are compared decoded.
    static func narrowEndBound(_ lower: IndexValue) -> (tag: UInt8, bits: UInt64)? {
        switch lower {
        case .int, .uint: break
        case .double(let d) where !d.isNaN: break
        default: return nil
        }
        return KeyColumn.narrowBytes(NormalizedKey(IndexKey(lower), descending: [false]))
    }

    /// Whether the row in `slot` is open (no end) or ends at or after `lower` in `interval`:
    /// the test of every ended row an overlap scan reads. Compared on the stored 9 bytes when
    /// the end is of `lower`'s kind (`narrow`: ``narrowEndBound(_:)``): decoding each end first
    /// made the overlap query a fifth slower (`BenchProbe generic-activities`).
    @inline(__always)
    func endIsOpenOrAtLeast(_ slot: Int32, _ interval: IntervalIndex, _ lower: IndexValue, narrow: (tag: UInt8, bits: UInt64)?) -> Bool {
        if let narrow, let c = ends.compare(Int32(truncatingIfNeeded: Int(slot) &* intervals.count &+ interval.column), narrow: narrow) {
            return c >= 0
        }
        let end = intervalEnd(slot, interval)
        if case .null = end { return true }
        return IndexValue.compare(end, lower) >= 0
    }

    /// Counts the row in `slot` (its ends stored, or written here from `newKeys`, laid out as
    /// ``upsert(id:version:keys:)`` takes them) in every interval index's open entries or histogram.
    mutating func trackIntervals(_ slot: Int32, newKeys: RowKeys?) {
        let base = Int(slot) * intervals.count
        for j in intervals.indices {
            let interval = intervals[j]
            if let newKeys { ends.set(Int32(base + interval.column), newKeys[width + interval.column]) }
            let end = intervalEnd(slot, interval)
            if case .null = end {
                intervals[j].open.insert(key(slot, interval.number), sequence: heads.sequence(Int(slot)), slot: slot,
                                         keys: keysOf(index: interval.number))
            } else {
                intervals[j].buckets[IntervalIndex.bucket(start: intervalStart(slot, interval), end: end)] += 1
            }
        }
    }

    /// Undoes ``trackIntervals(_:newKeys:)`` for the row's stored keys.
    mutating func untrackIntervals(_ slot: Int32) {
        for j in intervals.indices {
            let interval = intervals[j]
            let end = intervalEnd(slot, interval)
            if case .null = end {
                intervals[j].open.remove(key(slot, interval.number), sequence: heads.sequence(Int(slot)),
                                         keys: keysOf(index: interval.number))
            } else {
                intervals[j].buckets[IntervalIndex.bucket(start: intervalStart(slot, interval), end: end)] -= 1
            }
        }
    }

    /// Untracks the row in `slot` when `newKeys` change an interval index's start or end.
    /// - Returns: Whether it did (the caller then tracks it again once the keys are stored).
    mutating func untrackChangedIntervals(_ slot: Int32, newKeys: RowKeys) -> Bool {
        let changed = intervals.contains { interval in
            let old = key(slot, interval.number), new = newKeys[interval.number]
            return !indexes[interval.number].sameKey(old, new)
                || IndexValue.compare(intervalEnd(slot, interval), newKeys[width + interval.column].first) != 0
        }
        if changed { untrackIntervals(slot) }
        return changed
    }

    /// Rebuilds every interval index's open entries and histogram from its restored entries
    /// (after a snapshot restore): one pass each, in order, so the open entries sort nothing.
    mutating func rebuildIntervals() {
        for j in intervals.indices {
            let interval = intervals[j]
            var buckets = [Int](repeating: 0, count: 64)
            let open = indexes[interval.number].filtered { slot in
                let end = intervalEnd(slot, interval)
                if case .null = end { return true }
                buckets[IntervalIndex.bucket(start: intervalStart(slot, interval), end: end)] += 1
                return false
            }
            intervals[j].buckets = buckets
            intervals[j].open = open
        }
    }
}
