/// The key of every row in one declared index, by slot: what an update or a removal finds the
/// row's old entry by, what a tie between two long keys compares, what a cursor records and
/// where an interval index reads a row's start.
///
/// Two representations, as the index's entries (``IndexStorage``): while every key stored has one
/// component whose encoding fits 9 bytes (numbers, dates, Booleans, `nil`, short strings), each
/// row keeps the encoding's 9 bytes (a tag and a word; the key is decoded from them when read);
/// the first longer key moves every row to ``IndexKey``s (56 bytes), until the next
/// ``restore(_:)`` (which goes back to narrow when every key then fits).
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
    /// Per slot while ``isNarrow``: the encoding's first byte.
    private(set) var tags: [UInt8] = []
    /// Per slot while ``isNarrow``: the encoding's next eight bytes, big-endian.
    private(set) var bits: [UInt64] = []
    /// Per slot unless ``isNarrow``.
    private(set) var full: [IndexKey] = []
    /// Whether the rows keep encodings (every key stored fits 9 bytes and has one component).
    private(set) var isNarrow: Bool

    init(descending: [Bool]) {
        self.descending = descending
        self.isNarrow = descending.count == 1
    }

    /// The number of slots.
    var count: Int { isNarrow ? tags.count : full.count }

    /// The key of `slot`.
    @inline(__always)
    subscript(slot: Int32) -> IndexKey {
        isNarrow ? IndexKey(Self.decode(tag: tags[Int(slot)], bits: bits[Int(slot)], descending: descending[0])) : full[Int(slot)]
    }

    /// Component `c` of the key of `slot` (without building the key when it is stored whole).
    @inline(__always)
    func component(_ slot: Int32, _ c: Int) -> IndexValue {
        if isNarrow { return Self.decode(tag: tags[Int(slot)], bits: bits[Int(slot)], descending: descending[0]) }
        return full.withUnsafeBufferPointer { keys in
            let key = keys.baseAddress! + Int(slot)
            return c == 0 ? key.pointee.first : c == 1 ? key.pointee.second : key.pointee[c]
        }
    }

    /// Stores `key` (its encoding `normalized`) as the key of `slot`, appending when `slot` is
    /// ``count``.
    mutating func set(_ slot: Int32, _ key: IndexKey, normalized: NormalizedKey) {
        if isNarrow && !normalized.fitsNarrow { widen(reservingCapacity: tags.count + 1) }
        let i = Int(slot)
        if isNarrow {
            let (tag, word) = Self.narrowBytes(normalized)
            if i == tags.count {
                tags.append(tag)
                bits.append(word)
            } else {
                tags[i] = tag
                bits[i] = word
            }
        } else if i == full.count {
            full.append(key)
        } else {
            full[i] = key
        }
    }

    /// Stores `key` as the key of `slot`, appending when `slot` is ``count``: ``set(_:_:normalized:)``
    /// for a caller that has not encoded it.
    mutating func set(_ slot: Int32, _ key: IndexKey) {
        set(slot, key, normalized: NormalizedKey(key, descending: descending))
    }

    /// Whether `slot` holds the key encoded as `normalized`, from the stored 9 bytes (no key
    /// decoded); `nil` when the column or the key is not narrow, for the caller to compare keys.
    /// Equal bytes are the same entry: the encoding is all a narrow row keeps of its key.
    @inline(__always)
    func holds(_ slot: Int32, _ normalized: NormalizedKey) -> Bool? {
        guard isNarrow, normalized.fitsNarrow else { return nil }
        let (tag, word) = Self.narrowBytes(normalized)
        return tags[Int(slot)] == tag && bits[Int(slot)] == word
    }

    /// Compares the key of `slot` with a key of one component whose encoding's 9 bytes are
    /// `bound` (``narrowBytes(_:)``), in the encoding's order (the column's, directions applied),
    /// when the row is narrow and its tag is the bound's: the order of two values of one kind is
    /// the order of their encodings' words, so no key is decoded. `nil` otherwise (another kind,
    /// `nil`, a wide column), for the caller to compare decoded values.
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

    /// Replaces every slot's key with `keys` (a snapshot's, by slot): narrow when every key fits.
    mutating func restore(_ keys: some Collection<IndexKey>) {
        tags = []
        bits = []
        full = []
        isNarrow = descending.count == 1
        guard isNarrow else {
            // Composite keys are never narrow: no encoding to compute, and one allocation of the
            // exact size (appending would double up to twice the 56 bytes a row needs).
            full = Array(keys)
            return
        }
        tags.reserveCapacity(keys.count)
        bits.reserveCapacity(keys.count)
        for key in keys {
            let normalized = NormalizedKey(key, descending: descending)
            if isNarrow && !normalized.fitsNarrow { widen(reservingCapacity: keys.count) }
            set(Int32(count), key, normalized: normalized)
        }
    }

    /// Moves every row to whole keys: a key that does not fit 9 bytes is coming.
    /// - Parameter capacity: The number of keys `full` is to have room for (at least ``count``).
    private mutating func widen(reservingCapacity capacity: Int) {
        var keys: [IndexKey] = []
        keys.reserveCapacity(Swift.max(capacity, tags.count))
        for i in tags.indices { keys.append(IndexKey(Self.decode(tag: tags[i], bits: bits[i], descending: descending[0]))) }
        full = keys
        tags = []
        bits = []
        isNarrow = false
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
