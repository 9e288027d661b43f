/// The key of every row in one declared index, by slot: what an update or a removal finds the
/// row's old entry by, what a tie between two long keys compares, what a cursor records and
/// where an interval index reads a row's start.
///
/// Three layouts (``KeyLayout``), as the index's entries (``IndexStorage``): while every key
/// stored has one component whose encoding fits 9 bytes (numbers, dates, Booleans, `nil`,
/// short strings), each row keeps the encoding's 9 bytes (a tag and a word); while every
/// encoding fits 28 bytes (Activities' `(type, start)`, a UUID, a UUID and a date), each row
/// keeps its first 24 bytes, and bytes 24 to 27 in a second array once some key is longer
/// than 24 (``CompactKey``: a 28-byte key in one array would take a 32-byte stride, 8 bytes a
/// row more for Activities' keys, which fit 24); otherwise each row keeps an ``IndexKey`` (56 bytes). The key is decoded
/// from its encoding when read. The first key that does not fit moves every row to the
/// narrowest layout that holds it too, until the next ``restore(_:)`` (which takes the
/// narrowest layout every key then fits).
///
/// Why: the table kept a 56-byte ``IndexKey`` per row and index, components that only a tie on
/// keys longer than 32 bytes compares (dates and numbers never tie so); at 3 indexes that was
/// the largest part of the generic engine's memory per row (`BenchProbe generic-activities`).
///
/// A decoded key encodes as the stored one did (so it finds the same entry), but `-0.0` reads
/// back as `0.0` and every NaN as one NaN: the values the encoding already does not tell apart,
/// which compare equal or (NaN) as the encoding orders them.
struct KeyColumn: Sendable {
    /// The directions of the index's components.
    let descending: [Bool]
    /// Per slot while narrow: the encoding's first byte.
    private(set) var tags: [UInt8] = []
    /// Per slot while narrow: the encoding's next eight bytes, big-endian.
    private(set) var bits: [UInt64] = []
    /// Per slot while compact: the encoding's first 24 bytes.
    private(set) var compact: [CompactWords] = []
    /// Per slot while compact, once a key stored since the layout began is longer than 24
    /// bytes: the encoding's bytes 24 to 27 (``CompactKey/tail``); empty while every key fits 24.
    private(set) var tails: [UInt32] = []
    /// Per slot while full.
    private(set) var full: [IndexKey] = []
    /// How the rows keep their keys.
    private(set) var layout: KeyLayout

    init(descending: [Bool]) {
        self.descending = descending
        self.layout = KeyLayout.narrowest(components: descending.count)
    }

    /// Whether the rows keep 9-byte encodings (every key stored fits 9 bytes and has one component).
    var isNarrow: Bool { layout == .narrow }

    /// The number of slots.
    var count: Int {
        switch layout {
        case .narrow: tags.count
        case .compact: compact.count
        case .full: full.count
        }
    }

    /// The key of `slot`.
    @inline(__always)
    subscript(slot: Int32) -> IndexKey {
        switch layout {
        case .narrow: IndexKey(Self.decode(tag: tags[Int(slot)], bits: bits[Int(slot)], descending: descending[0]))
        case .compact: compactKey(slot).normalized.decoded(components: descending.count, descending: descending)
        case .full: full[Int(slot)]
        }
    }

    /// Component `c` of the key of `slot` (without building the key when it is stored whole,
    /// without decoding the components before it when it is stored encoded).
    @inline(__always)
    func component(_ slot: Int32, _ c: Int) -> IndexValue {
        switch layout {
        case .narrow:
            return Self.decode(tag: tags[Int(slot)], bits: bits[Int(slot)], descending: descending[0])
        case .compact:
            return compactKey(slot).normalized.component(c, descending: descending)
        case .full:
            return full.withUnsafeBufferPointer { keys in
                let key = keys.baseAddress! + Int(slot)
                return c == 0 ? key.pointee.first : c == 1 ? key.pointee.second : key.pointee[c]
            }
        }
    }

    /// The encoding of the key of `slot` as `NormalizedKey(self[slot], descending:)` gives it
    /// (its real length included), read from the stored bytes when the column keeps encodings.
    func normalized(_ slot: Int32) -> NormalizedKey {
        switch layout {
        case .narrow:
            var key = NormalizedKey()
            let (tag, word) = (tags[Int(slot)], bits[Int(slot)])
            key.w0 = UInt64(tag) << 56 | word >> 8
            key.w1 = word << 56
            key.length = UInt16(key.encodedLength(components: 1, descending: descending))
            return key
        case .compact:
            var key = compactKey(slot).normalized
            key.length = UInt16(key.encodedLength(components: descending.count, descending: descending))
            return key
        case .full:
            return NormalizedKey(full[Int(slot)], descending: descending)
        }
    }

    /// Stores `key` (its encoding `normalized`) as the key of `slot`, appending when `slot` is
    /// ``count``.
    mutating func set(_ slot: Int32, _ key: IndexKey, normalized: NormalizedKey) {
        let needed = KeyLayout.narrowest(for: normalized, components: descending.count)
        if needed > layout { relayout(to: needed, reservingCapacity: count + 1) }
        let i = Int(slot)
        switch layout {
        case .narrow:
            let (tag, word) = Self.narrowBytes(normalized)
            if i == tags.count {
                tags.append(tag)
                bits.append(word)
            } else {
                tags[i] = tag
                bits[i] = word
            }
        case .compact:
            setCompact(i, CompactKey(normalized))
        case .full:
            if i == full.count { full.append(key) } else { full[i] = key }
        }
    }

    /// The compact key of `slot` (the column is compact).
    @inline(__always)
    func compactKey(_ slot: Int32) -> CompactKey {
        let words = compact[Int(slot)]
        return CompactKey(w0: words.w0, w1: words.w1, w2: words.w2, tail: tails.isEmpty ? 0 : tails[Int(slot)])
    }

    /// Stores `key` at `i` (appending when `i` is the count), starting the tails at the first
    /// key longer than 24 bytes.
    @inline(__always)
    private mutating func setCompact(_ i: Int, _ key: CompactKey) {
        if key.tail != 0 && tails.isEmpty {
            tails.reserveCapacity(Swift.max(compact.capacity, compact.count + 1))
            tails.append(contentsOf: repeatElement(0, count: compact.count))
        }
        let words = CompactWords(w0: key.w0, w1: key.w1, w2: key.w2)
        if i == compact.count {
            compact.append(words)
            // `tails` may still be empty when this is the first row.
            if key.tail != 0 || !tails.isEmpty { tails.append(key.tail) }
        } else {
            compact[i] = words
            if !tails.isEmpty { tails[i] = key.tail }
        }
    }

    /// Stores `key` as the key of `slot`, appending when `slot` is ``count``: ``set(_:_:normalized:)``
    /// for a caller that has not encoded it.
    mutating func set(_ slot: Int32, _ key: IndexKey) {
        set(slot, key, normalized: NormalizedKey(key, descending: descending))
    }

    /// Whether `slot` holds the key encoded as `normalized`, from the stored bytes (no key
    /// decoded); `nil` when the column keeps whole keys or a narrow column is given a longer
    /// key, for the caller to compare keys. Equal bytes are the same entry: the encoding is all
    /// a narrow or compact row keeps of its key.
    @inline(__always)
    func holds(_ slot: Int32, _ normalized: NormalizedKey) -> Bool? {
        switch layout {
        case .narrow:
            guard normalized.fitsNarrow else { return nil }
            let (tag, word) = Self.narrowBytes(normalized)
            return tags[Int(slot)] == tag && bits[Int(slot)] == word
        case .compact:
            // A longer encoding is other bytes than any the column holds.
            return normalized.fitsCompact && compactKey(slot) == CompactKey(normalized)
        case .full:
            return nil
        }
    }

    /// Compares the key of `slot` with a key of one component whose encoding's 9 bytes are
    /// `bound` (``narrowBytes(_:)``), in the encoding's order (the column's, directions applied),
    /// when the row is narrow and its tag is the bound's: the order of two values of one kind is
    /// the order of their encodings' words, so no key is decoded. `nil` otherwise (another kind,
    /// `nil`, a wider column), for the caller to compare decoded values.
    @inline(__always)
    func compare(_ slot: Int32, narrow bound: (tag: UInt8, bits: UInt64)) -> Int? {
        guard isNarrow else { return nil }
        return tags.withUnsafeBufferPointer { tags in
            guard tags[Int(slot)] == bound.tag else { return nil }
            let word = bits.withUnsafeBufferPointer { $0[Int(slot)] }
            return word < bound.bits ? -1 : (word == bound.bits ? 0 : 1)
        }
    }

    /// The first 9 bytes of an encoding: its tag and the next eight, big-endian.
    @inline(__always)
    static func narrowBytes(_ normalized: NormalizedKey) -> (UInt8, UInt64) {
        (UInt8(truncatingIfNeeded: normalized.w0 >> 56), normalized.w0 << 8 | normalized.w1 >> 56)
    }

    /// Replaces every slot's key with `keys` (a snapshot's, by slot), in the narrowest layout
    /// every key fits.
    ///
    /// The layout is chosen by a pass over the keys before anything is reserved: starting
    /// narrow and widening at the first longer key reserved a column for every key only to free
    /// it and decode every earlier key (a UUID-led composite index's first key does not fit).
    mutating func restore(_ keys: some Collection<IndexKey>) {
        tags = []
        bits = []
        compact = []
        tails = []
        full = []
        let components = descending.count
        var target = KeyLayout.narrowest(components: components)
        var longest = 0
        // Each key is encoded once and kept for the store below: the layout pass and the store
        // each encoded every key before.
        var encoded: [NormalizedKey] = []
        encoded.reserveCapacity(keys.count)
        for key in keys where target < .full {
            let normalized = NormalizedKey(key, descending: descending)
            target = Swift.max(target, KeyLayout.narrowest(for: normalized, components: components))
            longest = Swift.max(longest, Int(normalized.length))
            encoded.append(normalized)
        }
        layout = target
        switch target {
        case .narrow:
            tags.reserveCapacity(encoded.count)
            bits.reserveCapacity(encoded.count)
            for normalized in encoded {
                let (tag, word) = Self.narrowBytes(normalized)
                tags.append(tag)
                bits.append(word)
            }
        case .compact:
            compact.reserveCapacity(encoded.count)
            if longest > CompactWords.bytes { tails.reserveCapacity(encoded.count) }
            for normalized in encoded { setCompact(compact.count, CompactKey(normalized)) }
        case .full:
            // Whole keys need no encoding: the layout pass stopped at the first that needed them.
            full = Array(keys)
        }
    }

    /// The column of `parts` one after the other, in the narrowest layout every part's keys
    /// fit: a snapshot's parts each restore their keys (``restore(_:)``) on their own thread,
    /// and joining copies the parts' arrays, encoding no key again (a part narrower than the
    /// join is widened first, as a column is at its first longer key).
    /// - Parameters:
    ///   - parts: Columns of the index whose directions are `descending`, in slot order.
    ///   - descending: The directions of the index's components.
    static func joined(_ parts: [KeyColumn], descending: [Bool]) -> KeyColumn {
        var column = KeyColumn(descending: descending)
        let target = parts.reduce(column.layout) { Swift.max($0, $1.layout) }
        let total = parts.reduce(0) { $0 + $1.count }
        column.layout = target
        switch target {
        case .narrow:
            column.tags.reserveCapacity(total)
            column.bits.reserveCapacity(total)
            for part in parts {
                column.tags.append(contentsOf: part.tags)
                column.bits.append(contentsOf: part.bits)
            }
        case .compact:
            column.compact.reserveCapacity(total)
            // Tails for every row once any part has them (a key longer than 24 bytes).
            let withTails = parts.contains { !$0.tails.isEmpty }
            if withTails { column.tails.reserveCapacity(total) }
            for var part in parts {
                if part.layout == .narrow { part.relayout(to: .compact, reservingCapacity: part.count) }
                column.compact.append(contentsOf: part.compact)
                guard withTails else { continue }
                if part.tails.isEmpty {
                    column.tails.append(contentsOf: repeatElement(0, count: part.count))
                } else {
                    column.tails.append(contentsOf: part.tails)
                }
            }
        case .full:
            column.full.reserveCapacity(total)
            for part in parts {
                if part.layout == .full {
                    column.full.append(contentsOf: part.full)
                } else {
                    for slot in 0..<part.count { column.full.append(part[Int32(slot)]) }
                }
            }
        }
        return column
    }

    /// What is wrong with the column's storage: another layout's arrays not empty, tails that
    /// are neither empty nor one per row, a row whose key needs a wider layout than the
    /// column's. Empty when consistent.
    ///
    /// Called by the table's invariant pass (`IndexedRows.keyInvariantViolations()`, builds with
    /// `EVENTKERNEL_INTERNAL_CHECKS`). - Complexity: O(n).
    func invariantViolations() -> [String] {
        var violations: [String] = []
        if layout != .narrow && (!tags.isEmpty || !bits.isEmpty) { violations.append("\(layout) column with \(tags.count) narrow rows") }
        if tags.count != bits.count { violations.append("\(tags.count) tags for \(bits.count) words") }
        if layout != .compact && (!compact.isEmpty || !tails.isEmpty) { violations.append("\(layout) column with \(compact.count) compact rows") }
        if !tails.isEmpty && tails.count != compact.count { violations.append("\(tails.count) tails for \(compact.count) compact rows") }
        if layout != .full && !full.isEmpty { violations.append("\(layout) column with \(full.count) whole keys") }
        var wider = 0
        for slot in 0..<count where KeyLayout.narrowest(for: NormalizedKey(self[Int32(slot)], descending: descending), components: descending.count) > layout {
            wider += 1
        }
        if wider > 0 { violations.append("\(wider) keys need a wider layout than \(layout)") }
        return violations
    }

    /// Moves every row to `target`, a wider layout: a key that does not fit the current one is
    /// coming.
    /// - Parameter capacity: The number of keys the new layout is to have room for (at least ``count``).
    private mutating func relayout(to target: KeyLayout, reservingCapacity capacity: Int) {
        let n = count
        switch target {
        case .narrow:
            preconditionFailure("KeyColumn: narrow is the narrowest layout")
        case .compact:
            // From narrow: 9-byte keys, no tails.
            var keys: [CompactWords] = []
            keys.reserveCapacity(Swift.max(capacity, n))
            for slot in 0..<n {
                let key = normalized(Int32(slot))
                keys.append(CompactWords(w0: key.w0, w1: key.w1, w2: key.w2))
            }
            compact = keys
        case .full:
            var keys: [IndexKey] = []
            keys.reserveCapacity(Swift.max(capacity, n))
            for slot in 0..<n { keys.append(self[Int32(slot)]) }
            full = keys
            compact = []
            tails = []
        }
        tags = []
        bits = []
        layout = target
    }

    /// The component whose encoding's first 9 bytes are `tag` and `bits` (the rest zeros), in
    /// the component's direction: the inverse of `NormalizedKey`'s encoding of one value.
    static func decode(tag: UInt8, bits: UInt64, descending: Bool) -> IndexValue {
        // Inverting all eight bytes also inverts the zeros after a short encoding's end; the
        // cases below read no byte past their own end.
        let (t, b) = descending ? (~tag, ~bits) : (tag, bits)
        let sign: UInt64 = 1 << 63
        switch t {
        case 0x01: return .null
        case 0x02: return .bool(b >> 56 != 0)
        case 0x03: return .int(Int64(bitPattern: b ^ sign))
        case 0x04: return .uint(b)
        case 0x05: return .double(Double(bitPattern: b & sign != 0 ? b & ~sign : ~b))
        case 0x06:
            var bytes: [UInt8] = []
            var i = 0
            while i < 8 {
                let byte = UInt8(truncatingIfNeeded: b >> UInt64(56 - 8 * i))
                if byte == 0 {
                    // `00 FF` is a NUL in the string, `00 00` its end.
                    guard i < 7, UInt8(truncatingIfNeeded: b >> UInt64(48 - 8 * i)) == 0xFF else { break }
                    i += 1
                }
                bytes.append(byte)
                i += 1
            }
            return .string(String(decoding: bytes, as: UTF8.self))
        default:
            preconditionFailure("KeyColumn: tag \(t) is not a narrow encoding's")
        }
    }
}

/// The first 24 bytes of a compact key (``CompactKey``), as a ``KeyColumn`` keeps them.
struct CompactWords: Sendable, Equatable {
    var w0: UInt64, w1: UInt64, w2: UInt64

    /// The bytes the words hold.
    static let bytes = 24
}

/// How a ``KeyColumn`` keeps its rows' keys and an ``IndexStorage`` its entries, narrowest
/// first: a layout holds every key a narrower one does.
enum KeyLayout: UInt8, Comparable, Sendable {
    /// One component whose encoding fits 9 bytes: a tag and a word.
    case narrow
    /// An encoding that fits 28 bytes (``CompactKey``).
    case compact
    /// Any key: whole ``IndexKey``s, ``KeyedSlot``s.
    case full

    static func < (a: KeyLayout, b: KeyLayout) -> Bool { a.rawValue < b.rawValue }

    /// Where a column or an index of keys of `components` components starts.
    static func narrowest(components: Int) -> KeyLayout { components == 1 ? .narrow : .compact }

    /// The narrowest layout that holds `key`, of `components` components.
    @inline(__always)
    static func narrowest(for key: NormalizedKey, components: Int) -> KeyLayout {
        if components == 1 && key.fitsNarrow { return .narrow }
        return key.fitsCompact ? .compact : .full
    }
}
