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
            let entries = indexes[interval.number]
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
            interval.open.scan(from: interval.open.startPosition, to: interval.open.endPosition, reversed: false) {
                listed.append($0.slot)
                return true
            }
            if Set(listed) != open || listed.count != open.count {
                violations.append("\(name): the open entries are not the rows without an end (\(listed.count) entries, \(open.count) rows, \(open.subtracting(listed).count) of them missing)")
            }
            let keys = keysOf(index: interval.number)
            let storage = interval.open
            violations += storage.invariantViolations(keys: keys).map { "\(name), open entries: \($0)" }
        }
        return violations
    }

    /// What is wrong with the declared indexes' entries against the rows, empty when nothing
    /// is: each index holds one entry per row, for a live slot, with that row's sequence, and
    /// encoding the key the row keeps for it (``columns``); and the row keeps an end per interval
    /// index (``ends``). What an upsert that moves an entry, or one that leaves it because the key
    /// is the same, must preserve.
    ///
    /// Only in builds with `EVENTKERNEL_INTERNAL_CHECKS`.
    /// - Complexity: O(n) per index.
    func keyInvariantViolations() -> [String] {
        var violations: [String] = []
        let live = Set(slotsByID.slots)
        violations += slotsByID.invariantViolations(heads: heads).map { "id map: \($0)" }
        for number in columns.indices where columns[number].count != heads.count {
            violations.append("index \(number): \(columns[number].count) keys for \(heads.count) slots")
        }
        for number in columns.indices {
            violations += columns[number].invariantViolations().map { "index \(number)'s key column: \($0)" }
        }
        if ends.count != heads.count * intervals.count {
            violations.append("\(ends.count) interval ends for \(heads.count) slots of \(intervals.count)")
        }
        for number in indexes.indices {
            let storage = indexes[number]
            var seen: Set<Int32> = []
            var wrong = 0
            storage.scan(from: storage.startPosition, to: storage.endPosition, reversed: false) { entry in
                seen.insert(entry.slot)
                guard live.contains(entry.slot), Int(entry.slot) < heads.count, Int(entry.slot) < columns[number].count else { wrong += 1; return true }
                let encoded = NormalizedKey(key(entry.slot, number), descending: storage.descending)
                // A narrow entry (or one widened from it) keeps its encoding's words, not its
                // length: for an exact key only that it is exact matters to a comparison.
                let length = encoded.isExact ? 0 : encoded.length, entryLength = entry.key.isExact ? 0 : entry.key.length
                if heads.sequence(Int(entry.slot)) != entry.sequence || length != entryLength
                    || KeyLayout.narrowest(for: encoded, components: storage.descending.count) > storage.layout
                    || NormalizedKey.compare(encoded, entry.key, bytes: NormalizedKey.inlineBytes) != 0 {
                    wrong += 1
                }
                return true
            }
            if wrong > 0 { violations.append("index \(number): \(wrong) entries do not encode their row's key, sequence or a live slot") }
            if seen != live || storage.count != live.count {
                violations.append("index \(number): \(storage.count) entries for \(live.count) rows")
            }
            violations += storage.invariantViolations(keys: keysOf(index: number)).map { "index \(number): \($0)" }
        }
        return violations
    }

    /// The check after every mutation, O(1) per interval index: every row is counted once,
    /// in the open entries or the histogram (``intervalInvariantViolations()`` checks which).
    func checkIntervalCounts() {
        for interval in intervals {
            let counted = interval.buckets.reduce(0, +) + interval.open.count
            precondition(counted == count, "interval index \(interval.number) counts \(counted) of \(count) rows")
        }
    }
    #endif
}
