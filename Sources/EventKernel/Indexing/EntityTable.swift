import EventLog

/// A composite index key: the first component inline (most indexes have one, and then a key
/// costs no allocation), the others in an array.
struct IndexKey: Sendable {
    var first: IndexValue
    var rest: [IndexValue]

    init(_ values: [IndexValue]) {
        first = values[0]
        rest = Array(values.dropFirst())
    }

    var count: Int { 1 + rest.count }

    subscript(i: Int) -> IndexValue { i == 0 ? first : rest[i - 1] }

    var values: [IndexValue] { [first] + rest }
}

/// An entry of a declared index: the key, the entity's insertion sequence (the final
/// tie-break, so every entry is unique and equal keys keep insertion order) and its row slot.
struct KeyedSlot: Sendable {
    var key: IndexKey
    var sequence: UInt64
    var slot: Int32
}

/// An entry of the insertion-order index.
struct SequencedSlot: Sendable {
    var sequence: UInt64
    var slot: Int32
}

/// One declared index's entries, ordered by key (component directions applied), then sequence.
///
/// Equal keys are ordered by sequence in the direction of the last component, so that a scan
/// in either direction breaks ties by insertion order in the direction of the last ordering
/// term, whichever index serves the query (see ``EntityQuery``).
struct IndexStorage: Sendable {
    let descending: [Bool]
    var entries = ChunkedSortedArray<KeyedSlot>()

    init(descending: [Bool]) {
        self.descending = descending
    }

    /// Compares the first `partial.count` components of `key` with `partial`, directions applied.
    func compare(_ key: IndexKey, prefix partial: [IndexValue]) -> Int {
        for i in 0..<partial.count {
            let c = IndexValue.compare(key[i], partial[i])
            if c != 0 { return descending[i] ? -c : c }
        }
        return 0
    }

    /// Compares two full entries: key (directions applied), then sequence.
    func compare(_ a: IndexKey, _ aSequence: UInt64, _ b: IndexKey, _ bSequence: UInt64) -> Int {
        var c = IndexValue.compare(a.first, b.first)
        if c != 0 { return descending[0] ? -c : c }
        for i in 0..<a.rest.count {
            c = IndexValue.compare(a.rest[i], b.rest[i])
            if c != 0 { return descending[i + 1] ? -c : c }
        }
        c = aSequence < bSequence ? -1 : (aSequence == bSequence ? 0 : 1)
        return descending[descending.count - 1] ? -c : c
    }

    mutating func insert(_ key: IndexKey, sequence: UInt64, slot: Int32) {
        let p = entries.partitionPoint { compare($0.key, $0.sequence, key, sequence) < 0 }
        entries.insert(KeyedSlot(key: key, sequence: sequence, slot: slot), at: p)
    }

    mutating func remove(_ key: IndexKey, sequence: UInt64) {
        let p = entries.partitionPoint { compare($0.key, $0.sequence, key, sequence) < 0 }
        guard p < entries.endPosition, entries[p].sequence == sequence else { return }
        entries.remove(at: p)
    }
}

/// The in-memory table behind ``EventSourcedRepository``: rows in slots, an id map, the
/// insertion-order index and the declared indexes, all maintained by the projection's fold.
/// A value with copy-on-write storage: queries run on a copy, outside every lock.
public struct EntityTable<Entity: Sendable>: Sendable {
    struct Row: Sendable {
        var entity: Entity
        var id: EntityID
        var version: UInt64
        /// When the entity was first added (kept by updates): the insertion order.
        var sequence: UInt64
        /// The key of each declared index, kept so that removal never computes a key (which
        /// may run domain code) under the projection's lock.
        var keys: [IndexKey]
    }

    var rows: [Row?] = []
    var freeSlots: [Int32] = []
    var slotsByID: [EntityID: Int32] = [:]
    var bySequence = ChunkedSortedArray<SequencedSlot>()
    var indexes: [IndexStorage]
    var nextSequence: UInt64 = 0

    init(indexes: [EntityIndex<Entity>]) {
        self.indexes = indexes.map { IndexStorage(descending: $0.components.map(\.descending)) }
    }

    /// The entity with `id`, if it exists.
    public subscript(id: EntityID) -> Entity? { slotsByID[id].flatMap { rows[Int($0)]?.entity } }
    /// The number of entities.
    public var count: Int { slotsByID.count }
    /// Every entity, in insertion order.
    public var entities: [Entity] {
        var out: [Entity] = []
        out.reserveCapacity(count)
        bySequence.scan(from: bySequence.startPosition, to: bySequence.endPosition, reversed: false) {
            out.append(rows[Int($0.slot)]!.entity)
            return true
        }
        return out
    }

    func row(_ id: EntityID) -> Row? { slotsByID[id].flatMap { rows[Int($0)] } }

    /// Inserts or replaces the entity with `id`; `keys` are its declared indexes' keys.
    /// - Complexity: O(log n + 1,024) per index.
    mutating func upsert(_ entity: Entity, id: EntityID, version: UInt64, keys: [IndexKey]) {
        if let slot = slotsByID[id] {
            let old = rows[Int(slot)]!
            for i in indexes.indices where indexes[i].compare(old.keys[i], 0, keys[i], 0) != 0 {
                indexes[i].remove(old.keys[i], sequence: old.sequence)
                indexes[i].insert(keys[i], sequence: old.sequence, slot: slot)
            }
            rows[Int(slot)] = Row(entity: entity, id: id, version: version, sequence: old.sequence, keys: keys)
            return
        }
        let sequence = nextSequence
        nextSequence += 1
        let row = Row(entity: entity, id: id, version: version, sequence: sequence, keys: keys)
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            rows[Int(slot)] = row
        } else {
            slot = Int32(rows.count)
            rows.append(row)
        }
        slotsByID[id] = slot
        bySequence.appendSorted(SequencedSlot(sequence: sequence, slot: slot))
        for i in indexes.indices { indexes[i].insert(keys[i], sequence: sequence, slot: slot) }
    }

    /// Removes the entity with `id`, if present.
    mutating func remove(_ id: EntityID) {
        guard let slot = slotsByID.removeValue(forKey: id), let old = rows[Int(slot)] else { return }
        for i in indexes.indices { indexes[i].remove(old.keys[i], sequence: old.sequence) }
        let p = bySequence.partitionPoint { $0.sequence < old.sequence }
        if p < bySequence.endPosition, bySequence[p].sequence == old.sequence { bySequence.remove(at: p) }
        rows[Int(slot)] = nil
        freeSlots.append(slot)
    }
}

extension ChunkedSortedArray where Element == SequencedSlot {
    /// Appends in sequence order: new entities always have the highest sequence.
    mutating func appendSorted(_ entry: SequencedSlot) {
        if let last = lastEntries.last, last.sequence > entry.sequence {
            insert(entry, at: partitionPoint { $0.sequence < entry.sequence })
        } else {
            insert(entry, at: endPosition)
        }
    }
}
