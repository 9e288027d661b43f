// Invariant checks of the interval indexes' state (`IndexedRows+Intervals.swift`), in the manner
// of `ChunkedSortedArray+Invariants.swift`: compiled only with `-DEVENTKERNEL_INTERNAL_CHECKS`
// (the test build), so that a release build carries neither the code nor a call.

extension IndexedRows {
    #if EVENTKERNEL_INTERNAL_CHECKS
    /// What is wrong with the interval indexes' state, empty when nothing is: each holds
    /// exactly the open rows (end `nil`) among its open entries, in the index's order and each
    /// once; its histogram counts exactly the ended rows, each in its duration's bucket; and
    /// every row is in one or the other.
    ///
    /// Only in builds with `EVENTKERNEL_INTERNAL_CHECKS`.
    /// - Complexity: O(n) per interval index.
    func intervalInvariantViolations() -> [String] {
        var violations: [String] = []
        for interval in intervals {
            let name = "interval index \(interval.number)"
            var buckets = [Int](repeating: 0, count: 64)
            var open: Set<Int32> = []
            let entries = indexes[interval.number].entries
            entries.scan(from: entries.startPosition, to: entries.endPosition, reversed: false) { entry in
                let end = intervalEnd(entry.slot, interval)
                if case .null = end {
                    open.insert(entry.slot)
                } else {
                    buckets[IntervalIndex.bucket(start: intervalStart(entry.slot, interval), end: end)] += 1
                }
                return true
            }
            if buckets != interval.buckets {
                violations.append("\(name): the histogram is \(interval.buckets) but the ended rows' durations fall in \(buckets)")
            }
            var listed: [Int32] = []
            interval.open.entries.scan(from: interval.open.entries.startPosition, to: interval.open.entries.endPosition, reversed: false) {
                listed.append($0.slot)
                return true
            }
            if Set(listed) != open || listed.count != open.count {
                violations.append("\(name): the open entries are not the rows without an end (\(listed.count) entries, \(open.count) rows, \(open.subtracting(listed).count) of them missing)")
            }
            let keys = keysOf(index: interval.number)
            let storage = interval.open
            violations += storage.entries.invariantViolations(areInIncreasingOrder: { storage.compare($0, $1, keys: keys) < 0 })
                .map { "\(name), open entries: \($0)" }
        }
        return violations
    }

    /// The check after every mutation, O(1) per interval index: every row is counted once,
    /// in the open entries or the histogram (``intervalInvariantViolations()`` checks which).
    func checkIntervalCounts() {
        for interval in intervals {
            let counted = interval.buckets.reduce(0, +) + interval.open.entries.count
            precondition(counted == count, "interval index \(interval.number) counts \(counted) of \(count) rows")
        }
    }
    #endif
}
