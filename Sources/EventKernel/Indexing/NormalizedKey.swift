import Foundation

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

        /// Writes `value`'s eight bytes, big-endian: into at most two words at once while they
        /// fit the inline bytes (byte by byte, numbers and dates were the largest part of
        /// encoding a snapshot's keys at open: perf, `BenchProbe generic-activities-open`).
        mutating func word(_ value: UInt64) {
            guard count + 8 <= NormalizedKey.inlineBytes else {
                var shift: UInt64 = 56
                for _ in 0..<8 {
                    byte(UInt8(truncatingIfNeeded: value >> shift))
                    shift &-= 8
                }
                return
            }
            let bits = invert ? ~value : value
            let offset = UInt64(count % 8) * 8
            or(count / 8, bits >> offset)
            if offset != 0 { or(count / 8 + 1, bits << (64 - offset)) }
            count += 8
            key.length = UInt16(clamping: count)
        }

        @inline(__always)
        private mutating func or(_ word: Int, _ bits: UInt64) {
            switch word {
            case 0: key.w0 |= bits
            case 1: key.w1 |= bits
            case 2: key.w2 |= bits
            default: key.w3 |= bits
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

/// The first 28 bytes of an index key's encoding (``NormalizedKey``), for a key whose whole
/// encoding fits them: what an index entry keeps (``CompactSlot``, three words, a 4-byte tail,
/// the slot and the sequence in 40 bytes) and a ``KeyColumn`` per row (the words, and the tails
/// only once some key is longer than 24 bytes), for keys of several components (and
/// one-component keys too long for 9 bytes), where an ``IndexKey`` is 56 bytes and a
/// ``KeyedSlot``'s key 34.
///
/// Why 28: Activities' `(type, start)` encodes in 13 bytes for "Tummy time" and 9 for the
/// start, 22 in all; a UUID in 17; and UUID-led composite keys, the common layout of the apps'
/// indexes, in 26 (a ledger's `(accountID, date)`) to 28 (a forum's `(forumID, isSticky,
/// lastPostDate)`), which the slot's padding holds. Longer keys (long strings) move a column or
/// an index to whole keys at the first one.
struct CompactKey: Sendable, Equatable {
    var w0: UInt64, w1: UInt64, w2: UInt64
    /// Bytes 24 to 27, big-endian.
    var tail: UInt32

    /// The longest encoding a compact key holds whole.
    static let bytes = 28

    /// The first 28 bytes of `key`, which must fit them (``NormalizedKey/fitsCompact``).
    @inline(__always)
    init(_ key: NormalizedKey) {
        w0 = key.w0
        w1 = key.w1
        w2 = key.w2
        tail = UInt32(truncatingIfNeeded: key.w3 >> 32)
    }

    @inline(__always)
    init(w0: UInt64, w1: UInt64, w2: UInt64, tail: UInt32) {
        self.w0 = w0
        self.w1 = w1
        self.w2 = w2
        self.tail = tail
    }

    /// The encoding, its length recorded as ``bytes``: a comparison reads only whether a key is
    /// exact, and a compact key always is. (``NormalizedKey/encodedLength(components:descending:)``
    /// gives its real length where a caller needs that.)
    @inline(__always)
    var normalized: NormalizedKey {
        var key = NormalizedKey()
        key.w0 = w0
        key.w1 = w1
        key.w2 = w2
        key.w3 = UInt64(tail) << 32
        key.length = UInt16(Self.bytes)
        return key
    }
}

extension NormalizedKey {
    /// Whether a ``CompactKey`` holds this encoding whole.
    var fitsCompact: Bool { length <= UInt16(CompactKey.bytes) }

    /// Byte `i` of the inline words; private: its one caller, `byte(_:invert:)`, checks that `i`
    /// is below 32 (past that, the shift would read a wrong word's byte silently).
    @inline(__always)
    private func byte(_ i: Int) -> UInt8 {
        let word = switch i >> 3 { case 0: w0; case 1: w1; case 2: w2; default: w3 }
        return UInt8(truncatingIfNeeded: word >> UInt64(56 - (i & 7) * 8))
    }

    /// The encoding without its first `count` bytes (at most ``length``, of an exact key): what
    /// follows a prefix of components, which orders as those components do.
    @inline(__always)
    func droppingFirst(_ count: Int) -> NormalizedKey {
        precondition(isExact && count >= 0 && count <= Int(length), "NormalizedKey: \(count) bytes dropped of \(length)")
        // Written out (the words moved by whole words, then by the bytes left): with a nested
        // function per word it was not inlined, and took a twelfth of a two-types window.
        let (x0, x1, x2, x3): (UInt64, UInt64, UInt64, UInt64) = switch count >> 3 {
        case 0: (w0, w1, w2, w3)
        case 1: (w1, w2, w3, 0)
        case 2: (w2, w3, 0, 0)
        case 3: (w3, 0, 0, 0)
        default: (0, 0, 0, 0)
        }
        var out = NormalizedKey()
        let shift = UInt64((count & 7) << 3)
        if shift == 0 {
            out.w0 = x0
            out.w1 = x1
            out.w2 = x2
            out.w3 = x3
        } else {
            out.w0 = x0 << shift | x1 >> (64 - shift)
            out.w1 = x1 << shift | x2 >> (64 - shift)
            out.w2 = x2 << shift | x3 >> (64 - shift)
            out.w3 = x3 << shift
        }
        out.length = length - UInt16(count)
        return out
    }

    /// Bytes `i` to `i + 7` (`i + 8` at most 32), big-endian, inverted when `invert`: from the
    /// one or two words they straddle (a number's 8 bytes follow its tag, so never aligned).
    @inline(__always)
    private func word(_ i: Int, invert: Bool) -> UInt64 {
        precondition(i >= 0 && i + 8 <= Self.inlineBytes, "an encoding reads past its 32 inline bytes")
        func at(_ w: Int) -> UInt64 { switch w { case 0: w0; case 1: w1; case 2: w2; default: w3 } }
        let shift = UInt64((i & 7) * 8)
        let w = i >> 3
        let bits = shift == 0 ? at(w) : at(w) << shift | at(w + 1) >> (64 - shift)
        return invert ? ~bits : bits
    }

    /// Byte `i` (below 32), inverted when `invert`.
    @inline(__always)
    private func byte(_ i: Int, invert: Bool) -> UInt8 {
        precondition(i >= 0 && i < Self.inlineBytes, "an encoding reads past its 32 inline bytes")
        return invert ? ~byte(i) : byte(i)
    }

    /// Where the component whose encoding starts at byte `offset` ends (the next one's start),
    /// in an exact key (its bytes all inline). Each component's encoding is prefix-free, so its
    /// bytes say where it ends: the inverse of the encoding needs no lengths.
    /// - Parameter descending: The component's direction (its bytes are inverted).
    @inline(__always)
    func componentEnd(at offset: Int, descending: Bool) -> Int {
        let tag = byte(offset, invert: descending)
        switch tag {
        case 0x01: return offset + 1
        case 0x02: return offset + 2
        case 0x03, 0x04, 0x05: return offset + 9
        case 0x06:
            var i = offset + 1
            // `00 FF` is a NUL in the string, `00 00` its end.
            while true {
                if byte(i, invert: descending) == 0 {
                    if byte(i + 1, invert: descending) == 0 { return i + 2 }
                    i += 1
                }
                i += 1
            }
        case 0x07: return offset + 17
        default: preconditionFailure("NormalizedKey: tag \(tag) at byte \(offset) is no component's")
        }
    }

    /// The component whose encoding starts at byte `offset` of an exact key, and where it ends.
    /// - Parameter descending: The component's direction (its bytes are inverted).
    @inline(__always)
    func component(at offset: Int, descending: Bool) -> (value: IndexValue, end: Int) {
        let tag = byte(offset, invert: descending)
        let sign: UInt64 = 1 << 63
        switch tag {
        case 0x01: return (.null, offset + 1)
        case 0x02: return (.bool(byte(offset + 1, invert: descending) != 0), offset + 2)
        case 0x03: return (.int(Int64(bitPattern: word(offset + 1, invert: descending) ^ sign)), offset + 9)
        case 0x04: return (.uint(word(offset + 1, invert: descending)), offset + 9)
        case 0x05:
            let b = word(offset + 1, invert: descending)
            return (.double(Double(bitPattern: b & sign != 0 ? b & ~sign : ~b)), offset + 9)
        case 0x06:
            var bytes: [UInt8] = []
            var i = offset + 1
            while true {
                let c = byte(i, invert: descending)
                if c == 0 {
                    if byte(i + 1, invert: descending) == 0 { break }
                    i += 1
                }
                bytes.append(c)
                i += 1
            }
            return (.string(String(decoding: bytes, as: UTF8.self)), i + 2)
        case 0x07:
            var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &uuid) { out in for j in 0..<16 { out[j] = byte(offset + 1 + j, invert: descending) } }
            return (.uuid(UUID(uuid: uuid)), offset + 17)
        default:
            preconditionFailure("NormalizedKey: tag \(tag) at byte \(offset) is no component's")
        }
    }

    /// A reader of an exact key's components in order, each in its direction.
    struct Decoder {
        let key: NormalizedKey
        let descending: [Bool]
        /// Where the next component starts.
        private(set) var offset = 0
        /// The next component's number.
        private(set) var component = 0

        init(_ key: NormalizedKey, descending: [Bool]) {
            precondition(key.isExact, "a key longer than 32 bytes is not decoded from its encoding")
            self.key = key
            self.descending = descending
        }

        private var invert: Bool { component < descending.count && descending[component] }

        /// Skips the next component.
        mutating func skip() {
            offset = key.componentEnd(at: offset, descending: invert)
            component += 1
        }

        /// Decodes the next component.
        mutating func next() -> IndexValue {
            let (value, end) = key.component(at: offset, descending: invert)
            offset = end
            component += 1
            return value
        }
    }

    /// The key of `components` components this exact encoding is of (see ``Decoder``).
    func decoded(components: Int, descending: [Bool]) -> IndexKey {
        var decoder = Decoder(self, descending: descending)
        switch components {
        case 1: return IndexKey(decoder.next())
        case 2:
            let first = decoder.next()
            return IndexKey(first, decoder.next())
        default: return IndexKey((0..<components).map { _ in decoder.next() })
        }
    }

    /// Component `c` of this exact encoding, the ones before it skipped, not decoded.
    func component(_ c: Int, descending: [Bool]) -> IndexValue {
        var decoder = Decoder(self, descending: descending)
        for _ in 0..<c { decoder.skip() }
        return decoder.next()
    }

    /// The real length of this exact encoding of `components` components (its words may have
    /// come from a ``CompactKey``, which records 28).
    func encodedLength(components: Int, descending: [Bool]) -> Int {
        var decoder = Decoder(self, descending: descending)
        for _ in 0..<components { decoder.skip() }
        return decoder.offset
    }
}
