@testable import Activities
import EventKernelTestSupport
import Foundation
import Testing

/// The id → slot hash table under the activity index, tested directly against a dictionary:
/// random operations across several resizes, deletions inside probe runs (backward shift),
/// ids of equal hash, the wrap at the end of the table, bulk loading, and the empty and
/// one-entry edges. With `EVENTKERNEL_INTERNAL_CHECKS` every mutation also checks the
/// table's invariants, and so does every `checkInvariants` call here.
@Suite struct SlotTableTests {
    /// A table and the row table its slots index, with a free list as `ActivityIndex` keeps.
    /// A class, so that its mutations can be called inside `#expect`.
    final class Harness {
        var table: SlotTable
        var rows: [ActivityRow]
        var free: [Int32] = []
        var model: [UUID: Int32]

        init(table: SlotTable = SlotTable(), rows: [ActivityRow] = [], model: [UUID: Int32] = [:]) {
            self.table = table
            self.rows = rows
            self.model = model
        }

        func insert(_ id: UUID) -> Bool {
            let slot: Int32
            let row = ActivityRow(id: id, start: 0, end: .nan, type: 0, version: 0)
            if let reused = free.popLast() { slot = reused; rows[Int(slot)] = row } else { slot = Int32(rows.count); rows.append(row) }
            guard table.insert(slot, id: id, rows: rows) else {
                free.append(slot)
                return false
            }
            model[id] = slot
            return true
        }

        /// Through the two-step path the index's appends take.
        func insertProbing(_ id: UUID) -> Bool {
            let probe = table.probeForInsert(id, rows: rows)
            guard probe.existing == nil else { return false }
            let slot = Int32(rows.count)
            rows.append(ActivityRow(id: id, start: 0, end: .nan, type: 0, version: 0))
            table.insert(slot, atBucket: probe.bucket, tag: probe.tag)
            model[id] = slot
            return true
        }

        func remove(_ id: UUID) -> Int32? {
            guard let slot = table.remove(id, rows: rows) else { return nil }
            free.append(slot)
            model[id] = nil
            return slot
        }

        /// Every id in the model is found at its slot, and `absent` ids are not found.
        func verify(absent: [UUID] = [], _ comment: Comment? = nil) {
            #expect(table.count == model.count, comment)
            for (id, slot) in model { #expect(table.find(id, rows: rows) == slot, comment) }
            for id in absent where model[id] == nil { #expect(table.find(id, rows: rows) == nil, comment) }
            table.checkInvariants(rows: rows)
        }
    }

    static func randomID(_ rng: inout SplitMix64) -> UUID {
        var u: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &u) { raw in
            raw.storeBytes(of: rng.next(), toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: rng.next(), toByteOffset: 8, as: UInt64.self)
        }
        return UUID(uuid: u)
    }

    /// Ids whose home bucket in a 16-bucket table is `home` (the top 4 bits of the hash).
    static func ids(withHome home: Int, count: Int, rng: inout SplitMix64) -> [UUID] {
        var found: [UUID] = []
        while found.count < count {
            let id = randomID(&rng)
            if Int(SlotTable.hash(id) >> 28) == home { found.append(id) }
        }
        return found
    }

    @Test func emptyAndSingleEntry() {
        let h = Harness()
        let id = UUID()
        #expect(h.table.find(id, rows: h.rows) == nil)
        #expect(h.remove(id) == nil)
        #expect(h.table.prefetch(id) == 0)
        h.verify()
        #expect(h.insert(id))
        #expect(!h.insert(id), "a second insert of the same id is refused")
        h.verify(absent: [UUID()])
        #expect(h.remove(id) == 0)
        #expect(h.remove(id) == nil)
        #expect(h.table.count == 0)
        h.verify(absent: [id])
        #expect(h.insert(id), "the id goes in again after its removal")
        h.verify()
    }

    /// Seeded random inserts (both paths), duplicate inserts and removals against a dictionary,
    /// from an empty table through nine doublings (16 to 8,192 buckets), then mostly removals.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomOperationsMatchADictionary(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let h = Harness()
        var known: [UUID] = []
        var sizes: Set<Int> = []
        for step in 0..<20_000 {
            let r = rng.next() % 10
            // Grow for the first 12,000 steps, then shrink, so that long runs get deletions.
            let growing = step < 12_000
            if r < (growing ? 6 : 3) || known.isEmpty {
                let id = Self.randomID(&rng)
                known.append(id)
                let inserted = r % 2 == 0 ? h.insert(id) : h.insertProbing(id)
                #expect(inserted)
            } else if r < (growing ? 7 : 4) {
                let id = known[Int(rng.next() % UInt64(known.count))]
                let present = h.model[id] != nil
                #expect(h.insert(id) == !present, "seed \(seed) step \(step)")
            } else {
                let id = known[Int(rng.next() % UInt64(known.count))]
                let slot = h.model[id]
                #expect(h.remove(id) == slot, "seed \(seed) step \(step)")
            }
            sizes.insert(h.table.buckets.count)
            if step % 2_000 == 0 { h.verify(absent: Array(known.suffix(50)), "seed \(seed) step \(step)") }
        }
        h.verify(absent: known, "seed \(seed) at the end")
        #expect(sizes.count >= 8, "the table grew through several sizes: \(sizes.sorted())")
    }

    /// A run of ids with one home bucket: removing from its middle shifts the later ones back,
    /// and each is still found; so are they after the removal of the run's first and last.
    @Test func removalInsideAProbeRunKeepsTheRestFindable() {
        var rng = SplitMix64(seed: 11)
        for removed in 0..<8 {
            let h = Harness()
            let run = Self.ids(withHome: 5, count: 8, rng: &rng)
            // Others homed inside the run, so the shift must leave them where they are found.
            let neighbours = Self.ids(withHome: 7, count: 2, rng: &rng)
            for id in run + neighbours { #expect(h.insert(id)) }
            #expect(h.table.buckets.count == 16)
            #expect(h.remove(run[removed]) != nil)
            h.verify(absent: [run[removed]], "removed \(removed) of the run")
            for id in run where id != run[removed] { #expect(h.remove(id) != nil) }
            h.verify(absent: run)
        }
    }

    /// A run that starts in the last bucket wraps to the first: deletions across the wrap.
    @Test func probeRunWrappingTheEndOfTheTable() {
        var rng = SplitMix64(seed: 12)
        let h = Harness()
        let run = Self.ids(withHome: 15, count: 6, rng: &rng)
        let early = Self.ids(withHome: 1, count: 2, rng: &rng)
        for id in run + early { #expect(h.insert(id)) }
        #expect(h.table.buckets.count == 16)
        #expect(h.remove(run[0]) != nil)
        h.verify(absent: [run[0]])
        #expect(h.remove(run[3]) != nil)
        h.verify(absent: [run[0], run[3]])
        #expect(h.remove(early[0]) != nil)
        h.verify(absent: [run[0], run[3], early[0]])
    }

    /// Distinct ids with the same 32-bit hash (found by search): told apart by their rows.
    @Test func idsWithEqualHashesAreToldApart() throws {
        var rng = SplitMix64(seed: 13)
        var byHash: [UInt32: UUID] = [:]
        var pairs: [(UUID, UUID)] = []
        while pairs.count < 3 {
            let id = Self.randomID(&rng)
            let hash = SlotTable.hash(id)
            if let other = byHash[hash] { pairs.append((other, id)) } else { byHash[hash] = id }
        }
        let h = Harness()
        for (a, b) in pairs {
            #expect(SlotTable.hash(a) == SlotTable.hash(b) && a != b)
            #expect(h.insert(a))
            #expect(h.insertProbing(b))
            #expect(!h.insert(b))
        }
        h.verify()
        for (a, b) in pairs {
            #expect(h.remove(a) != nil)
            #expect(h.table.find(b, rows: h.rows) == h.model[b])
        }
        h.verify(absent: pairs.map(\.0))
    }

    /// Loading rows in bulk gives the table inserting them would, and reports a repeated id.
    @Test func bulkLoadMatchesInsertsAndReportsARepeatedId() {
        var rng = SplitMix64(seed: 14)
        for n in [0, 1, 12, 13, 5_000] {
            let rows = (0..<n).map { _ in ActivityRow(id: Self.randomID(&rng), start: 0, end: .nan, type: 0, version: 0) }
            var table = SlotTable()
            let duplicate = table.bulkLoad(rows: rows)
            #expect(duplicate == nil)
            #expect(table.count == n)
            for (slot, row) in rows.enumerated() { #expect(table.find(row.id, rows: rows) == Int32(slot)) }
            table.checkInvariants(rows: rows)
            if n > 0 {
                let h = Harness(table: table, rows: rows, model: Dictionary(uniqueKeysWithValues: rows.enumerated().map { ($1.id, Int32($0)) }))
                #expect(h.remove(rows[n / 2].id) == Int32(n / 2))
                #expect(h.insert(Self.randomID(&rng)))
                h.verify(absent: [rows[n / 2].id], "after a bulk load of \(n)")
            }
        }
        var repeated = (0..<100).map { _ in ActivityRow(id: Self.randomID(&rng), start: 0, end: .nan, type: 0, version: 0) }
        repeated.append(repeated[40])
        var table = SlotTable()
        let duplicate = table.bulkLoad(rows: repeated)
        #expect(duplicate == 100)
    }

    #if EVENTKERNEL_INTERNAL_CHECKS
    /// The checks themselves see a broken table: an entry cut off from its home bucket, a
    /// wrong count, a slot whose row has another id.
    @Test func invariantChecksSeeABrokenTable() {
        var rng = SplitMix64(seed: 15)
        let h = Harness()
        let run = Self.ids(withHome: 3, count: 4, rng: &rng)
        for id in run { #expect(h.insert(id)) }
        #expect(h.table.invariantViolations(rows: h.rows).isEmpty)

        var hole = h.table
        hole.buckets[4] = 0 // the second of the run, without the backward shift
        hole.count -= 1
        #expect(hole.invariantViolations().contains { $0.contains("not reachable") })

        var miscounted = h.table
        miscounted.count += 1
        #expect(miscounted.invariantViolations().contains { $0.contains("count is") })

        var rows = h.rows
        rows[0].id = Self.randomID(&rng)
        #expect(h.table.invariantViolations(rows: rows).contains { $0.contains("tag is not the hash") })
    }
    #endif
}
