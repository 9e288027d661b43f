public import Foundation
import KernelPrimitives

/// The id → slot map: an open-addressing hash table of row slots.
///
/// A `[UUID: Int32]` dictionary stores each 16-byte key again next to the
/// row that already holds it, about 42 bytes per activity at 1M entries.
/// Storing only the 4-byte slot and comparing ids through the row table
/// costs 16-32 bytes per activity (8-byte buckets) and hashes faster (ids are mostly random,
/// so a cheap multiplicative mix suffices; no per-process seeding is needed
/// since ids do not come from untrusted peers in an embedded store).
/// Linear probing with backward-shift deletion keeps it tombstone-free.
@usableFromInline
struct SlotTable: Sendable {
    /// Power-of-two sized. 0 is empty; otherwise the high 32 bits are the
    /// id's hash (which also picks the home bucket, so rehashing never reads
    /// rows) and the low 32 bits are `slot + 1`. Comparing the hash first
    /// means a probe touches a row, a likely cache miss, only on a real hit.
    @usableFromInline var buckets: [UInt64] = []
    @usableFromInline var count = 0
    /// The home bucket is the hash's top bits: `hash >> shift`. Using the
    /// top bits means sorting entries by hash sorts them by home bucket,
    /// which is what makes `bulkLoad` write the table sequentially.
    @usableFromInline var shift: UInt32 = 32

    @inlinable
    init() {}

    @inlinable
    func home(_ tag: UInt32) -> Int { Int(truncatingIfNeeded: UInt64(tag) >> UInt64(shift)) }

    @inlinable
    static func hash(_ id: UUID) -> UInt32 {
        let (a, b) = withUnsafeBytes(of: id.uuid) { raw in
            (raw.loadUnaligned(as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
        var h = a &* 0x9E37_79B9_7F4A_7C15 ^ (b &* 0xC2B2_AE3D_27D4_EB4F)
        h ^= h >> 29
        h = h &* 0xBF58_476D_1CE4_E5B9
        return UInt32(truncatingIfNeeded: h >> 32)
    }

    @inlinable
    static func slot(_ bucket: UInt64) -> Int32 { Int32(truncatingIfNeeded: bucket & 0xFFFF_FFFF) - 1 }

    @inlinable
    static func tag(_ bucket: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: bucket >> 32) }

    /// Ensures room for `capacity` entries at a load factor of at most 3/4.
    mutating func reserveCapacity(_ capacity: Int) {
        var size = 16
        while size * 3 < capacity * 4 { size *= 2 }
        if size > buckets.count { rehash(size: size) }
    }

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
        _invariantCheck(around: nil, rows: nil)
    }

    /// The slot holding `id`, if any.
    ///
    /// - Complexity: O(1) on average.
    @inlinable
    func find(_ id: UUID, rows: [ActivityRow]) -> Int32? {
        guard !buckets.isEmpty else { return nil }
        let mask = buckets.count - 1
        let tag = Self.hash(id)
        var i = home(tag)
        while true {
            let bucket = buckets[i]
            if bucket == 0 { return nil }
            if Self.tag(bucket) == tag && rows[Int(Self.slot(bucket))].id == id { return Self.slot(bucket) }
            i = (i + 1) & mask
        }
    }

    /// Adds `slot`, whose row (already in `rows`) has `id`; returns `false`
    /// without changes if `id` is present.
    ///
    /// - Complexity: O(1) amortized.
    mutating func insert(_ slot: Int32, id: UUID, rows: [ActivityRow]) -> Bool {
        if (count + 1) * 4 > buckets.count * 3 {
            rehash(size: Swift.max(16, buckets.count * 2))
        }
        let mask = buckets.count - 1
        let tag = Self.hash(id)
        var i = home(tag)
        while buckets[i] != 0 {
            let bucket = buckets[i]
            if Self.tag(bucket) == tag && rows[Int(Self.slot(bucket))].id == id { return false }
            i = (i + 1) & mask
        }
        buckets[i] = UInt64(tag) << 32 | UInt64(UInt32(bitPattern: slot) + 1)
        count += 1
        _invariantCheck(around: i, rows: rows)
        return true
    }

    /// Loads the home bucket of `id` into the cache (its value is not needed): a fold calls it
    /// a few events ahead, so that the random access of each lookup overlaps other work.
    @inlinable
    func prefetch(_ id: UUID) -> UInt64 {
        guard !buckets.isEmpty else { return 0 }
        return buckets.withUnsafeBufferPointer { $0[home(Self.hash(id))] }
    }

    /// Looks `id` up for an insert, with one probe: its slot if present, else the empty
    /// bucket where ``insert(_:atBucket:tag:)`` puts it (the table grows first, so that the
    /// bucket stays valid until then).
    ///
    /// - Complexity: O(1) on average.
    @inlinable
    mutating func probeForInsert(_ id: UUID, rows: [ActivityRow]) -> (existing: Int32?, bucket: Int, tag: UInt32) {
        if (count + 1) * 4 > buckets.count * 3 {
            growForInsert()
        }
        let mask = buckets.count - 1
        let tag = Self.hash(id)
        var i = home(tag)
        while buckets[i] != 0 {
            let bucket = buckets[i]
            if Self.tag(bucket) == tag && rows[Int(Self.slot(bucket))].id == id { return (Self.slot(bucket), i, tag) }
            i = (i + 1) & mask
        }
        return (nil, i, tag)
    }

    /// Stores `slot` in the empty bucket ``probeForInsert(_:rows:)`` returned (nothing changed
    /// the table since).
    @inlinable
    mutating func insert(_ slot: Int32, atBucket bucket: Int, tag: UInt32) {
        buckets[bucket] = UInt64(tag) << 32 | UInt64(UInt32(bitPattern: slot) + 1)
        count += 1
        _invariantCheck(around: bucket, rows: nil)
    }

    @usableFromInline
    mutating func growForInsert() {
        rehash(size: Swift.max(16, buckets.count * 2))
    }

    /// Removes `id` and returns its slot, if present.
    ///
    /// - Complexity: O(1) on average.
    mutating func remove(_ id: UUID, rows: [ActivityRow]) -> Int32? {
        guard !buckets.isEmpty else { return nil }
        let mask = buckets.count - 1
        let tag = Self.hash(id)
        var i = home(tag)
        while true {
            let bucket = buckets[i]
            if bucket == 0 { return nil }
            if Self.tag(bucket) == tag && rows[Int(Self.slot(bucket))].id == id { break }
            i = (i + 1) & mask
        }
        let found = Self.slot(buckets[i])
        count -= 1
        // Backward-shift: pull later members of the probe run into the hole
        // when their home bucket does not lie between the hole and them.
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
        _invariantCheck(around: i, rows: rows)
        return found
    }

    /// Replaces the contents with `rows[0..<n]` (slot = row index), writing
    /// the table in bucket order instead of at random: entries are radix
    /// sorted by hash, so each cache line of the table is filled once. At 1M
    /// rows this is several times faster than inserting one by one.
    ///
    /// - Returns: The index of a row whose id repeats an earlier one, or
    ///   `nil` if all ids are distinct.
    /// - Complexity: O(n)
    mutating func bulkLoad(rows: [ActivityRow]) -> Int? {
        let n = rows.count
        buckets = []
        count = 0
        reserveCapacity(n)
        // An empty table needs nothing.
        guard n > 0 else { return nil }
        var keys = [UInt64](initializingInPlace: n) { buffer, initialized in
            for slot in 0..<n {
                buffer[slot] = UInt64(Self.hash(rows[slot].id)) << 32 | UInt64(UInt32(slot) + 1)
            }
            initialized = n
        }
        // LSD radix sort on the 32 hash bits, two 16-bit digits.
        var scratch = keys
        for digitShift in [UInt64(32), 48] {
            var counts = [Int](repeating: 0, count: 1 << 16)
            keys.withUnsafeBufferPointer { src in
                counts.withUnsafeMutableBufferPointer { c in
                    for k in src { c[Int((k >> digitShift) & 0xFFFF)] += 1 }
                    var sum = 0
                    for d in 0..<c.count { let v = c[d]; c[d] = sum; sum += v }
                }
                scratch.withUnsafeMutableBufferPointer { dst in
                    counts.withUnsafeMutableBufferPointer { c in
                        for k in src {
                            let d = Int((k >> digitShift) & 0xFFFF)
                            dst[c[d]] = k
                            c[d] += 1
                        }
                    }
                }
            }
            swap(&keys, &scratch)
        }
        let mask = buckets.count - 1
        let shift = UInt64(self.shift)
        var duplicate: Int? = nil
        buckets.withUnsafeMutableBufferPointer { table in
            var runStart = 0
            for k in 0..<n {
                let key = keys[k]
                let tag = Self.tag(key)
                if k > 0 && Self.tag(keys[k - 1]) == tag {
                    // Equal hashes are adjacent: compare ids within the run.
                    let id = rows[Int(Self.slot(key))].id
                    for r in runStart..<k where rows[Int(Self.slot(keys[r]))].id == id {
                        duplicate = Int(Self.slot(key))
                    }
                } else {
                    runStart = k
                }
                var i = Int(UInt64(tag) >> shift)
                while table[i] != 0 { i = (i + 1) & mask }
                table[i] = key
            }
        }
        count = n
        // A table with a repeated id is refused by the caller; any other must be whole.
        if duplicate == nil { _invariantCheck(around: nil, rows: rows) }
        return duplicate
    }
}
