import EventLog
import KernelPrimitives
import Synchronization

/// Where ``EntityTable/entities(at:)`` stores what its prefetching loads read.
private let touchSink = Atomic<UInt8>(0)

/// The in-memory table behind ``EventSourcedRepository``: the entities by slot, and their
/// ids, versions, insertion order and declared indexes (`IndexedRows`), all maintained by the
/// projection's fold. A value with copy-on-write storage: queries run on a copy, outside every
/// lock.
public struct EntityTable<Entity: Sendable>: Sendable {
    /// By slot; `nil` in a free slot.
    var bySlot: [Entity?] = []
    var rows: IndexedRows
    /// The indexes `rows` keeps, as declared: kept with the rows, so that a rebuild that
    /// declares others switches both at once.
    let declared: [EntityIndex<Entity>]
    /// The plans of the query shapes run on this table (`QueryPlanCache`). They depend on the
    /// declared indexes (a plan names an index by number), so the cache belongs to the
    /// declaration, not to the repository: created here with it, shared by every copy of the
    /// table (the commits that follow), and a table built for another declaration starts with
    /// an empty one, so that no plan of the old indexes runs on the new ones.
    let planCache = QueryPlanCache()

    init(indexes: [EntityIndex<Entity>]) {
        declared = indexes
        rows = IndexedRows(
            fields: indexes.map { index in
                index.components.map { IndexedField(keyPath: $0.keyPath, descending: $0.descending) }
            },
            intervalEnds: indexes.map { $0.intervalEnd.map { $0.keyPath as any AnyKeyPath & Sendable } })
    }

    /// The entity with `id`, if it exists.
    public subscript(id: EntityID) -> Entity? { rows.slot(of: id).flatMap { bySlot[Int($0)] } }
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
    ///
    /// Slots come in an index's order while entities sit in insertion order, so at a million
    /// rows nearly every one is a cache and TLB miss. Copying an entity goes through its value
    /// witnesses (calls the out-of-order core cannot see past), so the misses were taken one
    /// at a time: half of a 7-day range query was the first load of each entity, measured with
    /// `perf`. So each block of slots is first touched by a tight loop of independent byte
    /// loads, which the core overlaps, and then copied from cache.
    /// - Complexity: O(k) for k slots.
    func entities(at slots: [Int32]) -> [Entity] {
        entities(at: slots[...])
    }

    /// The entities at `slots` (a part of a list of slots); see ``entities(at:)-([Int32])``.
    func entities(at part: ArraySlice<Int32>) -> [Entity] {
        part.withUnsafeBufferPointer { entities(at: $0) }
    }

    private func entities(at slots: UnsafeBufferPointer<Int32>) -> [Entity] {
        let stride = MemoryLayout<Entity?>.stride
        // Every cache line of an entity (up to four; the witnesses reach the rest).
        let last = min(stride, 256) &- 1
        let block = 32
        return bySlot.withUnsafeBufferPointer { all in
            let raw = UnsafeRawPointer(all.baseAddress)
            var touched: UInt8 = 0
            // Initialised in place: the generic `append` (a uniqueness check and a capacity
            // check per element) was a quarter of the copy-out of a 50-row query.
            let out = [Entity](initializingInPlace: slots.count) { buffer, initialized in
                var start = 0
                while start < slots.count {
                    let end = min(start &+ block, slots.count)
                    for i in start..<end {
                        let entity = raw! + Int(slots[i]) &* stride
                        var byte = 0
                        while byte < last {
                            touched |= entity.load(fromByteOffset: byte, as: UInt8.self)
                            byte &+= 64
                        }
                        touched |= entity.load(fromByteOffset: last, as: UInt8.self)
                    }
                    for i in start..<end {
                        // A slot a query found holds an entity (the index and the table agree:
                        // checked after every change under InternalChecks, asserted here in
                        // debug builds; a release build copies an empty slot's bytes instead of
                        // trapping). The entity is loaded from the `Optional`'s payload: a
                        // single-payload enum keeps its payload at offset 0 (the Swift ABI,
                        // TypeLayout: what projecting `.some`'s data does in SIL), so this is one
                        // copy through the entity's witness, where `all[slot]!` added the
                        // Optional's own (its tag read, a copy of the Optional and its
                        // destruction: a fifth of a 400-row range query). A raw load, so the
                        // memory (bound to `Entity?`) is never accessed as bound to `Entity`.
                        assert(all[Int(slots[i])] != nil, "slot \(slots[i]) holds no entity")
                        (buffer.baseAddress! + i).initialize(to: raw!.load(fromByteOffset: Int(slots[i]) &* stride, as: Entity.self))
                        initialized = i &+ 1
                    }
                    start = end
                }
            }
            // Published so that the loads above are kept: their value is never needed.
            touchSink.store(touched, ordering: .relaxed)
            return out
        }
    }

    /// Inserts or replaces the entity with `id`; `keys` are its declared indexes' keys.
    /// - Complexity: O(log n + c) per index, for chunks of c entries (``ChunkedSortedArray/maxChunk``).
    mutating func upsert(_ entity: Entity, id: EntityID, version: UInt64, keys: RowKeys) {
        let slot = Int(rows.upsert(id: id, version: version, keys: keys))
        if slot == bySlot.count { bySlot.append(entity) } else { bySlot[slot] = entity }
    }

    /// ``upsert(_:id:version:keys:)-(_,_,_,RowKeys)`` with the row's keys in an array of their own:
    /// only the tests call it (a table built row by row, by hand); the repository's fold passes
    /// each row's place in its batch's keys.
    mutating func upsert(_ entity: Entity, id: EntityID, version: UInt64, keys: [IndexKey]) {
        upsert(entity, id: id, version: version, keys: RowKeys(keys))
    }

    /// Removes the entity with `id`, if present; `version` is its stream's version after the
    /// deletion (kept: see ``IndexedRows/deletedVersions``).
    mutating func remove(_ id: EntityID, version: UInt64) {
        if let slot = rows.remove(id, version: version) { bySlot[Int(slot)] = nil }
    }

    /// The committed stream version of the entity with `id` (a deleted one's too; 0: none).
    func version(of id: EntityID) -> UInt64 { rows.lookup(id).version }

    /// The entity with `id` and its stream's committed version (as ``version(of:)``, by the same
    /// ``IndexedRows/lookup(_:)``), from one lookup of the id: a command reads both for every entity it changes, and looking the id
    /// up once for each was two hash-table probes, mostly cache misses, per add (perf: 3.6% of
    /// a batch append of activities).
    func entityAndVersion(_ id: EntityID) -> (Entity?, UInt64) {
        let (slot, version) = rows.lookup(id)
        return (slot.flatMap { bySlot[Int($0)] }, version)
    }
}
