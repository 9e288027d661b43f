// Invariant checks of SlotTable, in the manner of swift-collections' `_BTree+Invariants.swift`:
// compiled only with `-DEVENTKERNEL_INTERNAL_CHECKS` (the test build), so that a release build
// carries neither the code nor a call.

import Foundation

extension SlotTable {
    #if EVENTKERNEL_INTERNAL_CHECKS
    /// What is wrong with the table, empty when nothing is: its size is 0 or a power of two of
    /// at least 16 that `shift` matches, the load factor is at most 3/4, `count` is the number of
    /// occupied buckets, and every entry is found from its home bucket: the probe sequence from
    /// there reaches it with no empty bucket between (which backward-shift deletion must keep)
    /// and no other entry of the same id before it. Given the rows, also that every entry's slot
    /// is a row whose id hashes to the entry's tag, and that no id is in the table twice.
    ///
    /// Only in builds with `EVENTKERNEL_INTERNAL_CHECKS`.
    /// - Parameter rows: The row table the slots index; `nil` checks the table alone.
    /// - Complexity: O(buckets × average probe length).
    func invariantViolations(rows: [ActivityRow]? = nil) -> [String] {
        var violations = layoutViolations()
        guard violations.isEmpty else { return violations }
        var occupied = 0
        for i in buckets.indices where buckets[i] != 0 {
            occupied += 1
            violations += entryViolations(at: i, rows: rows)
        }
        if occupied != count { violations.append("count is \(count) but \(occupied) buckets are occupied") }
        return violations
    }

    /// The size, shift and load-factor rules.
    private func layoutViolations() -> [String] {
        var violations: [String] = []
        if buckets.isEmpty {
            if count != 0 { violations.append("count is \(count) in an empty table") }
            return violations
        }
        if buckets.count < 16 || buckets.count & (buckets.count - 1) != 0 {
            violations.append("size \(buckets.count) is not a power of two of at least 16")
        } else if shift != UInt32(32 - buckets.count.trailingZeroBitCount) {
            violations.append("shift \(shift) does not match size \(buckets.count)")
        }
        if count * 4 > buckets.count * 3 { violations.append("load \(count)/\(buckets.count) is above 3/4") }
        return violations
    }

    /// Whether the entry in bucket `j` is found from its home bucket (and, with rows, is the
    /// first entry of its id on the way and indexes a row of its id).
    private func entryViolations(at j: Int, rows: [ActivityRow]?) -> [String] {
        let mask = buckets.count - 1
        let bucket = buckets[j]
        let tag = Self.tag(bucket)
        let slot = Int(Self.slot(bucket))
        var id: UUID?
        if let rows {
            guard slot >= 0 && slot < rows.count else { return ["bucket \(j) holds slot \(slot), outside the \(rows.count) rows"] }
            id = rows[slot].id
            if Self.hash(rows[slot].id) != tag { return ["bucket \(j): the tag is not the hash of row \(slot)'s id"] }
        }
        var i = home(tag)
        var steps = 0
        while i != j {
            let other = buckets[i]
            if other == 0 { return ["bucket \(j) is not reachable from its home bucket \(home(tag)): bucket \(i) on the way is empty"] }
            if let id, let rows, Self.tag(other) == tag, rows[Int(Self.slot(other))].id == id {
                return ["id \(id) is in buckets \(i) and \(j)"]
            }
            i = (i + 1) & mask
            steps += 1
            if steps > buckets.count { return ["bucket \(j) is not on its probe sequence"] }
        }
        return []
    }

    /// The entries of the run of occupied buckets around bucket `k` (and, when `k` is empty,
    /// of the runs ending before it and starting after it): what an insert into `k` or a
    /// backward shift ending at `k` changed.
    private func localViolations(around k: Int, rows: [ActivityRow]?) -> [String] {
        var violations = layoutViolations()
        guard violations.isEmpty, !buckets.isEmpty else { return violations }
        let mask = buckets.count - 1
        var start = k
        var steps = 0
        while buckets[(start - 1) & mask] != 0 && steps < buckets.count { start = (start - 1) & mask; steps += 1 }
        var i = start
        steps = 0
        // Through the run holding (or ending before) `k`, then the run after an empty `k`.
        while steps < buckets.count && (buckets[i] != 0 || i == k) {
            if buckets[i] != 0 { violations += entryViolations(at: i, rows: rows) }
            i = (i + 1) & mask
            steps += 1
        }
        return violations
    }
    #endif

    /// Stops the process with a description of what is wrong when the table breaks an
    /// invariant (see `invariantViolations(rows:)`); does nothing unless built with
    /// `EVENTKERNEL_INTERNAL_CHECKS`.
    func checkInvariants(rows: [ActivityRow]? = nil) {
        #if EVENTKERNEL_INTERNAL_CHECKS
        let violations = invariantViolations(rows: rows)
        precondition(violations.isEmpty, "SlotTable: \(violations.joined(separator: "; "))")
        #endif
    }

    /// The check at the end of every mutation: the whole table while it is small (up to 4,096
    /// buckets) or `around` is `nil` (after a rehash or a bulk load, themselves O(n)), else the
    /// run of buckets around bucket `around`, the one the mutation changed. Empty, and so free,
    /// without `EVENTKERNEL_INTERNAL_CHECKS`.
    @inlinable @inline(__always)
    func _invariantCheck(around k: Int?, rows: [ActivityRow]?) {
        #if EVENTKERNEL_INTERNAL_CHECKS
        _checkAfterMutation(around: k, rows: rows)
        #endif
    }

    #if EVENTKERNEL_INTERNAL_CHECKS
    @usableFromInline
    func _checkAfterMutation(around k: Int?, rows: [ActivityRow]?) {
        let violations = if let k, buckets.count > 4096 { localViolations(around: k, rows: rows) } else { invariantViolations(rows: rows) }
        precondition(violations.isEmpty, "SlotTable: \(violations.joined(separator: "; "))")
    }
    #endif
}
