@_spi(Indexing) @testable import EventKernel
import EventKernelTestSupport
import Foundation
import Testing

/// The third hash table: the id map of ``EntityTable`` (`IndexedRows.slotsByID`, with the
/// deleted entities' versions beside it), a ``SlotMap`` comparing ids through the row heads. Tested directly against a model: random upserts and removals through the table's
/// growth, slot reuse, insertion order, the versions of deleted entities, ids that are equal
/// only byte for byte, and the empty and one-entry edges.
@Suite struct EntityIdMapTests {
    /// The table's id map, slots, free list and insertion-order index agree with each other.
    static func checkConsistency(_ table: EntityTable<String>, _ comment: Comment? = nil) {
        let rows = table.rows
        var used = Set<Int32>()
        for slot in rows.slotsByID.slots {
            #expect(rows.slot(of: rows.heads[Int(slot)].id) == slot, comment)
            #expect(used.insert(slot).inserted, comment)
            #expect(table.bySlot[Int(slot)] != nil, comment)
        }
        #expect(used.count == rows.count, comment)
        #if EVENTKERNEL_INTERNAL_CHECKS
        #expect(rows.slotsByID.invariantViolations(heads: rows.heads) == [], comment)
        #endif
        #expect(used.isDisjoint(with: rows.freeSlots), comment)
        #expect(used.count + rows.freeSlots.count == rows.heads.count, comment)
        #expect(rows.bySequence.count == table.count, comment)
        rows.bySequence.checkInvariants(areInIncreasingOrder: { $0.sequence < $1.sequence })
    }

    @Test func emptyAndSingleEntry() {
        var table = EntityTable<String>(indexes: [])
        let id = EntityID.uuid(UUID())
        #expect(table[id] == nil && table.count == 0 && table.entities.isEmpty && table.version(of: id) == 0)
        table.remove(id, version: 3)
        #expect(table[id] == nil && table.count == 0)
        #expect(table.version(of: id) == 3, "a deletion's version is kept for a stream never added")
        table.upsert("one", id: id, version: 4, keys: [])
        #expect(table[id] == "one" && table.count == 1 && table.entities == ["one"] && table.version(of: id) == 4)
        Self.checkConsistency(table)
        table.remove(id, version: 5)
        #expect(table[id] == nil && table.count == 0 && table.version(of: id) == 5)
        Self.checkConsistency(table)
        table.upsert("again", id: id, version: 6, keys: [])
        #expect(table[id] == "again" && table.version(of: id) == 6 && table.rows.heads.count == 1, "the freed slot is reused")
        Self.checkConsistency(table)
    }

    /// String ids are equal only byte for byte: a precomposed and a decomposed "é" (equal as
    /// Swift strings) are two entities, and a string spelling a UUID is not that UUID.
    @Test func idsEqualOnlyByteForByte() {
        let uuid = UUID()
        let ids: [EntityID] = [.string("caf\u{E9}"), .string("cafe\u{301}"), .string(uuid.uuidString), .uuid(uuid), .string("")]
        #expect("caf\u{E9}" == "cafe\u{301}", "the premise: Swift's String equality folds them")
        var table = EntityTable<String>(indexes: [])
        for (n, id) in ids.enumerated() { table.upsert("e\(n)", id: id, version: UInt64(n + 1), keys: []) }
        #expect(table.count == ids.count)
        for (n, id) in ids.enumerated() {
            #expect(table[id] == "e\(n)")
            #expect(table.version(of: id) == UInt64(n + 1))
        }
        // An equal id from other storage (a substring's copy) hashes alike and finds the row.
        let long = "an entity id long enough not to be a small string, 0123456789"
        table.upsert("long", id: .string(long), version: 1, keys: [])
        let copy = String(("x" + long).dropFirst())
        #expect(EntityID.string(copy).hashValue == EntityID.string(long).hashValue)
        #expect(table[.string(copy)] == "long")
        Self.checkConsistency(table)
    }

    /// Seeded random upserts (new and existing ids, both kinds of id) and removals against a
    /// model, through the table's growth and the reuse of freed slots.
    @Test(arguments: [1, 2] as [UInt64])
    func randomOperationsMatchAModel(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let ids: [EntityID] = (0..<1_500).map { n in
            n % 4 == 0 ? .string("key-\(n)") : .uuid(UUID(uuid: withUnsafeBytes(of: (rng.next(), rng.next())) { $0.load(as: uuid_t.self) }))
        }
        var table = EntityTable<String>(indexes: [])
        var live: [EntityID: (entity: String, version: UInt64)] = [:]
        var order: [EntityID] = []
        var versions: [EntityID: UInt64] = [:]
        for step in 0..<10_000 {
            let id = ids[Int(rng.next() % UInt64(ids.count))]
            let version = (versions[id] ?? 0) + 1
            versions[id] = version
            // More upserts than removals early, the reverse later: the table grows, then
            // frees slots that new rows reuse.
            if rng.next() % 10 < (step < 6_000 ? 7 : 4) {
                table.upsert("\(id)@\(version)", id: id, version: version, keys: [])
                if live[id] == nil { order.append(id) }
                live[id] = ("\(id)@\(version)", version)
            } else {
                table.remove(id, version: version)
                if live.removeValue(forKey: id) != nil { order.removeAll { $0 == id } }
            }
            if step % 1_000 == 0 {
                #expect(table.count == live.count, "seed \(seed) step \(step)")
                Self.checkConsistency(table, "seed \(seed) step \(step)")
            }
        }
        #expect(table.count == live.count)
        for id in ids {
            #expect(table[id] == live[id]?.entity, "seed \(seed): \(id)")
            #expect(table.version(of: id) == (versions[id] ?? 0), "seed \(seed): version of \(id)")
        }
        #expect(table.entities == order.map { live[$0]!.entity }, "insertion order")
        #expect(table.rows.heads.count <= 1_500, "freed slots are reused")
        Self.checkConsistency(table, "seed \(seed) at the end")
    }

    /// Row heads keep UUID ids in 32 bytes and move to whole ``RowHead``s at the first string
    /// id; every head reads back the same through both layouts, and `holds` tells ids apart
    /// without building them (a string that spells a UUID is another id).
    @Test func rowHeadsKeepUUIDsInThirtyTwoBytesUntilAStringID() {
        var heads = RowHeads()
        let uuids = (0..<5).map { _ in UUID() }
        for (n, uuid) in uuids.enumerated() { heads.append(RowHead(id: .uuid(uuid), version: UInt64(n), sequence: UInt64(10 + n))) }
        heads.setVersion(2, 7)
        heads[3] = RowHead(id: .uuid(uuids[0]), version: 9, sequence: 13)
        func check(_ step: String) {
            for n in 0..<5 {
                let id: EntityID = .uuid(n == 3 ? uuids[0] : uuids[n])
                let version: UInt64 = n == 2 ? 7 : n == 3 ? 9 : UInt64(n)
                #expect(heads[n].id == id && heads[n].version == version && heads[n].sequence == UInt64(10 + n), "\(step): head \(n)")
                #expect(heads.version(n) == version && heads.sequence(n) == UInt64(10 + n) && heads.holds(n, id), "\(step): head \(n)")
                #expect(!heads.holds(n, .string(id.description)), "\(step): a string spelling the UUID is another id")
                #expect(!heads.holds(n, .uuid(UUID())), "\(step)")
            }
        }
        #expect(!heads.isWide && heads.uuids.count == 5 && MemoryLayout<RowHeads.UUIDHead>.stride == 32)
        check("UUIDs")
        heads.append(RowHead(id: .string("natural key"), version: 1, sequence: 15))
        #expect(heads.isWide && heads.count == 6 && heads.uuids.isEmpty)
        check("widened")
        #expect(heads[5].id == .string("natural key") && heads.holds(5, .string("natural key")) && heads.sequence(5) == 15)
        heads.removeLast()
        #expect(heads.count == 5)
        check("after removing the string id")
    }

    /// The map alone, against a dictionary: random inserts, repeated inserts and removals of a
    /// few ids at a time (so that the 16-bucket table stays nearly full and its probe runs wrap
    /// around its end, where backward-shift deletion goes wrong first), then through growth.
    @Test(arguments: [3, 4] as [UInt64])
    func slotMapMatchesADictionary(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let ids: [EntityID] = (0..<400).map { n in
            n % 3 == 0 ? .string("id-\(n)") : .uuid(UUID(uuid: withUnsafeBytes(of: (rng.next(), rng.next())) { $0.load(as: uuid_t.self) }))
        }
        var map = SlotMap()
        var heads = RowHeads()
        var model: [EntityID: Int32] = [:]
        var free: [Int32] = []
        for step in 0..<20_000 {
            // The first half keeps at most 12 ids (one 16-bucket table); the second grows.
            let pool = step < 10_000 ? 14 : ids.count
            let id = ids[Int(rng.next() % UInt64(pool))]
            if rng.next() % 2 == 0 && (step >= 10_000 || model.count < 12) {
                let fresh = free.isEmpty
                let slot = free.popLast() ?? Int32(heads.count)
                let head = RowHead(id: id, version: 1, sequence: UInt64(step))
                if Int(slot) == heads.count { heads.append(head) } else { heads[Int(slot)] = head }
                let added = map.insert(slot, heads: heads)
                #expect(added == (model[id] == nil), "seed \(seed) step \(step)")
                if added { model[id] = slot } else if fresh { heads.removeLast() } else { free.append(slot) }
            } else {
                let removed = map.remove(id, heads: heads)
                #expect(removed == model.removeValue(forKey: id), "seed \(seed) step \(step)")
                if let removed { free.append(removed) }
            }
            if step == 9_999 {
                #expect(map.buckets.count == 16, "seed \(seed): the first half stayed in one 16-bucket table, so its runs wrapped")
            }
            if step % 97 == 0 {
                #expect(map.count == model.count)
                for probe in ids.prefix(pool) { #expect(map.find(probe, heads: heads) == model[probe], "seed \(seed) step \(step)") }
                #if EVENTKERNEL_INTERNAL_CHECKS
                #expect(map.invariantViolations(heads: heads) == [], "seed \(seed) step \(step)")
                #endif
            }
        }
        #expect(map.buckets.count > 16, "the second half grew the table")
        #expect(Set(map.slots) == Set(model.values))
    }

    #if EVENTKERNEL_INTERNAL_CHECKS
    /// The per-removal check looks at the run after the final hole: a removal that leaves an id
    /// cut off from its home (no backward shift) is reported, and one that cuts off nothing is not.
    @Test func slotMapRemovalCheckSeesABrokenShift() {
        var rng = SplitMix64(seed: 7)
        let heads: RowHeads = RowHeads((0..<12).map { n in
            RowHead(id: .uuid(UUID(uuid: withUnsafeBytes(of: (rng.next(), rng.next())) { $0.load(as: uuid_t.self) })), version: 1, sequence: UInt64(n))
        })
        var map = SlotMap()
        for slot in heads.indices { let added = map.insert(Int32(slot), heads: heads); #expect(added) }
        #expect(map.buckets.count == 16, "12 ids in one 16-bucket table, so probe runs are long")
        var broken = 0
        for removed in heads.indices {
            var copy = map
            let violation = copy.removeWithoutShiftForTesting(heads[removed].id, heads: heads)
            let lost = heads.indices.filter { $0 != removed && copy.find(heads[$0].id, heads: heads) != Int32($0) }
            #expect((violation != nil) == !lost.isEmpty, "removing slot \(removed): \(violation ?? "no violation"), lost \(lost)")
            if !lost.isEmpty { broken += 1 }
        }
        #expect(broken > 0, "some removal without a shift cuts an id off, so the check is exercised")
    }
    #endif

    /// Ids crafted to share one home bucket under an unseeded, invertible mix (the inverse of
    /// the multiply-xorshift-multiply UUID hash the map once used, all with the same top 32 bits)
    /// spread out under the map's hash, so an import of chosen ids cannot make probes O(n).
    @Test func slotMapHashResistsCraftedUUIDs() {
        func inverse(_ c: UInt64) -> UInt64 {
            var x = c
            for _ in 0..<6 { x = x &* (2 &- c &* x) }
            return x
        }
        let crafted: [EntityID] = (0..<1_000 as Range<UInt64>).map { k in
            let mixed = 0xDEAD_BEEF << 32 | k
            let h2 = mixed &* inverse(0xBF58_476D_1CE4_E5B9)
            let h1 = h2 ^ (h2 >> 29) ^ (h2 >> 58)
            let a = h1 &* inverse(0x9E37_79B9_7F4A_7C15)
            return .uuid(UUID(uuid: withUnsafeBytes(of: (a.littleEndian, UInt64(0))) { $0.load(as: uuid_t.self) }))
        }
        // The old hash of these ids: one value for all, so this test is about the ids, not luck.
        let old = Set(crafted.map { id -> UInt32 in
            guard case .uuid(let uuid) = id else { return 0 }
            let (a, b) = withUnsafeBytes(of: uuid.uuid) { ($0.loadUnaligned(as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) }
            var h = a &* 0x9E37_79B9_7F4A_7C15 ^ (b &* 0xC2B2_AE3D_27D4_EB4F)
            h ^= h >> 29
            h = h &* 0xBF58_476D_1CE4_E5B9
            return UInt32(truncatingIfNeeded: h >> 32)
        })
        #expect(old == [0xDEAD_BEEF])
        let homes = Set(crafted.map { SlotMap.hash($0) >> 21 })  // home buckets in a 2,048-bucket table
        #expect(homes.count > 500, "\(homes.count) home buckets for 1,000 crafted ids")
        let heads = RowHeads(crafted.enumerated().map { RowHead(id: $1, version: 1, sequence: UInt64($0)) })
        var map = SlotMap()
        for slot in heads.indices { let added = map.insert(Int32(slot), heads: heads); #expect(added) }
        #expect(heads.indices.allSatisfy { map.find(heads[$0].id, heads: heads) == Int32($0) })
    }

    /// The empty map finds nothing and removes nothing; ids equal only byte for byte are two ids.
    @Test func slotMapEdges() {
        var map = SlotMap()
        let composed = EntityID.string("\u{E9}"), decomposed = EntityID.string("e\u{301}")
        let removedFromEmpty = map.remove(composed, heads: [])
        #expect(map.find(composed, heads: []) == nil && removedFromEmpty == nil && map.slots.isEmpty)
        let heads: RowHeads = [RowHead(id: composed, version: 1, sequence: 0), RowHead(id: decomposed, version: 1, sequence: 1)]
        let first = map.insert(0, heads: heads), second = map.insert(1, heads: heads), again = map.insert(0, heads: heads)
        #expect(first && second)
        #expect(!again, "an id already present is refused")
        #expect(map.find(composed, heads: heads) == 0 && map.find(decomposed, heads: heads) == 1 && map.count == 2)
        map.reserveCapacity(1_000)
        #expect(map.buckets.count >= 1_334 && map.find(decomposed, heads: heads) == 1, "growing keeps every id")
        let removed = map.remove(composed, heads: heads)
        #expect(removed == 0 && map.find(composed, heads: heads) == nil && map.find(decomposed, heads: heads) == 1)
        #if EVENTKERNEL_INTERNAL_CHECKS
        #expect(map.invariantViolations(heads: heads) == [])
        var broken = map
        broken.corruptForTesting()
        #expect(!broken.invariantViolations(heads: heads).isEmpty, "the checks see a wrong bucket")
        #endif
    }

    /// A snapshot's rows go into the map in the order of their home buckets
    /// (`SlotMap.insertAll(from:heads:)`, through `IndexedRows.appendRestored`): every id is
    /// found at its slot, after slots inserted one by one, removals still shift what follows,
    /// and an id present twice (within the bulk, or already in the map) is reported by its later
    /// slot. UUIDs and strings (40-byte heads), enough for the table to grow past a cache.
    @Test func slotMapBulkInsertFindsEveryIDAndReportsARepeat() {
        let n = 5_000
        let ids: [EntityID] = (0..<n).map { $0 % 7 == 0 ? .string("id \($0)") : .uuid(UUID()) }
        let heads = RowHeads(ids.enumerated().map { RowHead(id: $1, version: 1, sequence: UInt64($0)) })
        var map = SlotMap()
        for slot in 0..<100 {
            let inserted = map.insert(Int32(slot), heads: heads)
            #expect(inserted)
        }
        let bulkRepeat = map.insertAll(from: 100, heads: heads), emptyRepeat = map.insertAll(from: n, heads: heads)
        #expect(bulkRepeat == nil && emptyRepeat == nil && map.count == n)
        for (slot, id) in ids.enumerated() { #expect(map.find(id, heads: heads) == Int32(slot)) }
        #expect(map.find(.uuid(UUID()), heads: heads) == nil)
        for slot in stride(from: 0, to: n, by: 3) {
            let removed = map.remove(ids[slot], heads: heads)
            #expect(removed == Int32(slot))
        }
        for (slot, id) in ids.enumerated() { #expect(map.find(id, heads: heads) == (slot % 3 == 0 ? nil : Int32(slot))) }
        #if EVENTKERNEL_INTERNAL_CHECKS
        #expect(map.invariantViolations(heads: heads) == [])
        #endif

        var repeated = ids
        repeated[4_000] = ids[10]
        let repeatedHeads = RowHeads(repeated.enumerated().map { RowHead(id: $1, version: 1, sequence: UInt64($0)) })
        var bulk = SlotMap()
        let withinBulk = bulk.insertAll(from: 0, heads: repeatedHeads)
        #expect(withinBulk == 4_000, "a repeat within the bulk")
        var after = SlotMap()
        for slot in 0..<20 {
            let inserted = after.insert(Int32(slot), heads: repeatedHeads)
            #expect(inserted)
        }
        let ofMapped = after.insertAll(from: 20, heads: repeatedHeads)
        #expect(ofMapped == 4_000, "a repeat of an id in the map")

        var rows = IndexedRows(fields: [])
        let named = rows.appendRestored(Array(repeatedHeads))
        #expect(named == ids[10], "the restore names the repeated id")
        var good = IndexedRows(fields: [])
        let none = good.appendRestored(Array(heads))
        #expect(none == nil)
        #expect(good.count == n && good.bySequence.count == n && good.slot(of: ids[n - 1]) == Int32(n - 1))
    }
}
