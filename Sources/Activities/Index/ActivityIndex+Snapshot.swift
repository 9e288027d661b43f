import Foundation
@_spi(Indexing) import EventKernel

/// Builds an index from rows that arrive in strictly increasing
/// `(start, id)` order, appending to the sorted indexes in O(1) each.
struct BulkBuilder {
    var index = ActivityIndex()

    init(capacity: Int) {
        index.rows.reserveCapacity(capacity)
    }

    /// Appends a row; the id map is built afterwards by `finish()`.
    mutating func append(id: UUID, start: Double, end: Double, type: UInt32, version: UInt32 = 0) {
        let slot = Int32(index.rows.count)
        index.rows.append(ActivityRow(id: id, start: start, end: end, type: type, version: version))
        let entry = IndexEntry(start: start, slot: slot)
        index.byStart.appendSorted(entry)
        index.byType[Int(type)].appendSorted(entry)
        index.track(slot, index.rows[Int(slot)])
    }

    /// Builds the id map; returns the id of a repeated row, if any.
    mutating func finish() -> UUID? {
        let rows = index.rows
        return index.slotsByID.bulkLoad(rows: rows).map { rows[$0].id }
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
        let value = T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
        offset += MemoryLayout<T>.size
        return value
    }
}

extension ActivityIndex {
    /// The snapshot format version this code writes; it reads 1 and 2.
    static let snapshotVersion: UInt8 = 2
    private static let magic: [UInt8] = Array("EKAI".utf8)
    /// Bytes per row: 36 in format 1, 40 in format 2 (the stream version added).
    private static func rowSize(_ format: UInt8) -> Int { format == 1 ? 36 : 40 }
    /// Marks an active row's end; any NaN would do, one canonical pattern
    /// keeps snapshots byte-for-byte deterministic.
    private static let activeEndBits = Double.nan.bitPattern

    /// A 64-bit checksum over whole words: each step is a bijection of the
    /// state, so any change confined to one word is always detected.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let p: UInt64 = 0x9FB2_1C65_1E98_DF25
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
        var i = 0
        while i + 8 <= bytes.count {
            let w = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self))
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
    /// Format 2 (little-endian): magic `EKAI`, a version byte, 3 zero bytes;
    /// the type table as a `UInt32` count and per type a `UInt32` UTF-8
    /// length and the bytes; a `UInt64` row count; 40-byte rows
    /// `(id, start bits, end bits, type code, stream version)` in ascending
    /// `(start, id)` order, which is what lets loading bulk-build every sorted
    /// index in O(n); a `UInt64` count of versions too large for a row's
    /// `UInt32` (whose row holds `UInt32.max`) and per one its 16-byte id and
    /// `UInt64` version; the same for deleted activities' versions; and a
    /// `UInt64` checksum of all preceding bytes of the snapshot. Format 1 had
    /// 36-byte rows without the version and neither list (versions read as 0).
    ///
    /// - Parameter bytes: The buffer to append to.
    /// - Complexity: O(n)
    public func serialize(into bytes: inout [UInt8]) {
        let base = bytes.count
        let names = typeTable.map { Array($0.rawValue.utf8) }
        let rowSize = Self.rowSize(Self.snapshotVersion)
        // Versions of deleted activities that were not added again.
        let deleted = deletedVersions.filter { slotsByID.find($0.key, rows: rows) == nil }
        let size = 8 + 4 + names.reduce(0) { $0 + 4 + $1.count } + 8 + count * rowSize
            + 8 + largeVersions.count * 24 + 8 + deleted.count * 24 + 8
        bytes.append(contentsOf: repeatElement(0, count: size))
        bytes.withUnsafeMutableBytes { whole in
            let out = UnsafeMutableRawBufferPointer(rebasing: whole[base...])
            var o = 0
            func put<T: FixedWidthInteger>(_ v: T) {
                out.storeBytes(of: v.littleEndian, toByteOffset: o, as: T.self)
                o += MemoryLayout<T>.size
            }
            for b in Self.magic { put(b) }
            put(Self.snapshotVersion)
            o += 3
            put(UInt32(names.count))
            for name in names {
                put(UInt32(name.count))
                for b in name { put(b) }
            }
            put(UInt64(count))
            byStart.scan(from: byStart.startPosition, to: byStart.endPosition, reversed: false) { e in
                let row = rows[Int(e.slot)]
                withUnsafeBytes(of: row.id.uuid) { id in
                    out.baseAddress!.advanced(by: o).copyMemory(from: id.baseAddress!, byteCount: 16)
                }
                o += 16
                put(row.start.bitPattern)
                put(row.end.isNaN ? Self.activeEndBits : row.end.bitPattern)
                put(row.type)
                put(row.version)
                return true
            }
            for versions in [largeVersions, deleted] {
                put(UInt64(versions.count))
                // In id order: snapshots stay byte-for-byte deterministic.
                for (id, version) in versions.sorted(by: { ActivityCursor.idLess($0.key, $1.key) }) {
                    withUnsafeBytes(of: id.uuid) { bytes in
                        out.baseAddress!.advanced(by: o).copyMemory(from: bytes.baseAddress!, byteCount: 16)
                    }
                    o += 16
                    put(version)
                }
            }
            put(Self.checksum(UnsafeRawBufferPointer(rebasing: out[..<o])))
            precondition(o == size, "snapshot size mismatch")
        }
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
        let rowSize = Self.rowSize(format)
        let bodyCount = bytes.count - 8
        let stored = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: bodyCount, as: UInt64.self))
        guard Self.checksum(UnsafeRawBufferPointer(rebasing: bytes[..<bodyCount])) == stored else {
            throw .corruptSnapshot("checksum mismatch")
        }
        let body = UnsafeRawBufferPointer(rebasing: bytes[..<bodyCount])
        var reader = ByteReader(bytes: body, offset: 8)
        let typeCount = Int(try reader.read(UInt32.self))
        guard typeCount <= body.count else { throw .corruptSnapshot("type count \(typeCount) too large") }
        var builder = BulkBuilder(capacity: 0)
        for code in 0..<typeCount {
            let length = Int(try reader.read(UInt32.self))
            guard body.count - reader.offset >= length else { throw .corruptSnapshot("truncated type name") }
            let name = String(decoding: UnsafeRawBufferPointer(rebasing: body[reader.offset..<reader.offset + length]),
                              as: UTF8.self)
            reader.offset += length
            guard builder.index.intern(ActivityType(rawValue: name)) == UInt32(code) else {
                throw .corruptSnapshot("duplicate type name \(name)")
            }
        }
        let rowCount = try reader.read(UInt64.self)
        let remaining = body.count - reader.offset
        guard rowCount <= UInt64(Int32.max), format == 1 ? Int(rowCount) * rowSize == remaining : Int(rowCount) * rowSize <= remaining else {
            throw .corruptSnapshot("row count \(rowCount) does not match \(remaining) remaining bytes")
        }
        let n = Int(rowCount)
        builder.index.rows.reserveCapacity(n)
        var previousStart = -Double.infinity
        var previousID: UUID? = nil
        var markedLarge = 0
        var o = reader.offset
        for i in 0..<n {
            var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &uuid) {
                $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: body[o..<o + 16]))
            }
            let id = UUID(uuid: uuid)
            let start = Double(bitPattern: UInt64(littleEndian: body.loadUnaligned(fromByteOffset: o + 16, as: UInt64.self)))
            let endBits = UInt64(littleEndian: body.loadUnaligned(fromByteOffset: o + 24, as: UInt64.self))
            let type = UInt32(littleEndian: body.loadUnaligned(fromByteOffset: o + 32, as: UInt32.self))
            let version = format == 1 ? 0 : UInt32(littleEndian: body.loadUnaligned(fromByteOffset: o + 36, as: UInt32.self))
            if version == ActivityRow.largeVersion { markedLarge += 1 }
            o += rowSize
            guard start.isFinite else { throw .corruptSnapshot("row \(i): non-finite start") }
            let end = endBits == Self.activeEndBits ? Double.nan : Double(bitPattern: endBits)
            if endBits != Self.activeEndBits {
                guard end.isFinite, end >= start else { throw .corruptSnapshot("row \(i): bad end date") }
            }
            guard Int(type) < typeCount else { throw .corruptSnapshot("row \(i): bad type code \(type)") }
            if let previousID {
                guard previousStart < start || (previousStart == start && ActivityCursor.idLess(previousID, id)) else {
                    throw .corruptSnapshot("row \(i): rows out of order")
                }
            }
            builder.append(id: id, start: start, end: end, type: type, version: version)
            previousStart = start
            previousID = id
        }
        if let duplicate = builder.finish() { throw .corruptSnapshot("duplicate id \(duplicate)") }
        if format > 1 {
            reader.offset = o
            for list in 0..<2 {
                let entries = try reader.read(UInt64.self)
                guard entries <= UInt64((body.count - reader.offset) / 24) else {
                    throw .corruptSnapshot("\(entries) versions do not fit the \(body.count - reader.offset) remaining bytes")
                }
                for _ in 0..<entries {
                    var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                    withUnsafeMutableBytes(of: &uuid) {
                        $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: body[reader.offset..<reader.offset + 16]))
                    }
                    reader.offset += 16
                    let id = UUID(uuid: uuid)
                    let version = try reader.read(UInt64.self)
                    let present = builder.index.slotsByID.find(id, rows: builder.index.rows)
                    if list == 0 {
                        guard let slot = present, builder.index.rows[Int(slot)].version == ActivityRow.largeVersion else {
                            throw .corruptSnapshot("a large version for \(id), which has no row marked for one")
                        }
                        builder.index.largeVersions[id] = version
                    } else {
                        guard present == nil else { throw .corruptSnapshot("a deleted version for \(id), which has a row") }
                        builder.index.deletedVersions[id] = version
                    }
                }
            }
            guard reader.offset == body.count else {
                throw .corruptSnapshot("\(body.count - reader.offset) bytes after the versions")
            }
            guard builder.index.largeVersions.count == markedLarge else {
                throw .corruptSnapshot("a row is marked for a large version the snapshot does not hold")
            }
        }
        self = builder.index
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
