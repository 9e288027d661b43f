@testable import EventKernel
import EventKernelTestSupport
import Foundation
import Testing

/// The store's stream → version table, tested directly against a dictionary: random
/// operations across many resizes (it grows by half), the same id under several entity
/// types, runs of ids with one home slot, the removal of an entity type from the middle of
/// such runs, the string-id side, rebuilding in slot order (as a snapshot restore does), and
/// the empty and one-entry edges. With `EVENTKERNEL_INTERNAL_CHECKS` every mutation also
/// checks the map's invariants, and so does every `checkInvariants` call here.
@Suite struct StreamVersionMapTests {
    static func uuid(_ high: UInt64, _ low: UInt64) -> UUID {
        var u: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &u) { raw in
            raw.storeBytes(of: high, toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: low, toByteOffset: 8, as: UInt64.self)
        }
        return UUID(uuid: u)
    }

    static func randomUUID(_ rng: inout SplitMix64) -> UUID { uuid(rng.next(), rng.next()) }

    /// Every stream of the model has its version, `absent` streams have none, and `forEach`
    /// lists exactly the model.
    static func verify(_ map: StreamVersionMap, _ model: [StreamID: UInt64], absent: [StreamID] = [], _ comment: Comment? = nil) {
        #expect(map.count == model.count, comment)
        for (stream, version) in model { #expect(map[stream] == version, comment) }
        for stream in absent where model[stream] == nil { #expect(map[stream] == nil, comment) }
        var listed: [StreamID: UInt64] = [:]
        map.forEach { code, id, version in
            let stream = StreamID(map.typeNames[code], id)
            let previous = listed.updateValue(version, forKey: stream)
            #expect(previous == nil, "\(stream) listed twice")
        }
        #expect(listed == model, comment)
        map.checkInvariants()
    }

    @Test func emptyAndSingleEntry() {
        var map = StreamVersionMap()
        let stream = StreamID("Account", .uuid(UUID()))
        #expect(map[stream] == nil)
        #expect(map[StreamID("Account", .string("a"))] == nil)
        map.removeEntries(ofEntityType: "Account")
        map[stream] = nil
        map[stream] = 0
        Self.verify(map, [:], absent: [stream], "setting nil or 0 records nothing")
        map[stream] = 1
        Self.verify(map, [stream: 1], absent: [StreamID("Other", stream.entityID)])
        map[stream] = StreamVersionMap.maxVersion
        Self.verify(map, [stream: StreamVersionMap.maxVersion])
        map.removeEntries(ofEntityType: "Account")
        Self.verify(map, [:], absent: [stream], "the only entry removed")
        map[stream] = 2
        Self.verify(map, [stream: 2], "the table grows again from the one slot the removal left")
    }

    /// Seeded random writes (new streams, raised and overwritten versions, ignored nils),
    /// reads, and removals of a whole entity type, against a dictionary, from empty through
    /// a dozen resizes.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomOperationsMatchADictionary(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let types = ["Thread", "Post", "Account", "Ledger"]
        let ids: [EntityID] = (0..<3_000).map { _ in .uuid(Self.randomUUID(&rng)) } + (0..<200).map { .string("key-\($0)") }
        var map = StreamVersionMap()
        var model: [StreamID: UInt64] = [:]
        var capacities: Set<Int> = []
        for step in 0..<20_000 {
            let stream = StreamID(types[Int(rng.next() % 4)], ids[Int(rng.next() % UInt64(ids.count))])
            switch rng.next() % 100 {
            case 0..<60:
                let version = rng.next() % 50 == 0 ? StreamVersionMap.maxVersion : 1 + rng.next() % 1_000
                map[stream] = version
                model[stream] = version
            case 60..<62:
                map[stream] = nil
            case 62 where step > 10_000 && step % 7 == 0:
                let type = types[Int(rng.next() % 4)]
                map.removeEntries(ofEntityType: type)
                model = model.filter { $0.key.entityType != type }
            default:
                #expect(map[stream] == model[stream], "seed \(seed) step \(step): \(stream)")
            }
            capacities.insert(map.slots.count)
            if step % 2_500 == 0 { Self.verify(map, model, "seed \(seed) step \(step)") }
        }
        let absent = ids.prefix(100).map { StreamID("Unknown", $0) } + ids.prefix(100).map { StreamID("Post", $0) }
        Self.verify(map, model, absent: absent, "seed \(seed) at the end")
        #expect(capacities.count >= 10, "the table grew through several sizes: \(capacities.sorted())")
    }

    /// The same id under several entity types is several streams (`Thread/x` is not `Post/x`).
    @Test func oneIdUnderSeveralEntityTypes() {
        var map = StreamVersionMap()
        var model: [StreamID: UInt64] = [:]
        var rng = SplitMix64(seed: 21)
        for _ in 0..<50 {
            let id = EntityID.uuid(Self.randomUUID(&rng))
            for (n, type) in ["Thread", "Post", "Reply"].enumerated() {
                map[StreamID(type, id)] = UInt64(n + 1)
                model[StreamID(type, id)] = UInt64(n + 1)
            }
        }
        Self.verify(map, model)
        map.removeEntries(ofEntityType: "Post")
        model = model.filter { $0.key.entityType != "Post" }
        Self.verify(map, model, absent: model.keys.map { StreamID("Post", $0.entityID) })
    }

    /// Runs of ids sharing one home slot, of two entity types interleaved, so each type's
    /// entries sit in the middle of the other's probe run: removing one type leaves every entry
    /// of the other findable; so does overwriting entries at the end of a run.
    @Test func removingAnEntityTypeFromTheMiddleOfProbeRuns() {
        var map = StreamVersionMap()
        var model: [StreamID: UInt64] = [:]
        // Interns A (code 0) and B (code 1) and sizes the table at 16 slots.
        for type in ["A", "B"] {
            let stream = StreamID(type, .string("seed"))
            map[stream] = 1
            model[stream] = 1
        }
        map.reserveCapacity(12)
        let capacity = map.slots.count
        #expect(capacity >= 15)
        var rng = SplitMix64(seed: 22)
        func ids(code: UInt64, home: Int, count: Int) -> [UUID] {
            var found: [UUID] = []
            while found.count < count {
                let (high, low) = (rng.next(), rng.next())
                if StreamVersionMap.home(high, low, code, capacity) == home { found.append(Self.uuid(high, low)) }
            }
            return found
        }
        let a = ids(code: 0, home: capacity - 2, count: 5)
        let b = ids(code: 1, home: capacity - 2, count: 5)
        for i in 0..<5 {
            for (type, id) in [("A", a[i]), ("B", b[i])] {
                map[StreamID(type, .uuid(id))] = UInt64(i + 10)
                model[StreamID(type, .uuid(id))] = UInt64(i + 10)
            }
        }
        #expect(map.slots.count == capacity, "no resize: the run wraps the end of the table")
        Self.verify(map, model)
        // Overwrite the last of the run: found again, not added.
        map[StreamID("B", .uuid(b[4]))] = 99
        model[StreamID("B", .uuid(b[4]))] = 99
        Self.verify(map, model)
        map.removeEntries(ofEntityType: "A")
        model = model.filter { $0.key.entityType != "A" }
        Self.verify(map, model, absent: a.map { StreamID("A", .uuid($0)) })
    }

    /// A map rebuilt from another's entries in slot order, sized first (what restoring the
    /// version table's snapshot does), holds the same entries.
    @Test(arguments: [0, 1, 10, 5_000])
    func rebuildingInSlotOrder(count: Int) {
        var rng = SplitMix64(seed: UInt64(31 + count))
        var map = StreamVersionMap()
        var model: [StreamID: UInt64] = [:]
        for n in 0..<count {
            let stream = StreamID(n % 3 == 0 ? "Shift" : "Worker", n % 10 == 0 ? .string("s\(n)") : .uuid(Self.randomUUID(&rng)))
            map[stream] = UInt64(n + 1)
            model[stream] = UInt64(n + 1)
        }
        var restored = StreamVersionMap()
        restored.reserveCapacity(map.count)
        map.forEach { code, id, version in restored[StreamID(map.typeNames[code], id)] = version }
        Self.verify(restored, model)
    }
}
