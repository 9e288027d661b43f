/// An entry of a declared index: the key's order-preserving encoding (``NormalizedKey``), the
/// entity's row slot and its insertion sequence (the final tie-break, so every entry is unique
/// and equal keys keep insertion order). 48 bytes: the fields are declared in this order so
/// that the slot fills the key's padding.
struct KeyedSlot: Sendable {
    var key: NormalizedKey
    var slot: Int32
    var sequence: UInt64
}

/// An entry of a declared index whose keys all encode in at most ``NormalizedKey/narrowBytes``
/// (9) bytes: one component that is `nil`, a Bool, an integer, a Double or a Date. The
/// encoding's first byte (its tag) and its next eight, the slot and the sequence: 24 bytes
/// where a ``KeyedSlot`` is 48, the fields declared so that the slot and the tag share the
/// last word.
///
/// Why: an index of dates or numbers (most of them) held a 32-byte inline encoding per entry
/// of which 9 bytes were used; the entries were half of the generic engine's memory per row
/// and every insert moved twice the bytes it needed (`BenchProbe generic-activities`).
struct NarrowSlot: Sendable {
    /// Bytes 1 to 8 of the encoding, big-endian (zeros past its end).
    var bits: UInt64
    var sequence: UInt64
    var slot: Int32
    /// Byte 0 of the encoding: the component's tag (inverted when descending).
    var tag: UInt8

    @inline(__always)
    init(tag: UInt8, bits: UInt64, slot: Int32, sequence: UInt64) {
        self.tag = tag
        self.bits = bits
        self.slot = slot
        self.sequence = sequence
    }

    @inline(__always)
    init(_ entry: KeyedSlot) {
        tag = UInt8(truncatingIfNeeded: entry.key.w0 >> 56)
        bits = entry.key.w0 << 8 | entry.key.w1 >> 56
        slot = entry.slot
        sequence = entry.sequence
    }

    /// The entry as a ``KeyedSlot``: the same encoding, so it compares exactly as the wide
    /// entry would. Its length is recorded as ``NormalizedKey/narrowBytes``: only whether a key
    /// is exact (at most 32 bytes) matters to a comparison, and a narrow one always is.
    @inline(__always)
    var keyed: KeyedSlot {
        var key = NormalizedKey()
        key.w0 = UInt64(tag) << 56 | bits >> 8
        key.w1 = bits << 56
        key.length = UInt16(NormalizedKey.narrowBytes)
        return KeyedSlot(key: key, slot: slot, sequence: sequence)
    }
}

extension NormalizedKey {
    /// The longest encoding a ``NarrowSlot`` holds: a tag and eight bytes.
    static let narrowBytes = 9

    /// Whether a ``NarrowSlot`` holds this encoding whole.
    var fitsNarrow: Bool { length <= UInt16(Self.narrowBytes) }
}

/// An entry of a declared index whose keys all encode in at most ``CompactKey/bytes`` (28)
/// bytes, of any number of components: the encoding's 28 bytes, the slot (in the 4 bytes after
/// them) and the sequence. 40 bytes where a ``KeyedSlot`` is 48.
///
/// Why: Activities' `(type, start)` index (22 bytes for "Tummy time" and a date) kept 48-byte
/// entries of which 22 key bytes were used; every insert moved those bytes
/// (`BenchProbe generic-activities`). 28 rather than 24 so that UUID-led composite keys (a
/// ledger's `(accountID, date)`, 26 bytes; a forum's `(forumID, isSticky, lastPostDate)`, 28)
/// stay compact, and so scanned inline (see ``IndexStorage/scan(from:to:reversed:_:)``).
struct CompactSlot: Sendable {
    var key: CompactKey
    var slot: Int32
    var sequence: UInt64

    @inline(__always)
    init(key: CompactKey, slot: Int32, sequence: UInt64) {
        self.key = key
        self.slot = slot
        self.sequence = sequence
    }

    @inline(__always)
    init(_ entry: KeyedSlot) {
        key = CompactKey(entry.key)
        sequence = entry.sequence
        slot = entry.slot
    }

    /// The entry as a ``KeyedSlot``: the same encoding, so it compares exactly as the wide entry
    /// would. Its length is recorded as ``CompactKey/bytes`` (see ``CompactKey/normalized``).
    @inline(__always)
    var keyed: KeyedSlot { KeyedSlot(key: key.normalized, slot: slot, sequence: sequence) }
}

/// An entry of the insertion-order index.
struct SequencedSlot: Sendable {
    var sequence: UInt64
    var slot: Int32
}

/// One declared index's entries, ordered by key (component directions applied), then sequence.
///
/// Equal keys are ordered by sequence in the direction of the last component, so that a scan
/// in either direction breaks ties by insertion order in the direction of the last ordering
/// term, whichever index serves the query (see ``EntityQuery``).
///
/// Entries hold keys' encodings, not their components: a comparison that the first 32 bytes
/// of two encodings do not decide (keys longer than that, tied) compares the components, which
/// the table keeps by slot and hands in as `keys` (the index's ``KeyColumn``).
///
/// Three layouts behind one interface (``KeyLayout``, as the table's ``KeyColumn``s): an index
/// of one component starts with 24-byte ``NarrowSlot`` entries and keeps them while every key's
/// encoding fits 9 bytes (numbers, dates, Booleans, `nil`, strings of up to 6 UTF-8 bytes); an
/// index of several components starts with 40-byte ``CompactSlot``s and keeps them while every
/// encoding fits 28 bytes (UUID-led keys with a date, or a Bool and a date, included); the first key that does not fit moves every entry to the narrowest
/// layout that holds it too (48-byte ``KeyedSlot``s hold any), until the next
/// ``replaceEntries(withSorted:)``, which takes the narrowest layout every key then fits.
/// Callers see every entry as a ``KeyedSlot`` (``partitionPoint(_:)``,
/// ``scan(from:to:reversed:_:)``), so the comparisons, and so the order, are the same code for
/// all: a narrow or compact entry is the first 9 or 28 bytes of the same encoding.
struct IndexStorage: Sendable {
    let descending: [Bool]
    /// The entries while the layout is narrow; empty otherwise.
    private(set) var narrow = ChunkedSortedArray<NarrowSlot>()
    /// The entries while the layout is compact; empty otherwise.
    private(set) var compact = ChunkedSortedArray<CompactSlot>()
    /// The entries while the layout is full; empty otherwise.
    private(set) var wide = ChunkedSortedArray<KeyedSlot>()
    /// Which of the arrays holds the entries: the narrowest that every key so far fits.
    private(set) var layout: KeyLayout

    init(descending: [Bool]) {
        self.descending = descending
        self.layout = KeyLayout.narrowest(components: descending.count)
    }

    /// Whether the entries are ``narrow`` (every key fits 9 bytes so far).
    var isNarrow: Bool { layout == .narrow }

    /// The number of entries.
    var count: Int {
        switch layout {
        case .narrow: narrow.count
        case .compact: compact.count
        case .full: wide.count
        }
    }

    var startPosition: ChunkedPosition { ChunkedPosition(chunk: 0, offset: 0) }

    var endPosition: ChunkedPosition {
        switch layout {
        case .narrow: narrow.endPosition
        case .compact: compact.endPosition
        case .full: wide.endPosition
        }
    }

    /// The first position whose entry does not satisfy `isBefore`, which must hold for a
    /// prefix of the entries (see ``ChunkedSortedArray/partitionPoint(_:)``).
    ///
    /// Written out, as ``scan(from:to:reversed:_:)`` is, so that `isBefore` inlines into the
    /// search: through the array's own with a wrapping closure it was a call per comparison,
    /// and a ledger add (three searches per index and transaction) took 15% more CPU.
    @inline(__always)
    func partitionPoint(_ isBefore: (KeyedSlot) -> Bool) -> ChunkedPosition {
        // One loop reading each entry through the layout's switch, as `scan` does (a loop per
        // layout, through a generic helper, left the closures out of line: see `scan`).
        let layout = self.layout
        let narrowLasts = narrow.lastEntries, compactLasts = compact.lastEntries, wideLasts = wide.lastEntries
        let chunkCount = switch layout { case .narrow: narrowLasts.count; case .compact: compactLasts.count; case .full: wideLasts.count }
        var lo = 0
        var hi = chunkCount
        while lo < hi {
            let mid = (lo &+ hi) >> 1
            let last = switch layout { case .narrow: narrowLasts[mid].keyed; case .compact: compactLasts[mid].keyed; case .full: wideLasts[mid] }
            if isBefore(last) { lo = mid &+ 1 } else { hi = mid }
        }
        if lo == chunkCount { return ChunkedPosition(chunk: chunkCount, offset: 0) }
        let narrowChunk = layout == .narrow ? narrow.chunks[lo] : []
        let compactChunk = layout == .compact ? compact.chunks[lo] : []
        let wideChunk = layout == .full ? wide.chunks[lo] : []
        var l = 0
        var h = switch layout { case .narrow: narrowChunk.count; case .compact: compactChunk.count; case .full: wideChunk.count }
        while l < h {
            let mid = (l &+ h) >> 1
            let entry = switch layout { case .narrow: narrowChunk[mid].keyed; case .compact: compactChunk[mid].keyed; case .full: wideChunk[mid] }
            if isBefore(entry) { l = mid &+ 1 } else { h = mid }
        }
        return ChunkedPosition(chunk: lo, offset: l)
    }

    /// Visits the entries in `[lo, hi)`, forwards or backwards, until `body` returns `false`.
    ///
    /// Written out rather than through ``ChunkedSortedArray/scan(from:to:reversed:_:)``: calling
    /// the array's with a closure wrapping `body` (for narrow entries) left the caller's closure
    /// a call per entry, and `IndexValue.compare` in it out of line, which made an overlap scan
    /// (a thousand entries, a row's end checked for each) take 60% longer (perf). Here `body`
    /// is called directly, so it inlines with this function into the caller: for the narrow
    /// and compact layouts, in one loop that reads an entry through a two-way choice, as the
    /// narrow and wide layouts were read before the compact one. Three layouts in that loop
    /// (or a loop per layout) left this function out of line in the overlap query, which took
    /// 15% more CPU; whole keys (keys past 28 bytes: long strings) are scanned out of line.
    @inline(__always)
    func scan(from lo: ChunkedPosition, to hi: ChunkedPosition, reversed: Bool, _ body: (KeyedSlot) -> Bool) {
        guard lo < hi else { return }
        if layout == .full {
            Self.scanWide(wide, from: lo, to: hi, reversed: reversed, body)
            return
        }
        let narrow = layout == .narrow
        let narrowChunks = self.narrow.chunks, compactChunks = compact.chunks
        let chunkCount = narrow ? narrowChunks.count : compactChunks.count
        if !reversed {
            var c = lo.chunk
            while c <= hi.chunk && c < chunkCount {
                var i = c == lo.chunk ? lo.offset : 0
                let to = c == hi.chunk ? hi.offset : (narrow ? narrowChunks[c].count : compactChunks[c].count)
                while i < to {
                    if !body(narrow ? narrowChunks[c][i].keyed : compactChunks[c][i].keyed) { return }
                    i += 1
                }
                c += 1
            }
        } else {
            var c = hi.offset == 0 ? hi.chunk - 1 : hi.chunk
            while c >= lo.chunk {
                let from = c == lo.chunk ? lo.offset : 0
                var i = (c == hi.chunk ? hi.offset : (narrow ? narrowChunks[c].count : compactChunks[c].count)) - 1
                while i >= from {
                    if !body(narrow ? narrowChunks[c][i].keyed : compactChunks[c][i].keyed) { return }
                    i -= 1
                }
                c -= 1
            }
        }
    }

    /// ``scan(from:to:reversed:_:)`` of whole-key entries, out of line (a call per entry).
    @inline(never)
    private static func scanWide(_ entries: ChunkedSortedArray<KeyedSlot>, from lo: ChunkedPosition, to hi: ChunkedPosition,
                                 reversed: Bool, _ body: (KeyedSlot) -> Bool) {
        entries.scan(from: lo, to: hi, reversed: reversed, body)
    }

    /// The number of entries in `[lo, hi)`.
    func distance(from lo: ChunkedPosition, to hi: ChunkedPosition) -> Int {
        switch layout {
        case .narrow: narrow.distance(from: lo, to: hi)
        case .compact: compact.distance(from: lo, to: hi)
        case .full: wide.distance(from: lo, to: hi)
        }
    }

    /// The position `distance` entries into `[lo, hi)` from its start (from its end, `reversed`).
    func position(_ distance: Int, from lo: ChunkedPosition, to hi: ChunkedPosition, reversed: Bool) -> ChunkedPosition {
        switch layout {
        case .narrow: narrow.position(distance, from: lo, to: hi, reversed: reversed)
        case .compact: compact.position(distance, from: lo, to: hi, reversed: reversed)
        case .full: wide.position(distance, from: lo, to: hi, reversed: reversed)
        }
    }

    /// The sequence of the entry at a valid, non-end `position`.
    private func sequence(at position: ChunkedPosition) -> UInt64 {
        switch layout {
        case .narrow: narrow[position].sequence
        case .compact: compact[position].sequence
        case .full: wide[position].sequence
        }
    }

    /// Removes the entry at a valid, non-end `position` (tests break an index with it).
    mutating func remove(at position: ChunkedPosition) {
        switch layout {
        case .narrow: narrow.remove(at: position)
        case .compact: compact.remove(at: position)
        case .full: wide.remove(at: position)
        }
    }

    /// Replaces the entries with `sorted`, which are in the index's order, in the narrowest
    /// layout every key fits.
    mutating func replaceEntries(withSorted sorted: [KeyedSlot]) {
        narrow = ChunkedSortedArray()
        compact = ChunkedSortedArray()
        wide = ChunkedSortedArray()
        let components = descending.count
        layout = sorted.reduce(KeyLayout.narrowest(components: components)) { Swift.max($0, KeyLayout.narrowest(for: $1.key, components: components)) }
        switch layout {
        case .narrow:
            var built = ChunkedSortedArray<NarrowSlot>.Builder()
            for entry in sorted { built.append(NarrowSlot(entry)) }
            narrow = built.finish()
        case .compact:
            var built = ChunkedSortedArray<CompactSlot>.Builder()
            for entry in sorted { built.append(CompactSlot(entry)) }
            compact = built.finish()
        case .full:
            var built = ChunkedSortedArray<KeyedSlot>.Builder()
            for entry in sorted { built.append(entry) }
            wide = built.finish()
        }
    }

    /// Replaces the entries with `sorted`, narrow entries in the index's order, built by the
    /// caller from a ``KeyColumn`` kept narrow (every key fits 9 bytes and the index has one
    /// component, so narrow is the layout ``replaceEntries(withSorted:)`` would take).
    mutating func replaceEntries(withSortedNarrow sorted: ChunkedSortedArray<NarrowSlot>) {
        precondition(descending.count == 1, "IndexStorage: narrow entries for an index of \(descending.count) components")
        (narrow, compact, wide, layout) = (sorted, ChunkedSortedArray(), ChunkedSortedArray(), .narrow)
    }

    /// Replaces the entries with `sorted`, compact entries in the index's order, built by the
    /// caller from a ``KeyColumn`` kept compact (every key fits 28 bytes and some key of a
    /// one-component index is longer than 9, so compact is the layout
    /// ``replaceEntries(withSorted:)`` would take).
    mutating func replaceEntries(withSortedCompact sorted: ChunkedSortedArray<CompactSlot>) {
        precondition(descending.count >= 1, "IndexStorage: an index has at least one component")
        (narrow, compact, wide, layout) = (ChunkedSortedArray(), sorted, ChunkedSortedArray(), .compact)
    }

    /// Whether a sequence's order is descending: equal keys are ordered by sequence in the
    /// direction of the last component.
    var sequencesDescending: Bool { descending[descending.count - 1] }

    /// Whether narrow entry `a` comes before `b` in this index: ``compare(_:_:keys:)`` on the
    /// entries as ``KeyedSlot``s (a narrow key is exact: its 9 bytes as unsigned big-endian
    /// words, then the sequences), without widening them.
    @inline(__always)
    func precedes(_ a: NarrowSlot, _ b: NarrowSlot) -> Bool {
        if a.tag != b.tag { return a.tag < b.tag }
        if a.bits != b.bits { return a.bits < b.bits }
        return compareSequences(a.sequence, b.sequence) < 0
    }

    /// Whether compact entry `a` comes before `b` in this index: as ``precedes(_:_:)-(NarrowSlot,_)``,
    /// on the 28 bytes of an exact compact key.
    @inline(__always)
    func precedes(_ a: CompactSlot, _ b: CompactSlot) -> Bool {
        if a.key.w0 != b.key.w0 { return a.key.w0 < b.key.w0 }
        if a.key.w1 != b.key.w1 { return a.key.w1 < b.key.w1 }
        if a.key.w2 != b.key.w2 { return a.key.w2 < b.key.w2 }
        if a.key.tail != b.key.tail { return a.key.tail < b.key.tail }
        return compareSequences(a.sequence, b.sequence) < 0
    }

    /// This index's entries whose slot passes `keep`, in order, in a storage of the same
    /// directions (an interval index's open entries, rebuilt from its entries).
    func filtered(_ keep: (Int32) -> Bool) -> IndexStorage {
        var kept: [KeyedSlot] = []
        scan(from: startPosition, to: endPosition, reversed: false) { entry in
            if keep(entry.slot) { kept.append(entry) }
            return true
        }
        var out = IndexStorage(descending: descending)
        out.replaceEntries(withSorted: kept)
        return out
    }

    /// Moves every entry to `target`, a wider layout: a key that does not fit the current one
    /// is coming.
    private mutating func relayout(to target: KeyLayout) {
        switch target {
        case .narrow:
            preconditionFailure("IndexStorage: narrow is the narrowest layout")
        case .compact:
            var built = ChunkedSortedArray<CompactSlot>.Builder()
            scan(from: startPosition, to: endPosition, reversed: false) { built.append(CompactSlot($0)); return true }
            compact = built.finish()
        case .full:
            var built = ChunkedSortedArray<KeyedSlot>.Builder()
            scan(from: startPosition, to: endPosition, reversed: false) { built.append($0); return true }
            wide = built.finish()
            compact = ChunkedSortedArray()
        }
        narrow = ChunkedSortedArray()
        layout = target
    }

    /// Where the components of the entries' keys are: what a tie on long keys compares.
    struct Keys {
        let column: KeyColumn

        func of(_ slot: Int32) -> IndexKey { column[slot] }
    }

    /// A key being searched for: its components and its encoding.
    struct Probe {
        let key: IndexKey
        let normalized: NormalizedKey
    }

    func probe(_ key: IndexKey) -> Probe {
        Probe(key: key, normalized: NormalizedKey(key, descending: descending))
    }

    /// A key prefix being searched for: the components `values`, then `last` if any (a
    /// range's bound after an equality prefix, kept apart so that a probe concatenates no
    /// arrays: two allocations per bound of every query, before).
    struct PrefixProbe {
        let values: [IndexValue]
        let last: IndexValue?
        let normalized: NormalizedKey
    }

    func prefixProbe(_ values: [IndexValue], then last: IndexValue? = nil) -> PrefixProbe {
        PrefixProbe(values: values, last: last, normalized: NormalizedKey(values, then: last, descending: descending))
    }

    /// Compares the first components of `key` with `partial` (its values, then its last),
    /// directions applied.
    func compare(_ key: IndexKey, prefix partial: PrefixProbe) -> Int {
        for i in partial.values.indices {
            let c = IndexValue.compare(key[i], partial.values[i])
            if c != 0 { return descending[i] ? -c : c }
        }
        if let last = partial.last {
            let i = partial.values.count
            let c = IndexValue.compare(key[i], last)
            if c != 0 { return descending[i] ? -c : c }
        }
        return 0
    }

    /// Compares an entry's key with a prefix: -1, 0 (the key starts with it) or 1.
    @inline(__always)
    func compare(_ entry: KeyedSlot, prefix: PrefixProbe, keys: Keys) -> Int {
        let length = Int(prefix.normalized.length)
        if length <= NormalizedKey.inlineBytes { return NormalizedKey.compare(entry.key, prefix.normalized, bytes: length) }
        let c = NormalizedKey.compare(entry.key, prefix.normalized, bytes: NormalizedKey.inlineBytes)
        return c != 0 ? c : compare(keys.of(entry.slot), prefix: prefix)
    }

    /// Compares two full keys component by component (directions applied), then sequences
    /// in the last component's direction.
    func compare(_ a: IndexKey, _ aSequence: UInt64, _ b: IndexKey, _ bSequence: UInt64) -> Int {
        var c = IndexValue.compare(a.first, b.first)
        if c != 0 { return descending[0] ? -c : c }
        if a.count > 1 {
            c = IndexValue.compare(a.second, b.second)
            if c != 0 { return descending[1] ? -c : c }
            if a.count > 2, let aMore = a.more, let bMore = b.more {
                for i in aMore.indices {
                    c = IndexValue.compare(aMore[i], bMore[i])
                    if c != 0 { return descending[i + 2] ? -c : c }
                }
            }
        }
        return compareSequences(aSequence, bSequence)
    }

    private func compareSequences(_ a: UInt64, _ b: UInt64) -> Int {
        let c = a < b ? -1 : (a == b ? 0 : 1)
        return sequencesDescending ? -c : c
    }

    /// Compares an entry with a key and sequence: the encodings first; the components only
    /// when both are longer than the encoding's inline part and it ties.
    @inline(__always)
    func compare(_ entry: KeyedSlot, _ probe: Probe, _ sequence: UInt64, keys: Keys) -> Int {
        let c = NormalizedKey.compare(entry.key, probe.normalized, bytes: NormalizedKey.inlineBytes)
        if c != 0 { return c }
        if entry.key.isExact && probe.normalized.isExact { return compareSequences(entry.sequence, sequence) }
        return compare(keys.of(entry.slot), entry.sequence, probe.key, sequence)
    }

    /// Compares two entries, as ``compare(_:_:_:keys:)`` compares an entry with a probe.
    @inline(__always)
    func compare(_ a: KeyedSlot, _ b: KeyedSlot, keys: Keys) -> Int {
        let c = NormalizedKey.compare(a.key, b.key, bytes: NormalizedKey.inlineBytes)
        if c != 0 { return c }
        if a.key.isExact && b.key.isExact { return compareSequences(a.sequence, b.sequence) }
        return compare(keys.of(a.slot), a.sequence, keys.of(b.slot), b.sequence)
    }

    /// Whether two keys are equal, component by component.
    func sameKey(_ a: IndexKey, _ b: IndexKey) -> Bool {
        compare(a, 0, b, 0) == 0
    }

    /// Inserts the entry of `slot`, whose key is `key`.
    mutating func insert(_ key: IndexKey, sequence: UInt64, slot: Int32, keys: Keys) {
        insert(probe(key), sequence: sequence, slot: slot, keys: keys)
    }

    /// Inserts the entry of `slot`, whose key is `probe`'s (encoded by the caller, which keeps
    /// the encoding too).
    mutating func insert(_ probe: Probe, sequence: UInt64, slot: Int32, keys: Keys) {
        let needed = KeyLayout.narrowest(for: probe.normalized, components: descending.count)
        if needed > layout { relayout(to: needed) }
        let p = partitionPoint { compare($0, probe, sequence, keys: keys) < 0 }
        let entry = KeyedSlot(key: probe.normalized, slot: slot, sequence: sequence)
        switch layout {
        case .narrow: narrow.insert(NarrowSlot(entry), at: p)
        case .compact: compact.insert(CompactSlot(entry), at: p)
        case .full: wide.insert(entry, at: p)
        }
        #if EVENTKERNEL_INTERNAL_CHECKS
        checkOrder(around: probe, sequence, keys: keys)
        #endif
    }

    /// Removes the entry of the row whose key is `key` and sequence `sequence`.
    mutating func remove(_ key: IndexKey, sequence: UInt64, keys: Keys) {
        let probe = probe(key)
        let p = partitionPoint { compare($0, probe, sequence, keys: keys) < 0 }
        guard p < endPosition, self.sequence(at: p) == sequence else { return }
        remove(at: p)
        #if EVENTKERNEL_INTERNAL_CHECKS
        checkOrder(around: probe, sequence, keys: keys)
        #endif
    }

    #if EVENTKERNEL_INTERNAL_CHECKS
    /// The entries around where `probe` and `sequence` sort are in the index's order: what an
    /// insert or a removal there changed (see `ChunkedSortedArray.checkOrder(around:_:)`).
    /// The entry of `sequence` is compared through `probe`, its key whatever `keys` holds for
    /// its slot: an upsert removes the old entry while the column still has the old key, then
    /// stores the new key before it inserts the new entry.
    private func checkOrder(around probe: Probe, _ sequence: UInt64, keys: Keys) {
        let p = partitionPoint { compare($0, probe, sequence, keys: keys) < 0 }
        func less(_ a: KeyedSlot, _ b: KeyedSlot) -> Bool {
            if a.sequence == sequence { return compare(b, probe, sequence, keys: keys) > 0 }
            if b.sequence == sequence { return compare(a, probe, sequence, keys: keys) < 0 }
            return compare(a, b, keys: keys) < 0
        }
        switch layout {
        case .narrow:
            precondition(compact.isEmpty && wide.isEmpty, "a narrow index has no wider entries")
            narrow.checkOrder(around: p) { less($0.keyed, $1.keyed) }
        case .compact:
            precondition(narrow.isEmpty && wide.isEmpty, "a compact index has no other entries")
            compact.checkOrder(around: p) { less($0.keyed, $1.keyed) }
        case .full:
            precondition(narrow.isEmpty && compact.isEmpty, "a wide index has no narrower entries")
            wide.checkOrder(around: p, less)
        }
    }

    /// What is wrong with the entries' layout and order, empty when nothing is (and that the
    /// other layouts' arrays are empty; that a narrow index has one component).
    func invariantViolations(keys: Keys) -> [String] {
        var violations: [String]
        switch layout {
        case .narrow: violations = narrow.invariantViolations { compare($0.keyed, $1.keyed, keys: keys) < 0 }
        case .compact: violations = compact.invariantViolations { compare($0.keyed, $1.keyed, keys: keys) < 0 }
        case .full: violations = wide.invariantViolations { compare($0, $1, keys: keys) < 0 }
        }
        if layout != .narrow && !narrow.isEmpty { violations.append("\(narrow.count) narrow entries in a \(layout) index") }
        if layout != .compact && !compact.isEmpty { violations.append("\(compact.count) compact entries in a \(layout) index") }
        if layout != .full && !wide.isEmpty { violations.append("\(wide.count) wide entries in a \(layout) index") }
        if layout == .narrow && descending.count != 1 { violations.append("a narrow index of \(descending.count) components") }
        return violations
    }
    #endif
}

extension ChunkedSortedArray where Element == SequencedSlot {
    /// Appends in sequence order: new entities always have the highest sequence.
    mutating func appendSorted(_ entry: SequencedSlot) {
        if let last = lastEntries.last, last.sequence > entry.sequence {
            insert(entry, at: partitionPoint { $0.sequence < entry.sequence })
        } else {
            insert(entry, at: endPosition)
        }
        #if EVENTKERNEL_INTERNAL_CHECKS
        checkOrder(around: partitionPoint { $0.sequence < entry.sequence }) { $0.sequence < $1.sequence }
        #endif
    }
}
