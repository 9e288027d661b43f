/// A position in a ``ChunkedSortedArray``: a chunk and an offset in it; `(chunks.count, 0)` is
/// the end.
@_spi(Indexing) public struct ChunkedPosition: Comparable, Sendable {
    /// The chunk.
    public var chunk: Int
    /// The offset in the chunk.
    public var offset: Int

    @inlinable
    public init(chunk: Int, offset: Int) {
        self.chunk = chunk
        self.offset = offset
    }

    @inlinable
    public static func < (a: ChunkedPosition, b: ChunkedPosition) -> Bool {
        a.chunk != b.chunk ? a.chunk < b.chunk : a.offset < b.offset
    }
}

/// Public only to the `Indexing` SPI (`@_spi(Indexing) import EventKernel`), not API: `package`
/// access would do, but the compiler does not specialize `package` inlinable code in other
/// modules (measured: Activities' appends called the generic `Array.insert`, two mallocs per
/// activity), and these methods are the inner loop of every index.
///
/// A sorted multiset stored as a chunked sorted array: the ordered index under every
/// repository (the activity index's date and type indexes, and the declared indexes of
/// ``EventSourcedRepository``).
///
/// Why a chunked array rather than a B+-tree (nothing in the allowed packages provides an
/// ordered multiset): at 1M entries a two-level structure (about 1,000 to 7,000 chunks of at
/// most ``maxChunk`` entries plus an array of each chunk's last entry) already gives O(log n)
/// search, and insertion and removal cost dominated by one memmove of at most a chunk, while
/// scans are plain walks over contiguous memory. It is far less code than a tree, has no
/// per-node pointers, and bulk building from sorted input is O(n). Appends at the end (the
/// chronological case) fill chunks completely, so memory stays near one element per entry.
///
/// The order is the caller's: every search takes an `isBefore` predicate that must hold for a
/// prefix of the array, so one structure serves keys compared in any way (typed keys, composite
/// keys with per-component directions, ties broken by a row lookup).
@_spi(Indexing) public struct ChunkedSortedArray<Element: Sendable>: Sendable {
    /// The largest chunk; a chunk that grows beyond it is split: 1,024 entries, or 16 KiB of
    /// entries for larger ones. An insert moves half a chunk on average, so the bound is in
    /// bytes: the generic repository's 72-byte entries moved 36 KiB per insert per index at
    /// 1,024 (a fifth of a ledger add, measured with `perf`), where the activity index's
    /// 16-byte entries move 8 KiB.
    @inlinable public static var maxChunk: Int { max(64, min(1024, 16_384 / MemoryLayout<Element>.stride)) }

    @usableFromInline var chunks: [[Element]] = []
    /// The last (largest) element of each chunk, the summary binary searches run over before
    /// touching a chunk.
    @usableFromInline var lastEntries: [Element] = []
    /// The number of elements.
    @usableFromInline var storedCount: Int = 0
    /// The number of elements.
    @inlinable public var count: Int { storedCount }

    @inlinable
    public init() {}

    @inlinable
    public var isEmpty: Bool { count == 0 }

    /// Each chunk's size, in order (for tests of the layout).
    public var chunkSizes: [Int] { chunks.map(\.count) }

    @inlinable
    public var startPosition: ChunkedPosition { ChunkedPosition(chunk: 0, offset: 0) }

    @inlinable
    public var endPosition: ChunkedPosition { ChunkedPosition(chunk: chunks.count, offset: 0) }

    /// The first position whose element does not satisfy `isBefore`, which must hold for a
    /// prefix of the array.
    /// - Complexity: O(log n)
    @inlinable
    public func partitionPoint(_ isBefore: (Element) -> Bool) -> ChunkedPosition {
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
        return ChunkedPosition(chunk: lo, offset: offset)
    }

    /// Inserts `element` at `position` (from ``partitionPoint(_:)`` with the element's own
    /// key, so that order is kept).
    /// - Complexity: O(log n + maxChunk)
    @inlinable
    public mutating func insert(_ element: Element, at position: ChunkedPosition) {
        storedCount += 1
        if chunks.isEmpty {
            appendChunk(element)
            _invariantCheck(near: 0)
            return
        }
        var c = position.chunk
        var offset = position.offset
        if c == chunks.count {
            c = chunks.count - 1
            offset = chunks[c].count
        }
        // A full chunk is split before the insert, never grown: growing would reallocate the
        // chunk only for the split to copy both halves into arrays of exactly their size, which
        // the next insert into either would grow again (one to three 8-32 KiB allocations per
        // insert into a restored index).
        if chunks[c].count >= Self.maxChunk {
            if c == chunks.count - 1 && offset == chunks[c].count {
                // Appending at the very end is the chronological common case: the full chunk
                // stays full and the element starts the next one.
                appendChunk(element)
                _invariantCheck(near: chunks.count - 1)
                return
            }
            let split = chunks[c].count / 2
            var right: [Element] = []
            right.reserveCapacity(Self.maxChunk)
            right.append(contentsOf: chunks[c][split...])
            // The left half keeps its buffer (and capacity).
            chunks[c].removeSubrange(split...)
            lastEntries[c] = chunks[c][split - 1]
            chunks.insert(right, at: c + 1)
            lastEntries.insert(right[right.count - 1], at: c + 1)
            if offset > split {
                c += 1
                offset -= split
            }
        }
        chunks[c].insert(element, at: offset)
        lastEntries[c] = chunks[c][chunks[c].count - 1]
        _invariantCheck(near: c)
    }

    /// Builds an array from elements given in order, a chunk at a time: what a restore from a
    /// snapshot does for every entry, so it keeps the chunk being filled in a local array
    /// instead of going through the nested arrays' uniqueness and bounds checks per element.
    public struct Builder: Sendable {
        @usableFromInline var result = ChunkedSortedArray()
        @usableFromInline var current: [Element] = []

        /// Creates an empty builder.
        @inlinable
        public init() {}

        /// Appends `element`, which must not sort before the last one appended.
        @inlinable
        public mutating func append(_ element: Element) {
            if current.count == ChunkedSortedArray.maxChunk { flush() }
            if current.capacity == 0 { current.reserveCapacity(ChunkedSortedArray.maxChunk) }
            current.append(element)
        }

        @usableFromInline
        mutating func flush() {
            guard let last = current.last else { return }
            result.storedCount += current.count
            result.chunks.append(current)
            result.lastEntries.append(last)
            current = []
        }

        /// The array built.
        @inlinable
        public mutating func finish() -> ChunkedSortedArray {
            flush()
            result._invariantCheck(near: result.chunks.count - 1)
            return result
        }
    }

    /// Starts a new last chunk, with room for a full chunk, holding `element`.
    @inlinable
    mutating func appendChunk(_ element: Element) {
        var chunk: [Element] = []
        chunk.reserveCapacity(Self.maxChunk)
        chunk.append(element)
        chunks.append(chunk)
        lastEntries.append(element)
    }

    /// Removes the element at a valid, non-end `position`.
    /// - Complexity: O(log n + maxChunk)
    @inlinable
    public mutating func remove(at position: ChunkedPosition) {
        storedCount -= 1
        let c = position.chunk
        chunks[c].remove(at: position.offset)
        let n = chunks[c].count
        if n == 0 {
            chunks.remove(at: c)
            lastEntries.remove(at: c)
            _invariantCheck(near: c)
            return
        }
        lastEntries[c] = chunks[c][n - 1]
        // Merge an underfull chunk into its successor so deletes cannot leave a long tail of
        // tiny chunks (which would bloat the summary).
        if n < Self.maxChunk / 8, c + 1 < chunks.count, n + chunks[c + 1].count <= Self.maxChunk {
            let merged = chunks[c] + chunks[c + 1]
            chunks[c + 1] = merged
            chunks.remove(at: c)
            lastEntries.remove(at: c)
        }
        _invariantCheck(near: c)
    }

    /// Appends an element known to sort after every existing one: the O(n) bulk build.
    @inlinable
    public mutating func appendSorted(_ element: Element) {
        storedCount += 1
        if let last = chunks.indices.last, chunks[last].count < Self.maxChunk {
            chunks[last].append(element)
            lastEntries[last] = element
        } else {
            appendChunk(element)
        }
        _invariantCheck(near: chunks.count - 1)
    }

    /// The element at a valid, non-end position.
    @inlinable
    public subscript(position: ChunkedPosition) -> Element {
        chunks[position.chunk][position.offset]
    }

    /// The position after `p`.
    @inlinable
    public func successor(of p: ChunkedPosition) -> ChunkedPosition {
        if p.offset + 1 < chunks[p.chunk].count { return ChunkedPosition(chunk: p.chunk, offset: p.offset + 1) }
        return ChunkedPosition(chunk: p.chunk + 1, offset: 0)
    }

    /// The position before `p`, which must not be the start.
    @inlinable
    public func predecessor(of p: ChunkedPosition) -> ChunkedPosition {
        if p.offset > 0 { return ChunkedPosition(chunk: p.chunk, offset: p.offset - 1) }
        return ChunkedPosition(chunk: p.chunk - 1, offset: chunks[p.chunk - 1].count - 1)
    }

    /// The number of elements in `[lo, hi)`.
    /// - Complexity: O(chunks spanned), about (hi - lo) / 1,000 steps.
    @inlinable
    public func distance(from lo: ChunkedPosition, to hi: ChunkedPosition) -> Int {
        guard lo < hi else { return 0 }
        if lo.chunk == hi.chunk { return hi.offset - lo.offset }
        var n = chunks[lo.chunk].count - lo.offset
        var c = lo.chunk + 1
        while c < hi.chunk { n += chunks[c].count; c += 1 }
        if hi.chunk < chunks.count { n += hi.offset }
        return n
    }

    /// The position `distance` elements after `lo` (forwards), or before `hi` (backwards,
    /// `reversed`), clamped to `[lo, hi]`: where an offset into a range starts.
    /// - Complexity: O(chunks skipped), not O(distance).
    @inlinable
    public func position(_ distance: Int, from lo: ChunkedPosition, to hi: ChunkedPosition, reversed: Bool) -> ChunkedPosition {
        guard distance > 0, lo < hi else { return reversed ? hi : lo }
        if !reversed {
            var p = lo
            var left = distance
            while p < hi {
                let available = (p.chunk == hi.chunk ? hi.offset : chunks[p.chunk].count) - p.offset
                if left < available { return ChunkedPosition(chunk: p.chunk, offset: p.offset + left) }
                left -= available
                p = ChunkedPosition(chunk: p.chunk + 1, offset: 0)
            }
            return hi
        }
        // Backwards: the exclusive end of what remains, i.e. `total - distance` from `lo`.
        let total = self.distance(from: lo, to: hi)
        return distance >= total ? lo : position(total - distance, from: lo, to: hi, reversed: false)
    }

    /// Calls `body` on each element in `[lo, hi)`, forwards or backwards, until it returns
    /// `false`.
    /// - Complexity: O(k) for k visited elements.
    @inlinable
    public func scan(from lo: ChunkedPosition, to hi: ChunkedPosition, reversed: Bool, _ body: (Element) -> Bool) {
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
