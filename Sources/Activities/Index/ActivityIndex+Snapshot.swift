import Foundation
@_spi(Indexing) import EventKernel
import EventLog
import KernelPrimitives

extension ActivityIndex {
    /// An index over `rows`, which must come in strictly increasing `(start, id)` order (a
    /// snapshot's, or sorted models): every sorted index is built by appending, in O(n).
    ///
    /// Two passes over the rows, independent of each other, run on two threads: the id table
    /// (radix-sorted and written in bucket order, `SlotTable.bulkLoad`) and the sorted indexes
    /// with the active set and duration histogram, which also checks each row when `checking`.
    /// Together they were most of an open from a snapshot.
    ///
    /// - Parameters:
    ///   - rows: The rows; slot `i` is `rows[i]`.
    ///   - typeTable: The interned types the rows' codes index.
    ///   - checking: Whether to check the rows (dates, type codes, order): false for rows built
    ///     from models that were validated already.
    /// - Returns: The index and the slot of a row whose id repeats an earlier one, if any.
    /// - Throws: `ActivityIndexError.corruptSnapshot` for a row that breaks the index's rules.
    /// - Complexity: O(n)
    static func restoring(rows: [ActivityRow], typeTable: [ActivityType], checking: Bool) throws(ActivityIndexError) -> (ActivityIndex, duplicate: Int?) {
        var index = ActivityIndex()
        for type in typeTable { _ = index.intern(type) }
        index.rows = rows
        let typeCount = typeTable.count
        /// What the second thread builds.
        struct Sorted: Sendable {
            var byStart = SortedSlotIndex()
            var byType: [SortedSlotIndex] = []
            var activeSlots: Set<Int32> = []
            var durationBuckets = [Int](repeating: 0, count: 64)
            var problem: ActivityIndexError?
        }
        let idTable = Locked<(SlotTable, Int?)?>(nil)
        let sortedParts = Locked<Sorted?>(nil)
        DispatchQueue.concurrentPerform(iterations: 2) { part in
            if part == 0 {
                var table = SlotTable()
                let duplicate = table.bulkLoad(rows: rows)
                idTable.withLock { $0 = (table, duplicate) }
                return
            }
            var sorted = Sorted()
            var byStart = SortedSlotIndex.Builder()
            var byType = [SortedSlotIndex.Builder](repeating: .init(), count: typeCount)
            var previous: ActivityRow?
            for (i, row) in rows.enumerated() {
                if checking {
                    guard row.start.isFinite else { sorted.problem = .corruptSnapshot("row \(i): non-finite start"); break }
                    if !row.end.isNaN {
                        guard row.end.isFinite, row.end >= row.start else { sorted.problem = .corruptSnapshot("row \(i): bad end date"); break }
                    }
                    guard Int(row.type) < typeCount else { sorted.problem = .corruptSnapshot("row \(i): bad type code \(row.type)"); break }
                    if let previous {
                        guard previous.start < row.start || (previous.start == row.start && ActivityCursor.idLess(previous.id, row.id)) else {
                            sorted.problem = .corruptSnapshot("row \(i): rows out of order")
                            break
                        }
                    }
                    previous = row
                }
                let entry = IndexEntry(start: row.start, slot: Int32(i))
                byStart.append(entry)
                byType[Int(row.type)].append(entry)
                if row.end.isNaN {
                    sorted.activeSlots.insert(Int32(i))
                } else {
                    sorted.durationBuckets[ActivityIndex.durationBucket(row.end - row.start)] += 1
                }
            }
            sorted.byStart = byStart.finish()
            sorted.byType = byType.indices.map { byType[$0].finish() }
            sortedParts.withLock { $0 = sorted }
        }
        let sorted = sortedParts.withLock { $0 }!
        if let problem = sorted.problem { throw problem }
        let (table, duplicate) = idTable.withLock { $0 }!
        index.slotsByID = table
        index.byStart = sorted.byStart
        index.byType = sorted.byType
        index.activeSlots = sorted.activeSlots
        index.durationBuckets = sorted.durationBuckets
        return (index, duplicate)
    }
}

/// Bounds-checked little-endian reads from untrusted bytes.
private struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    var offset: Int

    mutating func read<T: FixedWidthInteger>(_: T.Type) throws(ActivityIndexError) -> T {
        guard bytes.count - offset >= MemoryLayout<T>.size else {
            throw .corruptSnapshot("truncated at byte \(offset)")
        }
        let value = bytes.loadLittleEndian(at: offset, as: T.self)
        offset += MemoryLayout<T>.size
        return value
    }

    /// A varint (KernelPrimitives' `Varint`).
    mutating func readVarint() throws(ActivityIndexError) -> UInt64 {
        let start = offset
        do throws(Varint.Failure) {
            return try Varint.decode(bytes, at: &offset)
        } catch .truncated {
            throw .corruptSnapshot("truncated at byte \(offset)")
        } catch {
            throw .corruptSnapshot("malformed varint at byte \(start)")
        }
    }

    mutating func readUUID() throws(ActivityIndexError) -> UUID {
        guard bytes.count - offset >= 16 else { throw .corruptSnapshot("truncated at byte \(offset)") }
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &uuid) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + 16])) }
        offset += 16
        return UUID(uuid: uuid)
    }
}

extension ActivityIndex {
    /// The snapshot format version this code writes; it reads 1 and 2.
    static let snapshotVersion: UInt8 = 2
    private static let magic: [UInt8] = Array("EKAI".utf8)
    /// Bytes per row of format 1.
    private static let format1RowSize = 36
    /// Marks an active row's end in format 1; any NaN would do, one canonical pattern
    /// keeps snapshots byte-for-byte deterministic.
    private static let activeEndBits = Double.nan.bitPattern

    /// A 64-bit checksum over whole words: each step is a bijection of the
    /// state, so any change confined to one word is always detected.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let p: UInt64 = 0x9FB2_1C65_1E98_DF25
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
        var i = 0
        while i + 8 <= bytes.count {
            let w = bytes.loadLittleEndian(at: i, as: UInt64.self)
            h = (h ^ w) &* p
            h = (h << 29) | (h >> 35)
            i += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while i < bytes.count {
            tail |= UInt64(bytes[i]) << shift
            shift += 8
            i += 1
        }
        h = (h ^ tail) &* p
        return h ^ (h >> 31)
    }

    /// Appends a compact binary snapshot of the index to `bytes`.
    ///
    /// Format 2 (little-endian), columnar: magic `EKAI`, a version byte, 3 zero bytes; the type
    /// table as a `UInt32` count and per type a `UInt32` UTF-8 length and the bytes; a `UInt64`
    /// row count n; then the rows in ascending `(start, id)` order, which is what lets loading
    /// bulk-build every sorted index in O(n), column by column:
    /// - ids: n × 16 bytes;
    /// - starts: per row a varint `v`; even `v`: the start is a whole number of seconds,
    ///   `zigzag(v >> 1)` after the last whole start (0 before the first); `v == 1`: the start's
    ///   8 `Double` bytes follow;
    /// - ends: per row a varint: 0 active; `d << 2 | 1`: the start plus `d` whole seconds
    ///   (exactly); 2: the end's 8 `Double` bytes follow;
    /// - type codes: per row a varint;
    /// - stream versions: per row a varint;
    /// then the deleted activities' versions (a varint count, per one a 16-byte id and a varint
    /// version, in id order) and a `UInt64` checksum of all preceding bytes of the snapshot.
    ///
    /// Why columnar: ids are random and take 16 bytes whatever is done, but sorted starts
    /// differ by about a minute, durations are minutes to hours, and types and versions are
    /// small: as varints in columns they take 5-6 bytes a row where the 24 bytes of format 1's
    /// row compressed to about 13: a quarter of the snapshot's bytes saved, and the snapshot is
    /// half the store's.
    ///
    /// Format 1 had 36-byte rows `(id, start bits, end bits, type code)` and no versions (read
    /// as 0); it is still decoded.
    ///
    /// - Parameter bytes: The buffer to append to.
    /// - Complexity: O(n)
    public func serialize(into bytes: inout [UInt8]) {
        let base = bytes.count
        var out = BinaryWriter(capacity: 32 + count * 24)
        out.writeRaw(Self.magic)
        out.writeUInt8(Self.snapshotVersion)
        out.writeRaw([0, 0, 0])
        out.writeFixed(UInt32(typeTable.count))
        for type in typeTable {
            let name = Array(type.rawValue.utf8)
            out.writeFixed(UInt32(name.count))
            out.writeRaw(name)
        }
        out.writeFixed(UInt64(count))
        var slots: [Int32] = []
        slots.reserveCapacity(count)
        byStart.scan(from: byStart.startPosition, to: byStart.endPosition, reversed: false) {
            slots.append($0.slot)
            return true
        }
        for slot in slots { out.writeUUID(rows[Int(slot)].id) }
        var lastWhole: Int64 = 0
        for slot in slots {
            let start = rows[Int(slot)].start
            if let whole = Self.wholeSeconds(start) {
                out.writeVarint(ZigZag.encode(whole &- lastWhole) << 1)
                lastWhole = whole
            } else {
                out.writeVarint(1)
                out.writeDouble(start)
            }
        }
        for slot in slots {
            let row = rows[Int(slot)]
            if row.end.isNaN {
                out.writeVarint(0)
            } else if let duration = Self.wholeSeconds(row.end - row.start), duration >= 0, duration < 1 << 61,
                      (row.start + Double(duration)).bitPattern == row.end.bitPattern {
                out.writeVarint(UInt64(duration) << 2 | 1)
            } else {
                out.writeVarint(2)
                out.writeDouble(row.end)
            }
        }
        for slot in slots { out.writeVarint(UInt64(rows[Int(slot)].type)) }
        for slot in slots { out.writeVarint(version(atSlot: slot)) }
        // Versions of deleted activities that were not added again, in id order: snapshots
        // stay byte-for-byte deterministic.
        let deleted = deletedVersions.filter { slotsByID.find($0.key, rows: rows) == nil }
            .sorted { ActivityCursor.idLess($0.key, $1.key) }
        out.writeVarint(UInt64(deleted.count))
        for (id, version) in deleted {
            out.writeUUID(id)
            out.writeVarint(version)
        }
        bytes.append(contentsOf: out.bytes)
        let sum = bytes.withUnsafeBytes { Self.checksum(UnsafeRawBufferPointer(rebasing: $0[base...])) }
        bytes.appendLittleEndian(sum)
    }

    /// `value` as a whole number of seconds, when the `Double` is exactly that integer (bit
    /// for bit: `-0.0` is not 0) and every neighbouring integer is a `Double` too.
    private static func wholeSeconds(_ value: Double) -> Int64? {
        guard value.isFinite, abs(value) <= 0x1p53 else { return nil }
        let whole = Int64(value)
        return Double(whole).bitPattern == value.bitPattern ? whole : nil
    }


    /// Loads an index from bytes written by `serialize(into:)`.
    ///
    /// Rows are stored in key order, so the sorted indexes are rebuilt by
    /// appending, in O(n), much faster than inserting one by one.
    ///
    /// - Parameter bytes: Exactly one snapshot.
    /// - Throws: `ActivityIndexError.corruptSnapshot` for truncated, trailing
    ///   or corrupted bytes (checksum mismatch), an unknown version, or
    ///   contents that violate the index invariants (unsorted rows, duplicate
    ///   ids or type names, bad type codes, non-finite dates, end before
    ///   start). Never traps on malformed input.
    /// - Complexity: O(n)
    public init(deserializing bytes: UnsafeRawBufferPointer) throws(ActivityIndexError) {
        guard bytes.count >= 8 + 4 + 8 + 8 else { throw .corruptSnapshot("too short (\(bytes.count) bytes)") }
        guard bytes.prefix(4).elementsEqual(Self.magic) else { throw .corruptSnapshot("bad magic") }
        let format = bytes[4]
        guard format == 1 || format == Self.snapshotVersion else {
            throw .corruptSnapshot("unsupported version \(format)")
        }
        let bodyCount = bytes.count - 8
        let stored = bytes.loadLittleEndian(at: bodyCount, as: UInt64.self)
        guard Self.checksum(UnsafeRawBufferPointer(rebasing: bytes[..<bodyCount])) == stored else {
            throw .corruptSnapshot("checksum mismatch")
        }
        let body = UnsafeRawBufferPointer(rebasing: bytes[..<bodyCount])
        var reader = ByteReader(bytes: body, offset: 8)
        let typeCount = Int(try reader.read(UInt32.self))
        guard typeCount <= body.count else { throw .corruptSnapshot("type count \(typeCount) too large") }
        var typeTable: [ActivityType] = []
        var typeNames: Set<ActivityType> = []
        for _ in 0..<typeCount {
            let length = Int(try reader.read(UInt32.self))
            guard body.count - reader.offset >= length else { throw .corruptSnapshot("truncated type name") }
            // Validated, never repaired: a name with U+FFFD in place of bad bytes would be a
            // type no event ever named.
            guard let name = String(validating: UnsafeRawBufferPointer(rebasing: body[reader.offset..<reader.offset + length]),
                                    as: UTF8.self) else {
                throw .corruptSnapshot("type name at body offset \(reader.offset) is not UTF-8")
            }
            reader.offset += length
            guard typeNames.insert(ActivityType(rawValue: name)).inserted else {
                throw .corruptSnapshot("duplicate type name \(name)")
            }
            typeTable.append(ActivityType(rawValue: name))
        }
        let rowCount = try reader.read(UInt64.self)
        let remaining = body.count - reader.offset
        // Format 1 rows are fixed; a format 2 row takes at least 20 bytes (id and four varints).
        guard rowCount <= UInt64(Int32.max), format == 1 ? Int(rowCount) * Self.format1RowSize == remaining : Int(rowCount) * 20 <= remaining else {
            throw .corruptSnapshot("row count \(rowCount) does not match \(remaining) remaining bytes")
        }
        let n = Int(rowCount)
        let (rows, largeVersions) = format == 1 ? (try Self.format1Rows(n, &reader), [:]) : try Self.columnarRows(n, &reader)
        var (index, duplicate) = try Self.restoring(rows: rows, typeTable: typeTable, checking: true)
        if let duplicate { throw .corruptSnapshot("duplicate id \(rows[duplicate].id)") }
        index.largeVersions = largeVersions
        if format > 1 {
            let deletedCount = try reader.readVarint()
            guard deletedCount <= UInt64((body.count - reader.offset) / 17) else {
                throw .corruptSnapshot("\(deletedCount) deleted activities do not fit the \(body.count - reader.offset) remaining bytes")
            }
            for _ in 0..<deletedCount {
                let id = try reader.readUUID()
                let version = try reader.readVarint()
                guard index.slotsByID.find(id, rows: index.rows) == nil else {
                    throw .corruptSnapshot("a deleted version for \(id), which has a row")
                }
                index.deletedVersions[id] = version
            }
        }
        guard reader.offset == body.count else {
            throw .corruptSnapshot("\(body.count - reader.offset) bytes after the rows")
        }
        self = index
    }

    /// Reads format 1's 36-byte rows.
    private static func format1Rows(_ n: Int, _ reader: inout ByteReader) throws(ActivityIndexError) -> [ActivityRow] {
        var rows: [ActivityRow] = []
        rows.reserveCapacity(n)
        for _ in 0..<n {
            let id = try reader.readUUID()
            let start = Double(bitPattern: try reader.read(UInt64.self))
            let endBits = try reader.read(UInt64.self)
            let type = try reader.read(UInt32.self)
            rows.append(ActivityRow(id: id, start: start, end: endBits == activeEndBits ? .nan : Double(bitPattern: endBits), type: type, version: 0))
        }
        return rows
    }

    /// Reads format 2's columns into rows; versions that do not fit a row are returned apart.
    private static func columnarRows(_ n: Int, _ reader: inout ByteReader) throws(ActivityIndexError) -> ([ActivityRow], [UUID: UInt64]) {
        var rows = [ActivityRow](repeating: ActivityRow(id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), start: 0, end: .nan, type: 0, version: 0), count: n)
        for i in 0..<n { rows[i].id = try reader.readUUID() }
        var lastWhole: Int64 = 0
        for i in 0..<n {
            let at = reader.offset
            let value = try reader.readVarint()
            if value & 1 == 0 {
                let delta = ZigZag.decode(value >> 1)
                let (whole, overflow) = lastWhole.addingReportingOverflow(delta)
                guard !overflow, abs(whole) <= 1 << 53 else { throw .corruptSnapshot("row \(i): start out of range at byte \(at)") }
                rows[i].start = Double(whole)
                lastWhole = whole
            } else {
                guard value == 1 else { throw .corruptSnapshot("row \(i): unknown start tag \(value) at byte \(at)") }
                rows[i].start = Double(bitPattern: try reader.read(UInt64.self))
            }
        }
        for i in 0..<n {
            let at = reader.offset
            let value = try reader.readVarint()
            switch value & 3 {
            case 0 where value == 0: rows[i].end = .nan
            case 1:
                let duration = value >> 2
                guard duration < 1 << 61 else { throw .corruptSnapshot("row \(i): duration out of range at byte \(at)") }
                rows[i].end = rows[i].start + Double(duration)
            case 2 where value == 2: rows[i].end = Double(bitPattern: try reader.read(UInt64.self))
            default: throw .corruptSnapshot("row \(i): unknown end tag \(value) at byte \(at)")
            }
        }
        for i in 0..<n {
            let code = try reader.readVarint()
            guard code <= UInt64(UInt32.max) else { throw .corruptSnapshot("row \(i): bad type code \(code)") }
            rows[i].type = UInt32(code)
        }
        var large: [UUID: UInt64] = [:]
        for i in 0..<n {
            let version = try reader.readVarint()
            if version < UInt64(ActivityRow.largeVersion) {
                rows[i].version = UInt32(version)
            } else {
                rows[i].version = ActivityRow.largeVersion
                large[rows[i].id] = version
            }
        }
        return (rows, large)
    }

    /// Loads an index from bytes written by `serialize(into:)`.
    ///
    /// - Parameter bytes: Exactly one snapshot.
    /// - Throws: `ActivityIndexError.corruptSnapshot` for malformed bytes.
    /// - Complexity: O(n)
    public init(deserializing bytes: [UInt8]) throws(ActivityIndexError) {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(ActivityIndexError) in try ActivityIndex(deserializing: raw) }
        }
        self = try result.get()
    }
}
