import Dispatch
import EventLog
import KernelPrimitives

/// One component of a declared index, as the planner sees it: a property and a direction.
struct IndexedField: Sendable {
    let keyPath: any AnyKeyPath & Sendable
    let descending: Bool
}

/// One row's keys in the layout ``IndexedRows/upsert(id:version:keys:)`` takes (each declared
/// index's key, then each interval index's end), held in an array of a whole batch's rows: a
/// batch's keys are computed a property at a time into one array, with no array per row.
struct RowKeys: Sendable {
    let all: [IndexKey]
    /// Where the row's first key is in `all`.
    let start: Int
    /// How many keys the row has (the next row's start).
    let width: Int

    /// - Parameters:
    ///   - all: The keys of every row, row after row.
    ///   - start: Where this row's first key is in `all`.
    ///   - width: How many keys each row has; `nil`: every key from `start` on (a row of its own).
    init(_ all: [IndexKey], start: Int = 0, width: Int? = nil) {
        self.all = all
        self.start = start
        self.width = width ?? all.count - start
        #if EVENTKERNEL_INTERNAL_CHECKS
        precondition(start >= 0 && self.width >= 0 && start + self.width <= all.count,
                     "a row of \(self.width) keys from \(start) in \(all.count) keys")
        #endif
    }

    subscript(i: Int) -> IndexKey {
        // The keys are checked against the row, not only `all`: a width that does not match the
        // table's layout would otherwise read the next row's keys as this row's, silently.
        #if EVENTKERNEL_INTERNAL_CHECKS
        precondition(i >= 0 && i < width, "key \(i) of a row of \(width) keys")
        #endif
        return all[start &+ i]
    }
}

/// What the table keeps of each row besides the entity.
struct RowHead: Sendable {
    var id: EntityID
    var version: UInt64
    /// When the entity was first added (kept by updates): the insertion order.
    var sequence: UInt64
}

/// The part of an ``EntityTable`` that does not depend on the entity type: each row's id,
/// version, sequence and index keys, the id map, the insertion-order index, the declared
/// indexes, and the planning and scanning of queries over them.
///
/// Why apart from the entities: `EventSourcedRepository` is generic over a domain's type and
/// is not specialised for it across the module boundary, so generic code pays a metadata
/// lookup and a value-witness call for every value it touches (measured: a third of a 50-row
/// query went to `_swift_getGenericMetadata` and row copies). Everything here is concrete and
/// compiled once; the generic table only stores entities by slot and copies out the results.
struct IndexedRows: Sendable {
    /// Each declared index's components.
    let fields: [[IndexedField]]
    /// The declaration's number (`IndexedRows.declarationNumber`): equal declarations share
    /// one, another declaration has another. A cursor records it (`planTag(_:)`), so that a
    /// cursor taken before the table's indexes were declared otherwise is refused, not resumed
    /// on another index that has the same number.
    let declaration: UInt64
    /// The interval indexes' ends, histograms and open entries (see `IndexedRows+Intervals.swift`);
    /// empty for a repository without one, whose paths then skip them after one check.
    var intervals: [IntervalIndex]
    /// The number of declared indexes.
    let width: Int
    /// How many keys a row has in ``upsert(id:version:keys:)``'s layout: each declared index's
    /// key, then each interval index's end.
    var rowWidth: Int { width + intervals.count }
    /// By slot; a free slot's head is stale. 32 bytes a row while every id is a UUID (``RowHeads``).
    var heads = RowHeads()
    /// Per declared index, each slot's key in it (a free slot's is stale).
    var columns: [KeyColumn]
    /// By slot, each interval index's end (at slot × intervals.count + ``IntervalIndex/column``),
    /// as a key of one component: 9 bytes per row and interval index while every end is a
    /// number, a date or `nil` (a `KeyColumn`'s narrow rows), where an `IndexValue` was 24.
    var ends = KeyColumn(descending: [false])
    var freeSlots: [Int32] = []
    /// The slot of each live row's id (compared through ``heads``).
    var slotsByID = SlotMap()
    /// The stream version of each deleted entity: the repository's projection is the source of
    /// its streams' versions (``StreamVersionSource``), and a deleted entity added again
    /// continues its stream. (Entries of entities added again may linger; a row always wins.)
    var deletedVersions: [EntityID: UInt64] = [:]

    /// Drops the deleted versions of `ids` (purged entities compaction removes: never added again).
    mutating func forgetDeletedVersions(of ids: [EntityID]) {
        guard !deletedVersions.isEmpty else { return }
        for id in ids { deletedVersions[id] = nil }
    }
    var bySequence = ChunkedSortedArray<SequencedSlot>()
    var indexes: [IndexStorage]
    var nextSequence: UInt64 = 0

    /// - Parameters:
    ///   - fields: Each declared index's components.
    ///   - intervalEnds: Per declared index, its interval end's property, `nil` for an ordinary
    ///     index (missing: ordinary).
    init(fields: [[IndexedField]], intervalEnds: [(any AnyKeyPath & Sendable)?] = []) {
        self.fields = fields
        self.declaration = Self.declarationNumber(fields, intervalEnds)
        self.indexes = fields.map { IndexStorage(descending: $0.map(\.descending)) }
        self.columns = fields.map { KeyColumn(descending: $0.map(\.descending)) }
        var intervals: [IntervalIndex] = []
        for (number, end) in intervalEnds.enumerated() {
            guard let end else { continue }
            intervals.append(IntervalIndex(number: number, column: intervals.count, end: end,
                                           open: IndexStorage(descending: fields[number].map(\.descending))))
        }
        self.intervals = intervals
        self.width = fields.count
    }

    var count: Int { slotsByID.count }

    /// The declarations numbered so far (a program declares a few): by content, so that equal
    /// declarations (a table restored from a snapshot, another repository of the same type)
    /// share a number and their cursors stay valid.
    private static let declarations = Locked<[(fields: [[IndexedField]], ends: [(any AnyKeyPath & Sendable)?], number: UInt64)]>([])

    /// The number of the declaration `fields` and `intervalEnds`, assigned at its first use.
    private static func declarationNumber(_ fields: [[IndexedField]], _ intervalEnds: [(any AnyKeyPath & Sendable)?]) -> UInt64 {
        let ends = fields.indices.map { $0 < intervalEnds.count ? intervalEnds[$0] : nil }
        func same(_ a: (any AnyKeyPath & Sendable)?, _ b: (any AnyKeyPath & Sendable)?) -> Bool {
            switch (a, b) {
            case (nil, nil): true
            case (let a?, let b?): (a as AnyKeyPath) == (b as AnyKeyPath)
            default: false
            }
        }
        func sameFields(_ a: [[IndexedField]]) -> Bool {
            a.count == fields.count && zip(a, fields).allSatisfy { x, y in
                x.count == y.count && zip(x, y).allSatisfy { $0.descending == $1.descending && same($0.keyPath, $1.keyPath) }
            }
        }
        return declarations.withLock { known in
            if let found = known.first(where: { sameFields($0.fields) && zip($0.ends, ends).allSatisfy(same) }) { return found.number }
            let number = UInt64(known.count + 1)
            known.append((fields, ends, number))
            return number
        }
    }

    /// The slot of the row of `id`, if it has one.
    /// - Complexity: O(1) on average.
    func slot(of id: EntityID) -> Int32? { slotsByID.find(id, heads: heads) }

    /// The slot of the row of `id` (`nil`: none) and its stream's committed version (its row's,
    /// a deleted entity's last, or 0), from one probe of the id map: a command reads both for
    /// every entity it changes. The one rule for a stream's version: the command's read and the
    /// store's check (the projection's ``ProjectedState/Versioning``) both go through it.
    /// - Complexity: O(1) on average.
    func lookup(_ id: EntityID) -> (slot: Int32?, version: UInt64) {
        if let slot = slot(of: id) { return (slot, heads.version(Int(slot))) }
        return (nil, deletedVersions.isEmpty ? 0 : deletedVersions[id] ?? 0)
    }

    /// The key of the row in `slot` in index `number`.
    func key(_ slot: Int32, _ number: Int) -> IndexKey { columns[number][slot] }

    /// The keys of the row of `id` in the layout ``upsert(id:version:keys:)`` takes (each
    /// declared index's key, then each interval index's end), or `nil` when there is no row.
    func keys(of id: EntityID) -> [IndexKey]? {
        guard let slot = slot(of: id) else { return nil }
        var keys = (0..<width).map { key(slot, $0) }
        keys.reserveCapacity(rowWidth)
        for interval in intervals { keys.append(IndexKey(intervalEnd(slot, interval))) }
        return keys
    }

    /// Where index `number`'s entries find their keys' components (for ties on long keys).
    func keysOf(index number: Int) -> IndexStorage.Keys { IndexStorage.Keys(column: columns[number]) }

    /// Stores `key` as the key of `slot` in index `number` (appending a new slot to the
    /// column), then inserts its entry: the key encoded once for both.
    private mutating func insert(_ key: IndexKey, sequence: UInt64, slot: Int32, index number: Int) {
        insert(indexes[number].probe(key), sequence: sequence, slot: slot, index: number)
    }

    /// As ``insert(_:sequence:slot:index:)``, with the key already encoded (`probe`).
    private mutating func insert(_ probe: IndexStorage.Probe, sequence: UInt64, slot: Int32, index number: Int) {
        columns[number].set(slot, probe.key, normalized: probe.normalized)
        indexes[number].insert(probe, sequence: sequence, slot: slot, keys: keysOf(index: number))
    }

    /// Inserts or replaces the row of `id`.
    /// - Parameter newKeys: Its key in each declared index, then each interval index's end
    ///   (a key of one component).
    /// - Returns: Its slot: a new one when it equals the previous number of slots.
    /// - Complexity: O(log n + c) per index whose key changed, for chunks of c entries.
    mutating func upsert(id: EntityID, version: UInt64, keys newKeys: RowKeys) -> Int32 {
        let width = self.width
        #if EVENTKERNEL_INTERNAL_CHECKS
        precondition(newKeys.width == rowWidth, "a row of \(newKeys.width) keys for a table of \(rowWidth) a row")
        #endif
        if let slot = slot(of: id) {
            let sequence = heads.sequence(Int(slot))
            // Checked once: a repository without an interval index does no more than this.
            let retrack = !intervals.isEmpty && untrackChangedIntervals(slot, newKeys: newKeys)
            for i in 0..<indexes.count {
                let probe = indexes[i].probe(newKeys[i])
                // Narrow, the stored 9 bytes say whether the key changed: no old key decoded
                // (a String per short-string key) nor encoded again on the common update that
                // keeps it. Different bytes move the entry even when the keys compare equal
                // (`.int(5)`, `.double(5)`): it then takes the encoding it would be restored with.
                if let same = columns[i].holds(slot, probe.normalized) {
                    if same { continue }
                } else if indexes[i].sameKey(key(slot, i), newKeys[i]) {
                    continue
                }
                indexes[i].remove(key(slot, i), sequence: sequence, keys: keysOf(index: i))
                insert(probe, sequence: sequence, slot: slot, index: i)
            }
            if retrack { trackIntervals(slot, newKeys: newKeys) }
            heads.setVersion(Int(slot), version)
            #if EVENTKERNEL_INTERNAL_CHECKS
            checkIntervalCounts()
            #endif
            return slot
        }
        // A deleted entity's version may stay in `deletedVersions` once it is added again: the
        // row comes first in every lookup and snapshots leave such entries out (removing it
        // here cost a hash of every added id).
        let sequence = nextSequence
        nextSequence += 1
        let head = RowHead(id: id, version: version, sequence: sequence)
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            heads[Int(slot)] = head
            for j in intervals.indices { ends.set(Int32(Int(slot) * intervals.count + j), newKeys[width + j]) }
        } else {
            slot = Int32(heads.count)
            heads.append(head)
            // Slots are appended in order, so these land at the column's end.
            for j in intervals.indices { ends.set(Int32(ends.count), newKeys[width + j]) }
        }
        let added = slotsByID.insert(slot, heads: heads)
        precondition(added, "an id without a row is not in the id map")
        bySequence.appendSorted(SequencedSlot(sequence: sequence, slot: slot))
        for i in 0..<width { insert(newKeys[i], sequence: sequence, slot: slot, index: i) }
        if !intervals.isEmpty { trackIntervals(slot, newKeys: nil) }
        #if EVENTKERNEL_INTERNAL_CHECKS
        checkIntervalCounts()
        #endif
        return slot
    }

    /// Removes the row of `id`, if present, recording `version` (the deletion's) as its stream's.
    /// - Returns: The slot it occupied (now free).
    mutating func remove(_ id: EntityID, version: UInt64) -> Int32? {
        deletedVersions[id] = version
        guard let slot = slotsByID.remove(id, heads: heads) else { return nil }
        let sequence = heads.sequence(Int(slot))
        if !intervals.isEmpty { untrackIntervals(slot) }
        for i in indexes.indices { indexes[i].remove(key(slot, i), sequence: sequence, keys: keysOf(index: i)) }
        let p = bySequence.partitionPoint { $0.sequence < sequence }
        if p < bySequence.endPosition, bySequence[p].sequence == sequence { bySequence.remove(at: p) }
        freeSlots.append(slot)
        #if EVENTKERNEL_INTERNAL_CHECKS
        checkIntervalCounts()
        #endif
        return slot
    }

    /// Fills empty rows with the rows restored from a snapshot, in insertion order: the id map
    /// and the insertion-order index; their keys and ends are set in bulk
    /// (``restoreKeys(parts:)``), and the declared indexes are restored separately. For a
    /// restore only: on a repeated id the rows are left half filled, to be discarded, so the
    /// rows must be empty (a precondition), never a live table's.
    /// - Parameter restored: The rows' heads, in insertion order (strictly ascending sequences).
    /// - Returns: An id that `restored` holds twice, the rows then to be discarded; `nil` when
    ///   every row was appended.
    mutating func appendRestored(_ restored: [RowHead]) -> EntityID? {
        precondition(heads.count == 0 && freeSlots.isEmpty && slotsByID.count == 0 && bySequence.count == 0,
                     "IndexedRows.appendRestored: the rows are not empty (a restore fills new rows only)")
        let first = heads.count
        for head in restored { heads.append(head) }
        if let repeated = slotsByID.insertAll(from: first, heads: heads) { return heads[Int(repeated)].id }
        for slot in first..<heads.count {
            bySequence.appendSorted(SequencedSlot(sequence: heads.sequence(slot), slot: Int32(slot)))
        }
        return nil
    }
}

extension IndexedRows {
    /// Sets every row's keys and interval ends from a snapshot's parts, in slot order: per part
    /// a column per declared index (``columns``' order) and one of its ends (``ends``' layout),
    /// each restored on the part's thread, so that here the parts' arrays are only joined.
    /// - Parameter parts: The parts' columns, in slot order.
    mutating func restoreKeys(parts: [(columns: [KeyColumn], ends: KeyColumn)]) {
        for number in columns.indices {
            columns[number] = KeyColumn.joined(parts.map { $0.columns[number] }, descending: columns[number].descending)
        }
        ends = KeyColumn.joined(parts.map(\.ends), descending: ends.descending)
    }

    /// Restores the declared indexes after ``appendRestored(_:)`` of every row: each from
    /// its stored order (ordinals in insertion order, so restoring sorts nothing) when the
    /// snapshot has one under its name, else by one sort (an index declared since).
    /// - Throws: ``BinaryDecodingError`` when a stored order does not match the keys: such an
    ///   order would answer queries wrongly, so it is refused, not trusted.
    mutating func restoreIndexes(names: [String], orders: [String: [Int32]]) throws {
        // Each index is built from the rows alone, so they are built in parallel (serially,
        // restoring three indexes of a million rows was a quarter of a snapshot open).
        let rows = self
        let built = Locked([Result<IndexStorage, BinaryDecodingError>?](repeating: nil, count: names.count))
        DispatchQueue.concurrentPerform(iterations: names.count) { number in
            let result = Result { () throws(BinaryDecodingError) in try rows.restoredEntries(ofIndex: number, name: names[number], order: orders[names[number]]) }
            built.withLock { $0[number] = result }
        }
        for (number, result) in built.withLock({ $0 }).enumerated() { indexes[number] = try result!.get() }
        if !intervals.isEmpty { rebuildIntervals() }
    }

    /// The entries of index `number`: from its stored `order` (checked, not trusted), else by one sort.
    private func restoredEntries(ofIndex number: Int, name: String, order: [Int32]?) throws(BinaryDecodingError) -> IndexStorage {
        if let order, order.count != heads.count {
            throw BinaryDecodingError(.invalidValue("index \(name) holds \(order.count) of \(heads.count) entities"), at: 0)
        }
        if let order, let restored = try restoredEntries(ofIndex: number, name: name, encodedIn: columns[number], order: order) {
            return restored
        }
        var storage = indexes[number]
        let all = keysOf(index: number)
        // Separate passes, so that the random reads (a stored order visits rows in key order)
        // are in a loop of their own: encoding each key and checking the order inside the same
        // loop left one cache miss in flight at a time, and reading the rows' heads in index
        // order was three quarters of restoring an index (perf annotate).
        var encoded: [NormalizedKey] = []
        encoded.reserveCapacity(heads.count)
        // Read from the column, which keeps most keys encoded already (decoding a key to
        // encode it again built a String per short-string component).
        let column = columns[number]
        for slot in heads.indices { encoded.append(column.normalized(Int32(slot))) }
        var entries = (order ?? heads.indices.map(Int32.init)).map { slot in
            KeyedSlot(key: encoded[Int(slot)], slot: slot, sequence: heads.sequence(Int(slot)))
        }
        if order == nil {
            entries.sort { storage.compare($0, $1, keys: all) < 0 }
        } else {
            for i in entries.indices.dropFirst() where storage.compare(entries[i - 1], entries[i], keys: all) >= 0 {
                throw BinaryDecodingError(.invalidValue("index \(name) out of order"), at: 0)
            }
        }
        storage.replaceEntries(withSorted: entries)
        return storage
    }

    /// The entries of index `number` built straight from `column`'s encodings in the stored
    /// `order` (checked while they are built: each entry must follow the one before by key,
    /// then sequence), for a column kept narrow or compact; `nil` for one keeping whole keys.
    ///
    /// Why: through ``KeyedSlot``s (an encoding per row, then a 48-byte entry per row in the
    /// order, then the narrow or compact entries) an index of 300,000 rows allocated and
    /// page-faulted about 25 MB it freed at once: the page faults were a fifth of an open's
    /// samples (perf, `BenchProbe generic-activities-open`). The order and the comparison are
    /// the same: a narrow or compact entry is the first 9 or 28 bytes of the encoding a
    /// ``KeyedSlot`` holds, compared as unsigned big-endian words, and such keys are exact, so
    /// a tie goes to the sequences (``IndexStorage/compare(_:_:keys:)``).
    private func restoredEntries(ofIndex number: Int, name: String, encodedIn column: KeyColumn, order: [Int32]) throws(BinaryDecodingError) -> IndexStorage? {
        var storage = indexes[number]
        /// The entries `entry` makes of `order`'s slots, each checked to follow the one before.
        /// (The closures stay calls per entry; against a loop per entry type the open measured
        /// the same: 0.168-0.176 s either way, `BenchProbe generic-activities-open`.)
        func built<Entry>(_ entry: (Int32) -> Entry, _ precedes: (Entry, Entry) -> Bool) throws(BinaryDecodingError) -> ChunkedSortedArray<Entry> {
            var built = ChunkedSortedArray<Entry>.Builder()
            var previous: Entry?
            for (i, slot) in order.enumerated() {
                let next = entry(slot)
                if let previous, !precedes(previous, next) {
                    throw BinaryDecodingError(.invalidValue("index \(name) out of order at entry \(i) of \(order.count)"), at: 0)
                }
                built.append(next)
                previous = next
            }
            return built.finish()
        }
        switch column.layout {
        case .narrow where storage.descending.count == 1:
            storage.replaceEntries(withSortedNarrow: try built({ slot in
                NarrowSlot(tag: column.tags[Int(slot)], bits: column.bits[Int(slot)], slot: slot, sequence: heads.sequence(Int(slot)))
            }, storage.precedes))
        case .compact:
            storage.replaceEntries(withSortedCompact: try built({ slot in
                CompactSlot(key: column.compactKey(slot), slot: slot, sequence: heads.sequence(Int(slot)))
            }, storage.precedes))
        case .narrow, .full:
            return nil
        }
        return storage
    }
}
