@_spi(Indexing) @testable import EventKernel
import Foundation
import Testing
import EventKernelTestSupport

/// The narrow representation of an index (``NarrowSlot``: the first 9 bytes of a key's
/// encoding, for one-component keys that fit) orders exactly as the wide one: every edge of
/// the encoding (negative numbers, -0.0, NaN, nil, the last byte of a number, descending) and
/// ties by insertion order in both directions, against a model written without the encoding.
@Suite struct NarrowIndexTests {
    /// An index of one component, fed keys in a given order (slot i has `values[i]`, sequence i).
    struct Fixture {
        var storage: IndexStorage
        var keys: [IndexKey] = []
        var column: KeyColumn

        init(descending: Bool) {
            storage = IndexStorage(descending: [descending])
            column = KeyColumn(descending: [descending])
        }

        var all: IndexStorage.Keys { IndexStorage.Keys(column: column) }

        mutating func insert(_ value: IndexValue) {
            keys.append(IndexKey(value))
            let slot = Int32(keys.count - 1)
            column.set(slot, keys[Int(slot)], normalized: NormalizedKey(keys[Int(slot)], descending: storage.descending))
            storage.insert(keys[Int(slot)], sequence: UInt64(slot), slot: slot, keys: all)
            #expect(column.layout == storage.layout, "the column and the entries widen together")
        }

        /// Removes by the key the column reads back (decoded, when narrow), as the table does.
        mutating func remove(slot: Int32) {
            storage.remove(column[slot], sequence: UInt64(slot), keys: all)
        }

        func slots(reversed: Bool = false) -> [Int32] {
            var out: [Int32] = []
            storage.scan(from: storage.startPosition, to: storage.endPosition, reversed: reversed) { out.append($0.slot); return true }
            return out
        }
    }

    /// The order the encoding must give, written from the type's rules: `nil` first, numbers by
    /// value with -0.0 equal to 0.0, every NaN one value above infinity; Booleans false first;
    /// strings by UTF-8 bytes.
    static func modelCompare(_ a: IndexValue, _ b: IndexValue) -> Int {
        func rank(_ v: IndexValue) -> Int {
            switch v {
            case .null: 0
            case .bool: 1
            case .int, .uint: 2
            case .double(let d): d.isNaN ? 4 : 3
            case .string: 5
            case .uuid: 6
            }
        }
        let (ra, rb) = (rank(a), rank(b))
        if ra != rb { return ra < rb ? -1 : 1 }
        if ra == 4 { return 0 }
        return IndexValue.compare(a, b)
    }

    /// Slots sorted by the model: key in the index's direction, ties by slot (= sequence) in it.
    static func expected(_ values: [IndexValue], descending: Bool) -> [Int32] {
        values.indices.sorted { i, j in
            let c = modelCompare(values[i], values[j])
            if c != 0 { return descending ? c > 0 : c < 0 }
            return descending ? i > j : i < j
        }.map(Int32.init)
    }

    static let doubles: [IndexValue] = [
        .double(1), .double(-1), .double(-0.0), .double(0), .double(.nan), .double(-.infinity), .double(.infinity),
        .double(1.0.nextUp), .double(-(1.0.nextUp)), .double(.leastNonzeroMagnitude), .double(-.leastNonzeroMagnitude),
        .double(-.nan), .double(1), .null, .double(-0.0), .null, .double(.greatestFiniteMagnitude),
    ]
    static let integers: [IndexValue] = [
        .int(1), .int(2), .int(-1), .int(0), .int(.min), .int(.max), .int(256), .int(257), .int(-256), .int(-257),
        .null, .int(2), .uint(UInt64(Int64.max) + 1), .uint(.max), .int(1), .null,
    ]
    static let booleans: [IndexValue] = [.bool(true), .bool(false), .null, .bool(true), .bool(false), .null]

    @Test(arguments: [false, true])
    func narrowEntriesOrderAsTheModelBothWays(descending: Bool) {
        var rng = SplitMix64(seed: descending ? 7 : 3)
        for values in [Self.doubles, Self.integers, Self.booleans] {
            // Inserted in several orders: a wrong encoding or tie-break shows in one of them.
            for round in 0..<8 {
                var order = Array(values.indices)
                if round == 1 { order.reverse() }
                if round > 1 { order.shuffle(using: &rng) }
                var fixture = Fixture(descending: descending)
                var inserted: [IndexValue] = []
                for i in order {
                    fixture.insert(values[i])
                    inserted.append(values[i])
                }
                #expect(fixture.storage.isNarrow)
                let expected = Self.expected(inserted, descending: descending)
                #expect(fixture.slots() == expected, "\(inserted)")
                #expect(fixture.slots(reversed: true) == expected.reversed())
            }
        }
    }

    /// Removal finds the row's own entry among equal keys (by sequence), in both representations.
    @Test(arguments: [false, true])
    func removalTakesTheRowsOwnEntryAmongEqualKeys(descending: Bool) {
        for long in [false, true] {
            var fixture = Fixture(descending: descending)
            let values: [IndexValue] = long
                ? [.string("same key, longer than nine bytes"), .string("a"), .string("same key, longer than nine bytes"), .string("same key, longer than nine bytes")]
                : [.double(5), .double(-0.0), .double(5), .double(0), .double(5)]
            for value in values { fixture.insert(value) }
            #expect(fixture.storage.isNarrow == !long)
            fixture.remove(slot: 2)
            let expected = Self.expected(values, descending: descending).filter { $0 != 2 }
            #expect(fixture.slots() == expected)
            fixture.remove(slot: 1)
            #expect(fixture.slots() == expected.filter { $0 != 1 })
            #expect(fixture.storage.count == values.count - 2)
        }
    }

    /// Short strings fit the narrow entries; the first longer key moves every entry to the
    /// wide ones, in the same order, and later inserts and removals keep it.
    @Test(arguments: [false, true])
    func aLongKeyWidensTheIndexKeepingItsOrder(descending: Bool) {
        var fixture = Fixture(descending: descending)
        var values: [IndexValue] = [.string("b"), .string(""), .string("a\u{0}"), .string("a"), .null, .string("ab"), .string("b")]
        for value in values { fixture.insert(value) }
        #expect(fixture.storage.isNarrow, "strings of up to six bytes fit nine")
        #expect(fixture.slots() == Self.expected(values, descending: descending))
        for value in [IndexValue.string("a long name past nine bytes"), .string("a"), .string("a long name past nine bytes"), .string("c")] {
            fixture.insert(value)
            values.append(value)
        }
        #expect(!fixture.storage.isNarrow)
        #expect(fixture.slots() == Self.expected(values, descending: descending))
        #expect(fixture.slots(reversed: true) == Self.expected(values, descending: descending).reversed())
        fixture.remove(slot: 0)
        fixture.remove(slot: 7)
        #expect(fixture.slots() == Self.expected(values, descending: descending).filter { $0 != 0 && $0 != 7 })
        #if EVENTKERNEL_INTERNAL_CHECKS
        #expect(fixture.storage.invariantViolations(keys: fixture.all) == [])
        #endif
    }

    /// A row's key read back from its column finds the same entry: it encodes exactly as the
    /// stored key, and compares equal to it (NaN aside: every NaN reads back as one NaN).
    @Test(arguments: [false, true])
    func narrowKeysReadBackAsTheirValues(descending: Bool) {
        let strings: [IndexValue] = [.string(""), .string("a"), .string("ab\u{0}"), .string("\u{0}\u{0}"), .string("é"), .string("abcdef")]
        let values = Self.doubles + Self.integers + Self.booleans + strings
        for value in values {
            var column = KeyColumn(descending: [descending])
            let key = IndexKey(value), encoded = NormalizedKey(key, descending: [descending])
            column.set(0, key, normalized: encoded)
            #expect(column.isNarrow, "\(value) fits nine bytes")
            let back = column[0]
            let reencoded = NormalizedKey(back, descending: [descending])
            #expect(reencoded.w0 == encoded.w0 && reencoded.w1 == encoded.w1 && reencoded.length == encoded.length, "\(value) read back as \(back.first)")
            if case .double(let d) = value, d.isNaN {
                if case .double(let e) = back.first { #expect(e.isNaN) } else { Issue.record("NaN read back as \(back.first)") }
            } else {
                #expect(IndexValue.compare(back.first, value) == 0, "\(value) read back as \(back.first)")
                #expect(column.component(0, 0) == back.first)
            }
        }
        // A key that does not fit moves the whole column to whole keys, the others read back.
        var column = KeyColumn(descending: [descending])
        for (slot, value) in [IndexValue.int(-7), .string("ab"), .string("longer than twenty-four bytes")].enumerated() {
            let key = IndexKey(value)
            column.set(Int32(slot), key, normalized: NormalizedKey(key, descending: [descending]))
        }
        #expect(!column.isNarrow && column.count == 3)
        #expect(column[0].first == .int(-7) && column[1].first == .string("ab") && column[2].first == .string("longer than twenty-four bytes"))
        column.restore([IndexKey(.int(1)), IndexKey(.null)])
        #expect(column.isNarrow && column.count == 2 && column[1].first == .null)
        #expect(!KeyColumn(descending: [false, true]).isNarrow)
    }

    /// Restoring a column allocates its keys once, at the size needed: a composite column whose
    /// keys fit 24 bytes (compact), one that a long key moves to whole keys midway, and a narrow
    /// one that a long key widens midway. Appending would double the array, up to twice the
    /// bytes a row needs. 1,025 keys: one past a doubling.
    @Test func restoredColumnsReserveTheirKeysOnce() {
        let n = 1_025
        var composite = KeyColumn(descending: [false, true])
        composite.restore((0..<n).map { IndexKey([.string("type \($0 % 7)"), .int(Int64($0))]) })
        #expect(composite.count == n && composite.layout == .compact)
        #expect(composite.compact.capacity < n + n / 8, "capacity \(composite.compact.capacity) for \(n) keys")
        #expect(composite.component(Int32(n - 1), 0) == .string("type \((n - 1) % 7)") && composite.component(Int32(n - 1), 1) == .int(Int64(n - 1)))
        var long = KeyColumn(descending: [false, true])
        long.restore((0..<n).map { IndexKey([.string($0 == n / 2 ? "a type name past 24 bytes" : "type \($0 % 7)"), .int(Int64($0))]) })
        #expect(long.count == n && long.layout == .full && long.compact.isEmpty)
        #expect(long.full.capacity < n + n / 8, "capacity \(long.full.capacity) for \(n) keys")
        #expect(long[0].values == [.string("type 0"), .int(0)] && long[Int32(n / 2)].values == [.string("a type name past 24 bytes"), .int(Int64(n / 2))])
        var widened = KeyColumn(descending: [false])
        widened.restore((0..<n).map { IndexKey(.string($0 == n - 1 ? "longer than twenty-four bytes" : "k\($0)")) })
        #expect(widened.count == n && widened.layout == .full)
        #expect(widened.full.capacity < n + n / 8, "capacity \(widened.full.capacity) for \(n) keys")
        #expect(widened[0].first == .string("k0") && widened[Int32(n - 1)].first == .string("longer than twenty-four bytes"))
    }

    /// Restoring (``IndexStorage/replaceEntries(withSorted:)``) picks the representation from
    /// the keys, and a composite index is never narrow.
    @Test func restoredEntriesAreNarrowOnlyWhenEveryKeyFits() {
        func entry(_ value: IndexValue, _ slot: Int32) -> KeyedSlot {
            KeyedSlot(key: NormalizedKey([value], descending: [false]), slot: slot, sequence: UInt64(slot))
        }
        var storage = IndexStorage(descending: [false])
        storage.replaceEntries(withSorted: [entry(.null, 2), entry(.int(-3), 0), entry(.int(4), 1)])
        #expect(storage.isNarrow && storage.count == 3)
        var slots: [Int32] = []
        storage.scan(from: storage.startPosition, to: storage.endPosition, reversed: false) { slots.append($0.slot); return true }
        #expect(slots == [2, 0, 1])
        storage.replaceEntries(withSorted: [entry(.int(-3), 0), entry(.string("longer than nine"), 1)])
        #expect(!storage.isNarrow && storage.count == 2)
        #expect(!IndexStorage(descending: [false, false]).isNarrow)
        #expect(MemoryLayout<NarrowSlot>.stride == 24)
        storage.replaceEntries(withSorted: [entry(.int(-3), 0), entry(.string("longer than twenty-four bytes"), 1)])
        #expect(storage.layout == .full && storage.count == 2)
    }
}
