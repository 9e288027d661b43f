/// An entry of a declared index: the key's order-preserving encoding (``NormalizedKey``), the
/// entity's row slot and its insertion sequence (the final tie-break, so every entry is unique
/// and equal keys keep insertion order). 48 bytes: the fields are declared in this order so
/// that the slot fills the key's padding.
struct KeyedSlot: Sendable {
    var key: NormalizedKey
    var slot: Int32
    var sequence: UInt64
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
/// the table keeps by slot and hands in as `keys` (the key of slot `s` in index `number` is
/// `keys[s * width + number]`).
struct IndexStorage: Sendable {
    let descending: [Bool]
    var entries = ChunkedSortedArray<KeyedSlot>()

    init(descending: [Bool]) {
        self.descending = descending
    }

    /// Where the components of the entries' keys are: what a tie on long keys compares.
    struct Keys {
        let all: [IndexKey]
        let width: Int
        let number: Int

        func of(_ slot: Int32) -> IndexKey { all[Int(slot) * width + number] }
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
        return descending[descending.count - 1] ? -c : c
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
        let probe = probe(key)
        let p = entries.partitionPoint { compare($0, probe, sequence, keys: keys) < 0 }
        entries.insert(KeyedSlot(key: probe.normalized, slot: slot, sequence: sequence), at: p)
        #if EVENTKERNEL_INTERNAL_CHECKS
        checkOrder(around: probe, sequence, keys: keys)
        #endif
    }

    /// Removes the entry of the row whose key is `key` and sequence `sequence`.
    mutating func remove(_ key: IndexKey, sequence: UInt64, keys: Keys) {
        let probe = probe(key)
        let p = entries.partitionPoint { compare($0, probe, sequence, keys: keys) < 0 }
        guard p < entries.endPosition, entries[p].sequence == sequence else { return }
        entries.remove(at: p)
        #if EVENTKERNEL_INTERNAL_CHECKS
        checkOrder(around: probe, sequence, keys: keys)
        #endif
    }

    #if EVENTKERNEL_INTERNAL_CHECKS
    /// The entries around where `probe` and `sequence` sort are in the index's order: what an
    /// insert or a removal there changed (see `ChunkedSortedArray.checkOrder(around:_:)`).
    /// The entry of `sequence` is compared through `probe`: an upsert inserts the new entry
    /// before it stores the row's new key, so `keys` still has the old one for its slot.
    private func checkOrder(around probe: Probe, _ sequence: UInt64, keys: Keys) {
        let p = entries.partitionPoint { compare($0, probe, sequence, keys: keys) < 0 }
        entries.checkOrder(around: p) { a, b in
            if a.sequence == sequence { return compare(b, probe, sequence, keys: keys) > 0 }
            if b.sequence == sequence { return compare(a, probe, sequence, keys: keys) < 0 }
            return compare(a, b, keys: keys) < 0
        }
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
