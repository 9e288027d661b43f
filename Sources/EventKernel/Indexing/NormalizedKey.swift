/// The start of an index key's order-preserving byte encoding: comparing two keys' bytes
/// compares the keys, component by component, in each component's direction. The first 32
/// bytes are kept inline as four big-endian words; ``length`` says whether that is all of it.
///
/// Why: every binary search of an index compared its entries' keys as `IndexValue`s, an enum
/// per component with a `String` or `UUID` payload: a switch, payload copies (retain and
/// release for strings) and 72-byte entries to move on every insert. A ledger add at a million
/// transactions spent half its time in those searches and moves (measured with `perf` on
/// `BenchProbe ledger-add`). Four word comparisons decide nearly every comparison now, and an
/// entry is 48 bytes. Keys whose encoding is longer than 32 bytes (long strings) tie more
/// often on their first 32; a tie then falls back to comparing the components, which the
/// table keeps beside (its ``KeyColumn``, `IndexedRows.columns`).
///
/// The encoding, per component (then inverted byte by byte for a descending component, which
/// keeps it prefix-free and reverses its order):
/// - `null` `01`; `false` `02 00`, `true` `02 01` (by rank, as ``IndexValue/compare(_:_:)``);
/// - an integer `03` and its 8 bytes big-endian with the sign bit flipped; an unsigned integer
///   beyond `Int64.max` `04` and its 8 bytes; a double `05` and its bits big-endian, negative
///   ones inverted and others with the sign bit set (`-0.0` as `0.0`, every NaN as one NaN
///   above infinity);
/// - a string `06`, its UTF-8 bytes with `00` written `00 FF`, then `00 00`;
/// - a UUID `07` and its 16 bytes.
/// Each component's encoding is prefix-free, so the concatenation orders lexicographically by
/// component. A component's values share a case (a property has one Swift type), which is
/// what lets integers and doubles take different tags.
struct NormalizedKey: Sendable {
    /// The first 32 bytes, as words compared in order; zeros after the end.
    var w0: UInt64 = 0, w1: UInt64 = 0, w2: UInt64 = 0, w3: UInt64 = 0
    /// The encoding's length in bytes, saturated at `UInt16.max`; above 32 the words hold a
    /// prefix only.
    var length: UInt16 = 0

    /// Bytes kept inline.
    static let inlineBytes = 32

    /// Whether the words hold the whole encoding.
    var isExact: Bool { length <= UInt16(Self.inlineBytes) }

    init() {}

    /// Encodes `components`, each in its direction (`descending[i]`; missing directions are
    /// ascending).
    init(_ components: some Sequence<IndexValue>, descending: [Bool]) {
        var writer = Writer()
        for (i, component) in components.enumerated() {
            writer.invert = i < descending.count && descending[i]
            writer.put(component)
        }
        self = writer.key
    }

    /// Encodes `components` then `last` (when not `nil`), each in its direction: a prefix and
    /// a range's bound after it, without concatenating them into one array.
    init(_ components: [IndexValue], then last: IndexValue?, descending: [Bool]) {
        var writer = Writer()
        for i in components.indices {
            writer.invert = i < descending.count && descending[i]
            writer.put(components[i])
        }
        if let last {
            let i = components.count
            writer.invert = i < descending.count && descending[i]
            writer.put(last)
        }
        self = writer.key
    }

    /// Encodes `key`'s components, each in its direction. (Not through `IndexKey.values`: that
    /// builds an array, an allocation per index for every add and restored entry.)
    init(_ key: IndexKey, descending: [Bool]) {
        var writer = Writer()
        for i in 0..<key.count {
            writer.invert = i < descending.count && descending[i]
            writer.put(key[i])
        }
        self = writer.key
    }

    /// Compares the first `count` bytes (at most 32) of two encodings: -1, 0 or 1.
    @inline(__always)
    static func compare(_ a: NormalizedKey, _ b: NormalizedKey, bytes count: Int) -> Int {
        if count >= 32 {
            if a.w0 != b.w0 { return a.w0 < b.w0 ? -1 : 1 }
            if a.w1 != b.w1 { return a.w1 < b.w1 ? -1 : 1 }
            if a.w2 != b.w2 { return a.w2 < b.w2 ? -1 : 1 }
            return a.w3 == b.w3 ? 0 : (a.w3 < b.w3 ? -1 : 1)
        }
        return comparePrefix(a, b, bytes: count)
    }

    private static func comparePrefix(_ a: NormalizedKey, _ b: NormalizedKey, bytes count: Int) -> Int {
        var left = count
        for word in 0..<4 {
            guard left > 0 else { return 0 }
            let (x, y) = switch word { case 0: (a.w0, b.w0); case 1: (a.w1, b.w1); case 2: (a.w2, b.w2); default: (a.w3, b.w3) }
            let mask: UInt64 = left >= 8 ? .max : ~(UInt64.max >> UInt64(left * 8))
            let (mx, my) = (x & mask, y & mask)
            if mx != my { return mx < my ? -1 : 1 }
            left -= 8
        }
        return 0
    }

    /// Builds an encoding a byte at a time.
    private struct Writer {
        var key = NormalizedKey()
        var count = 0
        var invert = false

        mutating func byte(_ value: UInt8) {
            let b = invert ? ~value : value
            if count < NormalizedKey.inlineBytes {
                let shift = UInt64(56 - (count % 8) * 8)
                switch count / 8 {
                case 0: key.w0 |= UInt64(b) << shift
                case 1: key.w1 |= UInt64(b) << shift
                case 2: key.w2 |= UInt64(b) << shift
                default: key.w3 |= UInt64(b) << shift
                }
            }
            count += 1
            key.length = UInt16(clamping: count)
        }

        mutating func word(_ value: UInt64) {
            var shift: UInt64 = 56
            for _ in 0..<8 {
                byte(UInt8(truncatingIfNeeded: value >> shift))
                shift &-= 8
            }
        }

        mutating func put(_ value: IndexValue) {
            switch value {
            case .null:
                byte(0x01)
            case .bool(let b):
                byte(0x02)
                byte(b ? 1 : 0)
            case .int(let i):
                byte(0x03)
                word(UInt64(bitPattern: i) ^ (1 << 63))
            case .uint(let u):
                byte(0x04)
                word(u)
            case .double(var d):
                byte(0x05)
                if d == 0 { d = 0 }  // -0.0 orders as 0.0
                let bits = d.isNaN ? Double.nan.bitPattern : d.bitPattern
                word(bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63))
            case .string(let s):
                byte(0x06)
                for c in s.utf8 {
                    byte(c)
                    if c == 0 { byte(0xFF) }
                }
                byte(0)
                byte(0)
            case .uuid(let u):
                byte(0x07)
                withUnsafeBytes(of: u.uuid) { bytes in for b in bytes { byte(b) } }
            }
        }
    }
}
