/// The id → slot map of an ``EntityTable`` (`IndexedRows.slotsByID`): an open-addressing hash
/// table of row slots that stores no id, comparing ids through the rows' heads instead, as
/// Activities' `SlotTable` does for UUIDs.
///
/// Why: a `[EntityID: Int32]` dictionary stores each id again (a 17-byte enum, 24 with its
/// stride, plus the 4-byte slot, at a load factor of 3/8 to 3/4: about 50 bytes per entity at
/// 300,000) beside the row head that already holds it. A bucket here is 8 bytes: the id's hash
/// in the high half (which also picks the home bucket, so growing never reads a row, and is
/// compared first, so a probe reads a row head only on a likely hit) and `slot + 1` in the low
/// half (0: empty). Linear probing with backward-shift deletion keeps it free of tombstones.
struct SlotMap: Sendable {
    /// Power-of-two sized (or empty).
    private(set) var buckets: [UInt64] = []
    /// The number of ids.
    private(set) var count = 0
    /// The home bucket of a hash is its top bits: `hash >> shift`.
    private var shift: UInt32 = 32

    init() {}

    /// The 32-bit hash of `id`: the top half of the standard, per-process seeded hasher's value
    /// (as `EntityID.hash(into:)` feeds it: a UUID's two words, a string's bytes as `==` compares
    /// them). Seeded, because ids come from outside (imports, client-chosen UUIDs): an unseeded
    /// mix is invertible, so crafted ids could share a home bucket and make every probe O(n).
    /// Nothing depends on the value beyond this process: a bucket is empty by its slot half.
    @inline(__always)
    static func hash(_ id: EntityID) -> UInt32 {
        var hasher = Hasher()
        id.hash(into: &hasher)
        return UInt32(truncatingIfNeeded: UInt64(bitPattern: Int64(hasher.finalize())) >> 32)
    }

    @inline(__always)
    private func home(_ tag: UInt32) -> Int { Int(truncatingIfNeeded: UInt64(tag) >> UInt64(shift)) }

    @inline(__always)
    private static func slot(_ bucket: UInt64) -> Int32 { Int32(truncatingIfNeeded: bucket & 0xFFFF_FFFF) &- 1 }

    @inline(__always)
    private static func tag(_ bucket: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: bucket >> 32) }

    /// The slot of the row with `id`, if any.
    /// - Parameter heads: The rows' heads, by slot (where the ids are).
    /// - Complexity: O(1) on average.
    func find(_ id: EntityID, heads: RowHeads) -> Int32? {
        guard !buckets.isEmpty else { return nil }
        let mask = buckets.count - 1
        let tag = Self.hash(id)
        var i = home(tag)
        while true {
            let bucket = buckets[i]
            if bucket == 0 { return nil }
            if Self.tag(bucket) == tag && heads.holds(Int(Self.slot(bucket)), id) { return Self.slot(bucket) }
            i = (i + 1) & mask
        }
    }

    /// Adds `slot`, whose head (already in `heads`) holds the id.
    /// - Returns: `false`, changing nothing, when the id is already present.
    /// - Complexity: O(1) amortized.
    mutating func insert(_ slot: Int32, heads: RowHeads) -> Bool {
        precondition(slot >= 0 && Int(slot) < heads.count, "SlotMap: slot \(slot) has no row head")
        if (count + 1) * 4 > buckets.count * 3 { rehash(size: Swift.max(16, buckets.count * 2)) }
        let id = heads[Int(slot)].id
        let mask = buckets.count - 1
        let tag = Self.hash(id)
        var i = home(tag)
        while buckets[i] != 0 {
            let bucket = buckets[i]
            if Self.tag(bucket) == tag && heads.holds(Int(Self.slot(bucket)), id) { return false }
            i = (i + 1) & mask
        }
        buckets[i] = UInt64(tag) << 32 | UInt64(UInt32(bitPattern: slot) &+ 1)
        count += 1
        #if EVENTKERNEL_INTERNAL_CHECKS
        checkProbeRun(around: i, heads: heads)
        #endif
        return true
    }

    /// Adds every slot of `heads` from `start` on (a snapshot's rows, their heads appended in
    /// order), in the order of their home buckets rather than of their slots. For a restore
    /// only: on a repeated id it stops with some of the slots added, so a live table's map,
    /// which could not be discarded, must never be passed (``IndexedRows/appendRestored(_:)``
    /// requires empty rows).
    ///
    /// Why: inserting slot after slot reads a random bucket per id, a cache miss each in a
    /// table of megabytes (88% of ``insert(_:heads:)``'s time at a snapshot open, perf
    /// annotate); in home order the probes walk the buckets front to back. Linear probing finds
    /// an id wherever in its run it was placed, so the order changes no answer.
    /// - Parameters:
    ///   - start: The first slot to add; the slots before it, and no others, are in the map
    ///     already (a precondition).
    ///   - heads: The rows' heads, by slot (where the ids are).
    /// - Returns: A slot whose id is present already (the map then holds some of the slots and
    ///   is to be discarded), or `nil` when every slot was added.
    mutating func insertAll(from start: Int, heads: RowHeads) -> Int32? {
        precondition(count == start, "SlotMap.insertAll: \(count) ids mapped, not the \(start) slots before the first added")
        guard start < heads.count else { return nil }
        reserveCapacity(count + heads.count - start)
        // Each slot's bucket as it is to be stored, then put in order of the hash's top bits
        // (the home is the hash's top bits) by one counting pass into about a bin per entry
        // (the next power of two, at most 2^16 bins): the walk then goes front to back but for
        // the order within a bin, which is as fine as it needs (a comparison sort was half of
        // the inserts' time, perf). The pass is stable, so of two equal ids the later slot is
        // the one reported.
        let n = heads.count - start
        var pending: [UInt64] = []
        pending.reserveCapacity(n)
        for slot in start..<heads.count {
            pending.append(UInt64(Self.hash(heads[slot].id)) << 32 | UInt64(UInt32(truncatingIfNeeded: slot) &+ 1))
        }
        let bits = Swift.max(1, Swift.min(16, Int.bitWidth - n.leadingZeroBitCount))
        let binShift = UInt64(64 - bits)
        var starts = [Int](repeating: 0, count: (1 << bits) + 1)
        for entry in pending { starts[Int(entry >> binShift) + 1] += 1 }
        for bin in 0..<(1 << bits) { starts[bin + 1] += starts[bin] }
        var ordered = [UInt64](repeating: 0, count: n)
        for entry in pending {
            let bin = Int(entry >> binShift)
            ordered[starts[bin]] = entry
            starts[bin] += 1
        }
        let mask = buckets.count - 1
        for entry in ordered {
            let tag = Self.tag(entry)
            var i = home(tag)
            while buckets[i] != 0 {
                let bucket = buckets[i]
                if Self.tag(bucket) == tag && heads.holds(Int(Self.slot(bucket)), heads[Int(Self.slot(entry))].id) { return Self.slot(entry) }
                i = (i + 1) & mask
            }
            buckets[i] = entry
            count += 1
            #if EVENTKERNEL_INTERNAL_CHECKS
            checkProbeRun(around: i, heads: heads)
            #endif
        }
        return nil
    }

    /// Removes `id`.
    /// - Returns: Its slot, if it was present.
    /// - Complexity: O(1) on average.
    mutating func remove(_ id: EntityID, heads: RowHeads) -> Int32? {
        guard !buckets.isEmpty else { return nil }
        let mask = buckets.count - 1
        let tag = Self.hash(id)
        var i = home(tag)
        while true {
            let bucket = buckets[i]
            if bucket == 0 { return nil }
            if Self.tag(bucket) == tag && heads.holds(Int(Self.slot(bucket)), id) { break }
            i = (i + 1) & mask
        }
        let found = Self.slot(buckets[i])
        count -= 1
        // Backward shift: a later member of the probe run moves into the hole unless its home
        // lies cyclically in (hole, its bucket].
        var j = i
        while true {
            j = (j + 1) & mask
            let bucket = buckets[j]
            if bucket == 0 { break }
            let home = home(Self.tag(bucket))
            let between = i <= j ? (i < home && home <= j) : (i < home || home <= j)
            if !between {
                buckets[i] = bucket
                i = j
            }
        }
        buckets[i] = 0
        #if EVENTKERNEL_INTERNAL_CHECKS
        // The final hole ends a run, so the run to check is the one after it: what a wrong
        // shift would cut off from its home.
        checkProbeRun(around: (i &+ 1) & mask, heads: heads)
        #endif
        return found
    }

    /// Makes room for `capacity` ids at a load factor of at most 3/4.
    mutating func reserveCapacity(_ capacity: Int) {
        var size = 16
        while size * 3 < capacity * 4 { size *= 2 }
        if size > buckets.count { rehash(size: size) }
    }

    /// Every slot in the map, in bucket order.
    var slots: [Int32] { buckets.compactMap { $0 == 0 ? nil : Self.slot($0) } }

    private mutating func rehash(size: Int) {
        let old = buckets
        buckets = Array(repeating: 0, count: size)
        shift = UInt32(32 - size.trailingZeroBitCount)
        let mask = size - 1
        let shift = UInt64(self.shift)
        buckets.withUnsafeMutableBufferPointer { new in
            for bucket in old where bucket != 0 {
                var i = Int(UInt64(Self.tag(bucket)) >> shift)
                while new[i] != 0 { i = (i + 1) & mask }
                new[i] = bucket
            }
        }
    }

    #if EVENTKERNEL_INTERNAL_CHECKS
    /// What is wrong with the map against `heads`, empty when nothing is: a power-of-two size
    /// whose shift picks home buckets, a load factor of at most 3/4, the count of occupied
    /// buckets, each bucket's hash that of its row's id, each slot once, and every id found
    /// from its home bucket (no empty bucket between its home and it).
    ///
    /// Only in builds with `EVENTKERNEL_INTERNAL_CHECKS`.
    /// - Complexity: O(n).
    func invariantViolations(heads: RowHeads) -> [String] {
        var violations: [String] = []
        if !buckets.isEmpty {
            if buckets.count & (buckets.count - 1) != 0 { violations.append("\(buckets.count) buckets, not a power of two") }
            if Int(32 - shift) != buckets.count.trailingZeroBitCount { violations.append("shift \(shift) for \(buckets.count) buckets") }
        }
        if count * 4 > buckets.count * 3 { violations.append("\(count) ids in \(buckets.count) buckets, more than 3/4") }
        let occupied = buckets.reduce(0) { $0 + ($1 == 0 ? 0 : 1) }
        if occupied != count { violations.append("count is \(count) but \(occupied) buckets are occupied") }
        var seen = Set<Int32>()
        for i in buckets.indices where buckets[i] != 0 {
            let slot = Self.slot(buckets[i])
            guard slot >= 0, Int(slot) < heads.count else { violations.append("bucket \(i) holds slot \(slot), which has no head"); continue }
            if !seen.insert(slot).inserted { violations.append("slot \(slot) is in two buckets") }
            if Self.tag(buckets[i]) != Self.hash(heads[Int(slot)].id) { violations.append("bucket \(i) holds a hash that is not its id's") }
            if find(heads[Int(slot)].id, heads: heads) != slot { violations.append("the id of slot \(slot) is not found from its home bucket") }
        }
        return violations
    }

    /// Gives the first occupied bucket another hash: for the tests of the checks.
    mutating func corruptForTesting() {
        guard let i = buckets.firstIndex(where: { $0 != 0 }) else { return }
        buckets[i] ^= 1 << 40
    }

    /// Empties the bucket of `id` without the backward shift (a broken removal) and returns
    /// what the per-removal check then reports: for the tests of the checks.
    mutating func removeWithoutShiftForTesting(_ id: EntityID, heads: RowHeads) -> String? {
        guard let slot = find(id, heads: heads), let i = buckets.firstIndex(where: { $0 != 0 && Self.slot($0) == slot }) else { return nil }
        buckets[i] = 0
        count -= 1
        return probeRunViolation(around: (i &+ 1) & (buckets.count - 1), heads: heads)
    }

    /// The check after every mutation: the probe run around bucket `i` is intact (every
    /// member reachable from its home without crossing an empty bucket); O(run length).
    private func checkProbeRun(around i: Int, heads: RowHeads) {
        if let violation = probeRunViolation(around: i, heads: heads) { preconditionFailure("SlotMap: \(violation)") }
    }

    /// What ``checkProbeRun(around:heads:)`` finds wrong, if anything.
    private func probeRunViolation(around i: Int, heads: RowHeads) -> String? {
        let mask = buckets.count - 1
        var j = (i &- 1) & mask
        for _ in 0..<buckets.count {
            j = (j + 1) & mask
            let bucket = buckets[j]
            if bucket == 0 { break }
            var k = home(Self.tag(bucket))
            while k != j {
                if buckets[k] == 0 { return "bucket \(j) is cut off from its home bucket \(home(Self.tag(bucket)))" }
                k = (k + 1) & mask
            }
            if Self.tag(bucket) != Self.hash(heads[Int(Self.slot(bucket))].id) { return "bucket \(j) holds a hash that is not its id's" }
        }
        return nil
    }
    #endif
}
