import EventLog

/// The in-memory table behind ``EventSourcedRepository``: the entities by slot, and their
/// ids, versions, insertion order and declared indexes (``IndexedRows``), all maintained by the
/// projection's fold. A value with copy-on-write storage: queries run on a copy, outside every
/// lock.
public struct EntityTable<Entity: Sendable>: Sendable {
    /// By slot; `nil` in a free slot.
    var bySlot: [Entity?] = []
    var rows: IndexedRows

    init(indexes: [EntityIndex<Entity>]) {
        rows = IndexedRows(fields: indexes.map { index in
            index.components.map { IndexedField(keyPath: $0.keyPath, descending: $0.descending) }
        })
    }

    /// The entity with `id`, if it exists.
    public subscript(id: EntityID) -> Entity? { rows.slotsByID[id].flatMap { bySlot[Int($0)] } }
    /// The number of entities.
    public var count: Int { rows.count }
    /// Every entity, in insertion order.
    public var entities: [Entity] {
        var out: [Entity] = []
        out.reserveCapacity(count)
        rows.bySequence.scan(from: rows.bySequence.startPosition, to: rows.bySequence.endPosition, reversed: false) {
            out.append(bySlot[Int($0.slot)]!)
            return true
        }
        return out
    }

    /// The entities in `slots`, in that order.
    func entities(at slots: [Int32]) -> [Entity] {
        bySlot.withUnsafeBufferPointer { all in slots.map { all[Int($0)]! } }
    }

    /// Inserts or replaces the entity with `id`; `keys` are its declared indexes' keys.
    /// - Complexity: O(log n + 1,024) per index.
    mutating func upsert(_ entity: Entity, id: EntityID, version: UInt64, keys: [IndexKey]) {
        let slot = Int(rows.upsert(id: id, version: version, keys: keys))
        if slot == bySlot.count { bySlot.append(entity) } else { bySlot[slot] = entity }
    }

    /// Removes the entity with `id`, if present.
    mutating func remove(_ id: EntityID) {
        if let slot = rows.remove(id) { bySlot[Int(slot)] = nil }
    }
}
