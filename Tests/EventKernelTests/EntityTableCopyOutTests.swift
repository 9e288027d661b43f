@_spi(Indexing) @testable import EventKernel
import EventKernelTestSupport
import Foundation
import Testing

/// `EntityTable.entities(at:)` copies each entity out of its `Optional` slot's payload: checked
/// for entity layouts whose `Optional` is laid out differently (a struct with spare bit
/// patterns, whose `Optional` is its own size; one without, whose `Optional` adds a tag byte; a
/// class, whose `Optional` is a nullable pointer; an empty struct), after removals and slot
/// reuse, against the entities read one by one.
@Suite struct EntityTableCopyOutTests {
    struct Packed: Equatable, Sendable { var a: Int, b: Int }                   // no spare bits
    struct WithString: Equatable, Sendable { var name: String, n: Int, flag: Bool }
    struct Empty: Equatable, Sendable {}
    final class Box: Equatable, Sendable {
        let value: Int
        init(_ value: Int) { self.value = value }
        static func == (a: Box, b: Box) -> Bool { a.value == b.value }
    }

    /// Fills a table from `make`, removes every third entity, re-adds some (reusing slots) and
    /// compares `entities(at:)` of every live slot, in a shuffled order, with subscripting.
    static func check<Entity: Equatable & Sendable>(_ make: (Int) -> Entity) {
        var table = EntityTable<Entity>(indexes: [])
        var random = SplitMix64(seed: 26)
        let ids = (0..<300).map { EntityID.string("e\($0)") }
        for (n, id) in ids.enumerated() { table.upsert(make(n), id: id, version: 1, keys: []) }
        for (n, id) in ids.enumerated() where n % 3 == 0 { table.remove(id, version: 2) }
        for (n, id) in ids.enumerated() where n % 6 == 0 { table.upsert(make(n + 1_000), id: id, version: 3, keys: []) }
        var live = ids.compactMap { table.rows.slot(of: $0) }
        for i in live.indices.reversed() where i > 0 { live.swapAt(i, Int(random.next() % UInt64(i + 1))) }
        let copied = table.entities(at: live)
        #expect(copied.count == live.count)
        #expect(copied == live.map { table.bySlot[Int($0)]! })
        #expect(table.entities(at: []).isEmpty)
        #expect(table.entities(at: live[3..<40]) == copied[3..<40].map { $0 })
    }

    @Test func copiesEveryLayoutOfEntity() {
        #expect(MemoryLayout<Packed?>.size == MemoryLayout<Packed>.size + 1, "the premise: Packed has no spare bits")
        #expect(MemoryLayout<WithString?>.size == MemoryLayout<WithString>.size, "the premise: WithString's Optional uses spare bits")
        Self.check { Packed(a: $0, b: -$0) }
        Self.check { WithString(name: "entity number \($0) with a name longer than fifteen bytes", n: $0, flag: $0 % 2 == 0) }
        Self.check { _ in Empty() }
        Self.check { Box($0) }
        Self.check { "\($0)" }
    }

    /// The copies own their values: the table's entities released (replaced, removed, the
    /// table dropped) leave the copies intact (AddressSanitizer would report a use after free).
    @Test func copiesOutliveTheTable() {
        var copies: [Box] = []
        do {
            var table = EntityTable<Box>(indexes: [])
            for n in 0..<64 { table.upsert(Box(n), id: .string("b\(n)"), version: 1, keys: []) }
            copies = table.entities(at: (0..<64).map { Int32($0) })
            for n in 0..<64 { table.upsert(Box(-n), id: .string("b\(n)"), version: 2, keys: []) }
        }
        #expect(copies.map(\.value) == Array(0..<64))
    }
}
