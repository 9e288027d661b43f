public import Foundation

/// One stored activity, compact: 40 bytes with no references, so the row
/// table is a single flat allocation the ARC never touches.
@usableFromInline
struct ActivityRow: Sendable {
    @usableFromInline var id: UUID
    /// `startDate.timeIntervalSinceReferenceDate`.
    @usableFromInline var start: Double
    /// `endDate.timeIntervalSinceReferenceDate`, or NaN while active (and for
    /// free slots, which are only reachable through the free list).
    @usableFromInline var end: Double
    /// Index into the interned type table.
    @usableFromInline var type: UInt32

    @inlinable
    init(id: UUID, start: Double, end: Double, type: UInt32) {
        self.id = id
        self.start = start
        self.end = end
        self.type = type
    }
}

/// An entry of a sorted index: the start key, inline so that searches and
/// window scans never leave the chunk, and the row slot. Ties on `start` are
/// broken by the row's id, which costs a row lookup but only on exact ties.
@usableFromInline
struct IndexEntry: Sendable {
    @usableFromInline var start: Double
    @usableFromInline var slot: Int32

    @inlinable
    init(start: Double, slot: Int32) {
        self.start = start
        self.slot = slot
    }
}

/// A position in a `SortedSlotIndex`; `(chunks.count, 0)` is the end.
@usableFromInline
struct IndexPosition: Comparable, Sendable {
    @usableFromInline var chunk: Int
    @usableFromInline var offset: Int

    @inlinable
    init(chunk: Int, offset: Int) {
        self.chunk = chunk
        self.offset = offset
    }

    @inlinable
    static func < (a: IndexPosition, b: IndexPosition) -> Bool {
        a.chunk != b.chunk ? a.chunk < b.chunk : a.offset < b.offset
    }
}

/// A sorted multiset of `(start, id)` keys stored as a chunked sorted array.
///
/// Why a chunked array rather than a B+-tree: at 1M entries a two-level
/// structure (about 1,000 chunks of at most `maxChunk` entries plus an array
/// of each chunk's last entry) already gives O(log n) search, insertion and
/// removal cost dominated by a ~8 KB `memmove`, while scans are plain linear
/// walks over contiguous memory. It is far less code than a tree, has no
/// per-node pointers, and bulk building from sorted input is a simple O(n)
/// slicing. Appends at the end (the common, chronological case) fill chunks
/// completely, so memory stays near 16 bytes per entry.
@usableFromInline
struct SortedSlotIndex: Sendable {
    /// The largest chunk; a chunk that grows beyond it is split.
    @usableFromInline static var maxChunk: Int { 1024 }

    @usableFromInline var chunks: [[IndexEntry]] = []
    /// The last (largest) entry of each chunk, the summary binary searches
    /// run over before touching a chunk.
    @usableFromInline var lastEntries: [IndexEntry] = []
    @usableFromInline var count: Int = 0

    @inlinable
    init() {}

    @inlinable
    var startPosition: IndexPosition { IndexPosition(chunk: 0, offset: 0) }

    @inlinable
    var endPosition: IndexPosition { IndexPosition(chunk: chunks.count, offset: 0) }

    /// The first position whose entry does not satisfy `isBefore`, which must
    /// hold for a prefix of the index.
    ///
    /// - Complexity: O(log n)
    @inlinable
    func partitionPoint(_ isBefore: (IndexEntry) -> Bool) -> IndexPosition {
        var lo = 0
        var hi = lastEntries.count
        lastEntries.withUnsafeBufferPointer { lasts in
            while lo < hi {
                let mid = (lo &+ hi) >> 1
                if isBefore(lasts[mid]) { lo = mid &+ 1 } else { hi = mid }
            }
        }
        if lo == chunks.count { return endPosition }
        let offset = chunks[lo].withUnsafeBufferPointer { entries in
            var l = 0
            var h = entries.count
            while l < h {
                let mid = (l &+ h) >> 1
                if isBefore(entries[mid]) { l = mid &+ 1 } else { h = mid }
            }
            return l
        }
        return IndexPosition(chunk: lo, offset: offset)
    }

    /// The first position with `start >= value` (or `> value` if `strict`).
    @inlinable
    func position(ofStart value: Double, strict: Bool) -> IndexPosition {
        strict ? partitionPoint { $0.start <= value } : partitionPoint { $0.start < value }
    }

    /// The first position with key `>= (start, id)` (or `>` if `strict`).
    @inlinable
    func position(ofKey start: Double, id: UUID, strict: Bool, rows: [ActivityRow]) -> IndexPosition {
        if strict {
            return partitionPoint { e in
                e.start < start || (e.start == start && !ActivityCursor.idLess(id, rows[Int(e.slot)].id))
            }
        }
        return partitionPoint { e in
            e.start < start || (e.start == start && ActivityCursor.idLess(rows[Int(e.slot)].id, id))
        }
    }

    /// Inserts an entry in key order.
    ///
    /// - Complexity: O(log n + maxChunk)
    @usableFromInline
    mutating func insert(_ entry: IndexEntry, id: UUID, rows: [ActivityRow]) {
        count += 1
        if chunks.isEmpty {
            chunks.append([entry])
            lastEntries.append(entry)
            return
        }
        var p = position(ofKey: entry.start, id: id, strict: false, rows: rows)
        if p.chunk == chunks.count {
            p = IndexPosition(chunk: chunks.count - 1, offset: chunks[chunks.count - 1].count)
        }
        let c = p.chunk
        chunks[c].insert(entry, at: p.offset)
        let n = chunks[c].count
        if n > Self.maxChunk {
            // Appending at the very end is the chronological common case:
            // keep the left chunk full so sequential inserts pack densely.
            let atEnd = c == chunks.count - 1 && p.offset == n - 1
            let split = atEnd ? Self.maxChunk : n / 2
            let left = Array(chunks[c][..<split])
            let right = Array(chunks[c][split...])
            chunks[c] = left
            chunks.insert(right, at: c + 1)
            lastEntries[c] = left[left.count - 1]
            lastEntries.insert(right[right.count - 1], at: c + 1)
        } else {
            lastEntries[c] = chunks[c][n - 1]
        }
    }

    /// Removes the entry for `slot` with key `(start, id)`, if present.
    ///
    /// - Complexity: O(log n + maxChunk)
    @usableFromInline
    mutating func remove(start: Double, id: UUID, slot: Int32, rows: [ActivityRow]) {
        let p = position(ofKey: start, id: id, strict: false, rows: rows)
        guard p.chunk < chunks.count, chunks[p.chunk][p.offset].slot == slot else { return }
        count -= 1
        let c = p.chunk
        chunks[c].remove(at: p.offset)
        let n = chunks[c].count
        if n == 0 {
            chunks.remove(at: c)
            lastEntries.remove(at: c)
            return
        }
        lastEntries[c] = chunks[c][n - 1]
        // Merge an underfull chunk into its successor so deletes cannot leave
        // a long tail of tiny chunks (which would bloat the summary).
        if n < Self.maxChunk / 8, c + 1 < chunks.count, n + chunks[c + 1].count <= Self.maxChunk {
            let merged = chunks[c] + chunks[c + 1]
            chunks[c + 1] = merged
            chunks.remove(at: c)
            lastEntries.remove(at: c)
        }
    }

    /// Appends an entry known to sort after every existing one; used by the
    /// O(n) bulk build.
    @inlinable
    mutating func appendSorted(_ entry: IndexEntry) {
        count += 1
        if let last = chunks.indices.last, chunks[last].count < Self.maxChunk {
            chunks[last].append(entry)
            lastEntries[last] = entry
        } else {
            var chunk: [IndexEntry] = []
            chunk.reserveCapacity(Self.maxChunk)
            chunk.append(entry)
            chunks.append(chunk)
            lastEntries.append(entry)
        }
    }

    /// The entry at a valid, non-end position.
    @inlinable
    subscript(position: IndexPosition) -> IndexEntry {
        chunks[position.chunk][position.offset]
    }

    /// The position after `p`.
    @inlinable
    func successor(of p: IndexPosition) -> IndexPosition {
        if p.offset + 1 < chunks[p.chunk].count { return IndexPosition(chunk: p.chunk, offset: p.offset + 1) }
        return IndexPosition(chunk: p.chunk + 1, offset: 0)
    }

    /// The position before `p`, which must not be the start.
    @inlinable
    func predecessor(of p: IndexPosition) -> IndexPosition {
        if p.offset > 0 { return IndexPosition(chunk: p.chunk, offset: p.offset - 1) }
        return IndexPosition(chunk: p.chunk - 1, offset: chunks[p.chunk - 1].count - 1)
    }

    /// Calls `body` on each entry in `[lo, hi)`, forwards or backwards, until
    /// it returns `false`.
    ///
    /// - Complexity: O(k) for k visited entries.
    @inlinable
    func scan(from lo: IndexPosition, to hi: IndexPosition, reversed: Bool, _ body: (IndexEntry) -> Bool) {
        guard lo < hi else { return }
        if !reversed {
            var c = lo.chunk
            while c <= hi.chunk && c < chunks.count {
                let from = c == lo.chunk ? lo.offset : 0
                let keepGoing = chunks[c].withUnsafeBufferPointer { entries -> Bool in
                    let to = c == hi.chunk ? hi.offset : entries.count
                    var i = from
                    while i < to {
                        if !body(entries[i]) { return false }
                        i += 1
                    }
                    return true
                }
                if !keepGoing { return }
                c += 1
            }
        } else {
            var c = hi.offset == 0 ? hi.chunk - 1 : hi.chunk
            while c >= lo.chunk {
                let keepGoing = chunks[c].withUnsafeBufferPointer { entries -> Bool in
                    let from = c == lo.chunk ? lo.offset : 0
                    var i = (c == hi.chunk ? hi.offset : entries.count) - 1
                    while i >= from {
                        if !body(entries[i]) { return false }
                        i -= 1
                    }
                    return true
                }
                if !keepGoing { return }
                c -= 1
            }
        }
    }
}
