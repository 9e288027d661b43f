public import Foundation
@_spi(Indexing) import EventKernel
import Synchronization

/// Where ``ActivityIndex/prefetch(id:)`` stores what it loaded, so the load is kept.
private let prefetchSink = Atomic<UInt64>(0)

/// Why an `ActivityIndex` mutation or snapshot load failed.
public enum ActivityIndexError: Error, Sendable, Equatable, CustomStringConvertible {
    /// An activity with this id is already in the index.
    case alreadyExists(UUID)
    /// No activity with this id is in the index.
    case notFound(UUID)
    /// An activity would end before it starts.
    case endBeforeStart(id: UUID, start: Date, end: Date)
    /// A date is NaN or infinite, which has no place in a sorted index.
    case nonFiniteDate(id: UUID)
    /// Snapshot bytes are truncated, corrupted or of an unknown version.
    case corruptSnapshot(String)

    /// A human-readable explanation including the offending id or dates.
    public var description: String {
        switch self {
        case .alreadyExists(let id): "activity \(id) already exists"
        case .notFound(let id): "activity \(id) not found"
        case .endBeforeStart(let id, let start, let end):
            "activity \(id) cannot end (\(end)) before it starts (\(start))"
        case .nonFiniteDate(let id): "activity \(id) has a non-finite date"
        case .corruptSnapshot(let reason): "corrupt activity index snapshot: \(reason)"
        }
    }
}

/// The in-memory read model of all current activities, built for fast
/// filtered, sorted, paginated queries at millions of activities.
///
/// Layout (about 90 bytes per activity at 1M activities, measured):
/// - a row table of 40-byte rows `(id, start, end, type code)` addressed by
///   an `Int32` slot, with a free list so removals do not shift rows;
/// - an id map from id to slot, for O(1) lookup (see `SlotTable`);
/// - a global sorted index of `(start, slot)` entries ordered by
///   `(startDate, id)`, see `SortedSlotIndex`;
/// - one such sorted index per activity type, so filters on rare types do
///   not scan the others (several types are merged lazily, stopping at the
///   limit);
/// - interned type names, so rows store a small code instead of a `String`;
/// - the longest duration of any ended activity and the set of active ones,
///   so overlap queries only scan `start ∈ [a - maxDuration, b]`.
///
/// `ActivityIndex` is a value type with copy-on-write storage; copies are
/// cheap until mutated, and it can be sent between tasks.
public struct ActivityIndex: Sendable {
    @usableFromInline var rows: [ActivityRow] = []
    @usableFromInline var freeSlots: [Int32] = []
    @usableFromInline var slotsByID = SlotTable()
    var byStart = SortedSlotIndex()
    var byType: [SortedSlotIndex] = []
    @usableFromInline var typeTable: [ActivityType] = []
    @usableFromInline var typeCodes: [ActivityType: UInt32] = [:]
    /// The type interned last (see ``intern(_:)``).
    @usableFromInline var lastInterned: UInt32?
    @usableFromInline var activeSlots: Set<Int32> = []
    /// How many ended activities have a duration in `(2^(k-1), 2^k]`
    /// seconds (bucket 0: at most 1 s). The highest non-empty bucket bounds
    /// the longest duration within a factor of two, and unlike a running
    /// maximum it shrinks again when a long outlier is corrected or removed,
    /// so one mistaken month-long entry cannot slow overlap queries forever.
    @usableFromInline var durationBuckets = [Int](repeating: 0, count: 64)
    /// Stream versions of rows whose version does not fit their 32-bit field.
    @usableFromInline var largeVersions: [UUID: UInt64] = [:]
    /// The stream version of each deleted activity: a deleted activity added again continues
    /// its stream (the projection is the source of activity stream versions).
    /// (Entries of activities added again may linger; a row always wins.)
    @usableFromInline var deletedVersions: [UUID: UInt64] = [:]

    /// Creates an empty index.
    ///
    /// - Complexity: O(1)
    public init() {}

    /// Creates an index holding the given activities, built in bulk.
    ///
    /// - Parameter models: The activities; their ids must be distinct.
    /// - Throws: `ActivityIndexError.alreadyExists` for a repeated id,
    ///   `.endBeforeStart` for an activity that ends before it starts,
    ///   `.nonFiniteDate` for a NaN or infinite date.
    /// - Complexity: O(n log n) for the sort, then O(n).
    public init(_ models: some Sequence<ActivityModel>) throws(ActivityIndexError) {
        var sorted = Array(models)
        sorted.sort { ActivityCursor(after: $0) < ActivityCursor(after: $1) }
        var types = ActivityIndex()
        var rows: [ActivityRow] = []
        rows.reserveCapacity(sorted.count)
        for m in sorted {
            try Self.validate(m)
            rows.append(ActivityRow(
                id: m.id, start: m.startDate.timeIntervalSinceReferenceDate,
                end: m.endDate?.timeIntervalSinceReferenceDate ?? .nan, type: types.intern(m.type), version: 0))
        }
        let (index, duplicate) = try Self.restoring(rows: rows, typeTable: types.typeTable, checking: false)
        if let duplicate { throw .alreadyExists(rows[duplicate].id) }
        self = index
    }

    /// The number of activities in the index.
    ///
    /// - Complexity: O(1)
    @inlinable
    public var count: Int { slotsByID.count }

    /// Whether the index holds no activities.
    @inlinable
    public var isEmpty: Bool { slotsByID.count == 0 }

    /// The activity with the given id, if any.
    ///
    /// - Parameter id: The id to look up.
    /// - Complexity: O(1) on average.
    @inlinable
    public subscript(id id: UUID) -> ActivityModel? {
        guard let slot = slotsByID.find(id, rows: rows) else { return nil }
        return model(at: slot)
    }

    // MARK: Mutations

    /// Adds an activity.
    ///
    /// - Parameter model: The activity to add.
    /// - Throws: `ActivityIndexError.alreadyExists` if its id is present;
    ///   `.endBeforeStart` if it ends before it starts; `.nonFiniteDate` for
    ///   a NaN or infinite date.
    /// - Complexity: O(log n) searches plus moving at most a chunk of
    ///   `SortedSlotIndex.maxChunk` entries, twice.
    public mutating func insert(_ model: ActivityModel) throws(ActivityIndexError) {
        try insert(model, version: 0)
    }

    /// ``insert(_:)``, recording the activity's stream version.
    package mutating func insert(_ model: ActivityModel, version: UInt64) throws(ActivityIndexError) {
        // One probe finds both whether the id exists and where it goes.
        let probe = slotsByID.probeForInsert(model.id, rows: rows)
        guard probe.existing == nil else { throw .alreadyExists(model.id) }
        try Self.validate(model)
        let code = intern(model.type)
        // A deleted activity's version may stay in `deletedVersions` once it is added again:
        // the row comes first in every lookup, and snapshots leave such entries out (removing
        // it here cost a hash of every added id).
        let row = ActivityRow(
            id: model.id, start: model.startDate.timeIntervalSinceReferenceDate,
            end: model.endDate?.timeIntervalSinceReferenceDate ?? .nan, type: code,
            version: storedVersion(version, of: model.id))
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            rows[Int(slot)] = row
        } else {
            slot = Int32(rows.count)
            rows.append(row)
        }
        slotsByID.insert(slot, atBucket: probe.bucket, tag: probe.tag)
        link(slot)
    }

    /// Replaces the activity that has `model.id` with `model`.
    ///
    /// - Parameter model: The new state of the activity.
    /// - Throws: `ActivityIndexError.notFound` if no activity has its id;
    ///   `.endBeforeStart` if it ends before it starts; `.nonFiniteDate` for
    ///   a NaN or infinite date.
    /// - Complexity: O(1) if only the end date changes, otherwise like a
    ///   removal plus an insertion.
    public mutating func update(_ model: ActivityModel) throws(ActivityIndexError) {
        try update(model, version: 0)
    }

    /// ``update(_:)``, recording the activity's stream version.
    package mutating func update(_ model: ActivityModel, version: UInt64) throws(ActivityIndexError) {
        guard let slot = slotsByID.find(model.id, rows: rows) else { throw .notFound(model.id) }
        try Self.validate(model)
        let code = intern(model.type)
        let start = model.startDate.timeIntervalSinceReferenceDate
        let end = model.endDate?.timeIntervalSinceReferenceDate ?? .nan
        let old = rows[Int(slot)]
        let stored = storedVersion(version, of: model.id)
        if old.start == start && old.type == code {
            untrack(slot, old)
            rows[Int(slot)].end = end
            rows[Int(slot)].version = stored
            track(slot, rows[Int(slot)])
            return
        }
        unlink(slot)
        rows[Int(slot)] = ActivityRow(id: model.id, start: start, end: end, type: code, version: stored)
        link(slot)
    }

    /// Ends the activity with the given id at the given date.
    ///
    /// Ending an already ended activity moves its end date.
    ///
    /// - Parameters:
    ///   - id: The activity to end.
    ///   - date: Its end date.
    /// - Throws: `ActivityIndexError.notFound` for an unknown id;
    ///   `.endBeforeStart` (with both dates) if `date` precedes its start;
    ///   `.nonFiniteDate` if `date` is NaN or infinite.
    /// - Complexity: O(1) on average.
    public mutating func end(id: UUID, at date: Date) throws(ActivityIndexError) {
        try end(id: id, at: date, version: 0)
    }

    /// ``end(id:at:)``, recording the activity's stream version.
    package mutating func end(id: UUID, at date: Date, version: UInt64) throws(ActivityIndexError) {
        guard let slot = slotsByID.find(id, rows: rows) else { throw .notFound(id) }
        let start = rows[Int(slot)].start
        let end = date.timeIntervalSinceReferenceDate
        guard end.isFinite else { throw .nonFiniteDate(id: id) }
        guard end >= start else {
            throw .endBeforeStart(id: id, start: Date(timeIntervalSinceReferenceDate: start), end: date)
        }
        untrack(slot, rows[Int(slot)])
        rows[Int(slot)].end = end
        rows[Int(slot)].version = storedVersion(version, of: id)
        track(slot, rows[Int(slot)])
    }

    /// Removes the activity with the given id.
    ///
    /// - Parameter id: The activity to remove.
    /// - Returns: The removed activity, or `nil` if there was none (which is
    ///   not an error, so replaying a delete is harmless).
    /// - Complexity: O(log n) plus moving at most a chunk of entries, twice.
    @discardableResult
    public mutating func remove(id: UUID) -> ActivityModel? {
        guard let slot = slotsByID.remove(id, rows: rows) else { return nil }
        return remove(slot: slot)
    }

    /// ``remove(id:)``, recording the stream version of the deletion (kept for a deleted
    /// activity, even one that was not here).
    @discardableResult
    package mutating func remove(id: UUID, version: UInt64) -> ActivityModel? {
        deletedVersions[id] = version
        guard let slot = slotsByID.remove(id, rows: rows) else { return nil }
        return remove(slot: slot)
    }

    private mutating func remove(slot: Int32) -> ActivityModel? {
        let removed = model(at: slot)
        if !largeVersions.isEmpty { largeVersions.removeValue(forKey: removed.id) }
        unlink(slot)
        rows[Int(slot)].end = .nan
        freeSlots.append(slot)
        return removed
    }

    /// Brings the id table's bucket for `id` into the cache ahead of its lookup.
    func prefetch(id: UUID) {
        prefetchSink.store(slotsByID.prefetch(id), ordering: .relaxed)
    }

    /// Drops the deleted version of `id` (a purged activity compaction removes: never added again).
    package mutating func forgetDeletedVersion(of id: UUID) {
        if !deletedVersions.isEmpty { deletedVersions[id] = nil }
    }

    /// The committed stream version of the activity `id` (a deleted one's too); 0: none.
    /// - Complexity: O(1) on average.
    @inlinable
    package func version(of id: UUID) -> UInt64 {
        if let slot = slotsByID.find(id, rows: rows) { return version(atSlot: slot) }
        return deletedVersions.isEmpty ? 0 : deletedVersions[id] ?? 0
    }

    /// The stream version of the row in `slot`.
    @inlinable
    package func version(atSlot slot: Int32) -> UInt64 {
        let row = rows[Int(slot)]
        return row.version == ActivityRow.largeVersion ? largeVersions[row.id] ?? 0 : UInt64(row.version)
    }

    /// The activity with `id` and its stream version, with one lookup.
    @inlinable
    package func modelAndVersion(id: UUID) -> (ActivityModel?, UInt64) {
        if let slot = slotsByID.find(id, rows: rows) { return (model(at: slot), version(atSlot: slot)) }
        return (nil, deletedVersions.isEmpty ? 0 : deletedVersions[id] ?? 0)
    }

    /// Records `version` as the stream version of `id` whatever its state: for an event that
    /// was committed but could not be folded (its version still counts).
    package mutating func recordVersion(_ version: UInt64, of id: UUID) {
        if let slot = slotsByID.find(id, rows: rows) {
            rows[Int(slot)].version = storedVersion(version, of: id)
        } else {
            deletedVersions[id] = version
        }
    }

    /// The 32-bit field for `version`, keeping a larger one in ``largeVersions``.
    private mutating func storedVersion(_ version: UInt64, of id: UUID) -> UInt32 {
        if version < UInt64(ActivityRow.largeVersion) {
            if !largeVersions.isEmpty { largeVersions.removeValue(forKey: id) }
            return UInt32(version)
        }
        largeVersions[id] = version
        return ActivityRow.largeVersion
    }

    /// Rejects models the sorted indexes cannot hold consistently.
    static func validate(_ model: ActivityModel) throws(ActivityIndexError) {
        guard model.startDate.timeIntervalSinceReferenceDate.isFinite,
              model.endDate?.timeIntervalSinceReferenceDate.isFinite ?? true
        else { throw .nonFiniteDate(id: model.id) }
        if let end = model.endDate, end < model.startDate {
            throw .endBeforeStart(id: model.id, start: model.startDate, end: end)
        }
    }

    @usableFromInline
    mutating func intern(_ type: ActivityType) -> UInt32 {
        // Appends mostly repeat a few types: one comparison instead of a hash lookup.
        if let last = lastInterned, typeTable[Int(last)].rawValue.hasSameUTF8(as: type.rawValue) { return last }
        if let code = typeCodes[type] {
            lastInterned = code
            return code
        }
        let code = UInt32(typeTable.count)
        typeTable.append(type)
        typeCodes[type] = code
        lastInterned = code
        byType.append(SortedSlotIndex())
        return code
    }

    /// Adds a slot whose row is filled in to the sorted indexes and the
    /// active set.
    private mutating func link(_ slot: Int32) {
        let row = rows[Int(slot)]
        let entry = IndexEntry(start: row.start, slot: slot)
        byStart.insert(entry, id: row.id, rows: rows)
        byType[Int(row.type)].insert(entry, id: row.id, rows: rows)
        track(slot, row)
    }

    private mutating func unlink(_ slot: Int32) {
        let row = rows[Int(slot)]
        byStart.remove(start: row.start, id: row.id, slot: slot, rows: rows)
        byType[Int(row.type)].remove(start: row.start, id: row.id, slot: slot, rows: rows)
        untrack(slot, row)
    }

    /// The histogram bucket `k` with `duration <= 2^k` (63 for huge ones).
    static func durationBucket(_ duration: Double) -> Int {
        guard duration > 1 else { return 0 }
        guard duration < 0x1p62 else { return 63 }
        // ceil(log2(duration)) from the binary exponent, without calling log2.
        let k = Int(duration.exponent)
        return duration.significandBitPattern == 0 ? k : k + 1
    }

    /// Counts a linked row in the active set or the duration histogram.
    mutating func track(_ slot: Int32, _ row: ActivityRow) {
        if row.end.isNaN {
            activeSlots.insert(slot)
        } else {
            durationBuckets[Self.durationBucket(row.end - row.start)] += 1
        }
    }

    /// Undoes `track` for the row's current state.
    mutating func untrack(_ slot: Int32, _ row: ActivityRow) {
        if row.end.isNaN {
            activeSlots.remove(slot)
        } else {
            durationBuckets[Self.durationBucket(row.end - row.start)] -= 1
        }
    }

    /// An upper bound on the duration of every ended activity: within 2x of
    /// the true maximum, infinite if some duration exceeds 2^62 seconds.
    var maxEndedDurationBound: Double {
        guard let k = durationBuckets.lastIndex(where: { $0 > 0 }) else { return 0 }
        return k >= 63 ? .infinity : Double(sign: .plus, exponent: k, significand: 1)
    }

    // MARK: Reading

    @inlinable
    func model(at slot: Int32) -> ActivityModel {
        let row = rows[Int(slot)]
        return ActivityModel(
            id: row.id,
            startDate: Date(timeIntervalSinceReferenceDate: row.start),
            endDate: row.end.isNaN ? nil : Date(timeIntervalSinceReferenceDate: row.end),
            type: typeTable[Int(row.type)])
    }

    /// Whether `a` sorts before `b` (oldest first).
    @inlinable
    func entryLess(_ a: IndexEntry, _ b: IndexEntry) -> Bool {
        if a.start != b.start { return a.start < b.start }
        return ActivityCursor.idLess(rows[Int(a.slot)].id, rows[Int(b.slot)].id)
    }

    /// All activities in the given order.
    ///
    /// - Parameter order: The result order.
    /// - Returns: Every activity in the index.
    /// - Complexity: O(n)
    public func all(sortedBy order: ActivitySortOrder = .oldestFirst) -> [ActivityModel] {
        var result: [ActivityModel] = []
        result.reserveCapacity(count)
        byStart.scan(from: byStart.startPosition, to: byStart.endPosition, reversed: order == .newestFirst) {
            result.append(model(at: $0.slot))
            return true
        }
        return result
    }

    /// Whether an activity satisfies a query's filters and cursor (offset
    /// and limit depend on the other results and are not checked).
    ///
    /// Observation uses this to decide cheaply whether a change can affect a
    /// query's results.
    ///
    /// - Parameters:
    ///   - model: The activity to test.
    ///   - query: The query.
    /// - Complexity: O(1) on average.
    @inlinable
    public func matches(_ model: ActivityModel, _ query: ActivityQuery) -> Bool {
        query.matches(model)
    }
}
