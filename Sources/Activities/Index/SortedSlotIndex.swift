public import Foundation
@_spi(Indexing) import EventKernel

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
    /// The activity's stream version (the projection is its streams' version source), or
    /// ``largeVersion`` when it does not fit (then ``ActivityIndex/largeVersions`` has it).
    /// In what was padding: the row stays 40 bytes.
    @usableFromInline var version: UInt32

    /// Marks a version kept in ``ActivityIndex/largeVersions``.
    @usableFromInline static let largeVersion = UInt32.max

    @inlinable
    init(id: UUID, start: Double, end: Double, type: UInt32, version: UInt32) {
        self.id = id
        self.start = start
        self.end = end
        self.type = type
        self.version = version
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

/// A position in a `SortedSlotIndex`.
typealias IndexPosition = ChunkedPosition

/// A sorted multiset of `(start, id)` keys: EventKernel's chunked sorted array (the ordered
/// structure every repository's indexes share), ordered by start date and, on exact ties, by
/// the row's id.
typealias SortedSlotIndex = ChunkedSortedArray<IndexEntry>

extension ChunkedSortedArray where Element == IndexEntry {
    /// The first position with `start >= value` (or `> value` if `strict`).
    func position(ofStart value: Double, strict: Bool) -> IndexPosition {
        strict ? partitionPoint { $0.start <= value } : partitionPoint { $0.start < value }
    }

    /// The first position with key `>= (start, id)` (or `>` if `strict`).
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
    /// - Complexity: O(log n + maxChunk)
        mutating func insert(_ entry: IndexEntry, id: UUID, rows: [ActivityRow]) {
        insert(entry, at: position(ofKey: entry.start, id: id, strict: false, rows: rows))
        #if EVENTKERNEL_INTERNAL_CHECKS
        checkKeyOrder(around: entry.start, id: id, rows: rows)
        #endif
    }

    /// Removes the entry for `slot` with key `(start, id)`, if present.
    /// - Complexity: O(log n + maxChunk)
        mutating func remove(start: Double, id: UUID, slot: Int32, rows: [ActivityRow]) {
        let p = position(ofKey: start, id: id, strict: false, rows: rows)
        guard p < endPosition, self[p].slot == slot else { return }
        remove(at: p)
        #if EVENTKERNEL_INTERNAL_CHECKS
        checkKeyOrder(around: start, id: id, rows: rows)
        #endif
    }

    #if EVENTKERNEL_INTERNAL_CHECKS
    /// The entries around where `(start, id)` sorts are in key order: what an insert or a
    /// removal there changed (see `ChunkedSortedArray.checkOrder(around:_:)`).
    func checkKeyOrder(around start: Double, id: UUID, rows: [ActivityRow]) {
        checkOrder(around: position(ofKey: start, id: id, strict: false, rows: rows)) { a, b in
            a.start < b.start || (a.start == b.start && ActivityCursor.idLess(rows[Int(a.slot)].id, rows[Int(b.slot)].id))
        }
    }
    #endif
}
