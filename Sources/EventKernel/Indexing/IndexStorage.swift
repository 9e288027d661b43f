/// An entry of a declared index: the key, the entity's insertion sequence (the final
/// tie-break, so every entry is unique and equal keys keep insertion order) and its row slot.
struct KeyedSlot: Sendable {
    var key: IndexKey
    var sequence: UInt64
    var slot: Int32
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
struct IndexStorage: Sendable {
    let descending: [Bool]
    var entries = ChunkedSortedArray<KeyedSlot>()

    init(descending: [Bool]) {
        self.descending = descending
    }

    /// Compares the first `partial.count` components of `key` with `partial`, directions applied.
    func compare(_ key: IndexKey, prefix partial: [IndexValue]) -> Int {
        for i in partial.indices {
            let c = IndexValue.compare(key[i], partial[i])
            if c != 0 { return descending[i] ? -c : c }
        }
        return 0
    }

    /// Compares two full entries: key (directions applied), then sequence.
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
        c = aSequence < bSequence ? -1 : (aSequence == bSequence ? 0 : 1)
        return descending[descending.count - 1] ? -c : c
    }

    /// Whether two keys are equal, component by component.
    func sameKey(_ a: IndexKey, _ b: IndexKey) -> Bool {
        compare(a, 0, b, 0) == 0
    }

    mutating func insert(_ key: IndexKey, sequence: UInt64, slot: Int32) {
        let p = entries.partitionPoint { compare($0.key, $0.sequence, key, sequence) < 0 }
        entries.insert(KeyedSlot(key: key, sequence: sequence, slot: slot), at: p)
    }

    mutating func remove(_ key: IndexKey, sequence: UInt64) {
        let p = entries.partitionPoint { compare($0.key, $0.sequence, key, sequence) < 0 }
        guard p < entries.endPosition, entries[p].sequence == sequence else { return }
        entries.remove(at: p)
    }
}

extension ChunkedSortedArray where Element == SequencedSlot {
    /// Appends in sequence order: new entities always have the highest sequence.
    mutating func appendSorted(_ entry: SequencedSlot) {
        if let last = lastEntries.last, last.sequence > entry.sequence {
            insert(entry, at: partitionPoint { $0.sequence < entry.sequence })
        } else {
            insert(entry, at: endPosition)
        }
    }
}
