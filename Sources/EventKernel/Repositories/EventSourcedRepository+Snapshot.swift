import Foundation
import KernelPrimitives

/// The repository's snapshot layout: encoding the entity table, and restoring it with its
/// entities decoded in parallel parts.
extension EventSourcedRepository {
    /// The snapshot layout version: 2 added stream versions and the entity schema version, 3
    /// the insertion sequence and the declared indexes' order, 4 the entities in parts, 5 the
    /// versions of deleted entities (the projection is its streams' version source).
    static var snapshotLayoutVersion: UInt16 { 5 }

    /// Entities per part of a snapshot (layout 4): parts decode in parallel at open.
    private static var entitiesPerSnapshotPart: Int { 4_096 }

    /// Layout 4: entity schema version, count, next sequence; per entity in insertion order its
    /// id, stream version and sequence delta; per declared index its name and the entities'
    /// order as ordinals (so restoring sorts nothing); then the entities in insertion order, in
    /// parts of at most ``entitiesPerSnapshotPart``: the part count, then per part its byte
    /// length and the part encoded by the schema as one array. Decoding entities through
    /// `Codable` is most of an open from a snapshot, and parts let it use every core.
    static func encodeSnapshot(_ table: State, schema: EntitySchema<Entity>, indexes: [EntityIndex<Entity>]) throws -> [UInt8] {
        var writer = BinaryWriter(capacity: 32 + table.count * 24)
        writer.writeVarint(UInt64(schema.version))
        writer.writeVarint(UInt64(table.count))
        writer.writeVarint(table.rows.nextSequence)
        let rows = table.rows
        var ordinals = [Int32](repeating: 0, count: rows.heads.count)
        var slots: [Int32] = []
        slots.reserveCapacity(table.count)
        var previous: UInt64 = 0
        rows.bySequence.scan(from: rows.bySequence.startPosition, to: rows.bySequence.endPosition, reversed: false) { entry in
            let head = rows.heads[Int(entry.slot)]
            ordinals[Int(entry.slot)] = Int32(slots.count)
            writer.writeEntityID(head.id)
            writer.writeVarint(head.version)
            writer.writeVarint(head.sequence - previous)
            previous = head.sequence
            slots.append(entry.slot)
            return true
        }
        // Versions of deleted entities that were not added again, in id order: a dictionary's
        // order changes from process to process, and snapshots are byte-for-byte deterministic.
        let deleted = rows.deletedVersions.filter { rows.slot(of: $0.key) == nil }
            .sorted { EntityID.canonicallyPrecedes($0.key, $1.key) }
        writer.writeVarint(UInt64(deleted.count))
        for (id, version) in deleted {
            writer.writeEntityID(id)
            writer.writeVarint(version)
        }
        writer.writeVarint(UInt64(indexes.count))
        for (number, index) in indexes.enumerated() {
            writer.writeString(index.name)
            let entries = rows.indexes[number]
            entries.scan(from: entries.startPosition, to: entries.endPosition, reversed: false) { entry in
                writer.writeVarint(UInt64(ordinals[Int(entry.slot)]))
                return true
            }
        }
        let partSize = entitiesPerSnapshotPart
        writer.writeVarint(UInt64((slots.count + partSize - 1) / partSize))
        // Gathered one part at a time: a copy of every entity at once would double the
        // snapshot's peak memory.
        for start in stride(from: 0, to: slots.count, by: partSize) {
            writer.writeBytes(try schema.encode(table.entities(at: slots[start..<min(start + partSize, slots.count)])))
        }
        return writer.bytes
    }

    static func decodeSnapshot(_ bytes: [UInt8], schema: EntitySchema<Entity>, indexes: [EntityIndex<Entity>]) throws -> State {
        var reader = BinaryReader(bytes)
        let entitySchemaVersion = try reader.readVarint(as: UInt16.self)
        let count = Int(try reader.readVarint())
        guard count <= reader.remaining else { throw BinaryDecodingError(.invalidValue("\(count) entities in \(reader.remaining) bytes"), at: 0) }
        let nextSequence = try reader.readVarint()
        var heads: [RowHead] = []
        heads.reserveCapacity(count)
        var sequence: UInt64 = 0
        for number in 0..<count {
            let id = try reader.readEntityID()
            let version = try reader.readVarint()
            let deltaOffset = reader.offset
            let delta = try reader.readVarint()
            // Sequences strictly ascend: two rows of one sequence would make a later delete
            // remove the other row's insertion-order entry (found by sequence alone), leaving
            // `fetchAll` wrong. The last sequence also leaves room for the next one
            // (`nextSequence` below), and none wraps (a trap, not an error).
            guard number == 0 || delta > 0 else {
                throw BinaryDecodingError(.invalidValue("sequence delta 0 at entity \(number) of \(count) (sequences must ascend)"), at: deltaOffset)
            }
            let (next, overflow) = sequence.addingReportingOverflow(delta)
            guard !overflow, next < .max else {
                throw BinaryDecodingError(.invalidValue("sequence delta \(delta) at entity \(number) of \(count) overflows the sequence \(sequence)"), at: deltaOffset)
            }
            sequence = next
            heads.append(RowHead(id: id, version: version, sequence: sequence))
        }
        let deletedCount = Int(try reader.readVarint())
        guard deletedCount <= reader.remaining else { throw BinaryDecodingError(.invalidValue("\(deletedCount) deleted entities in \(reader.remaining) bytes"), at: reader.offset) }
        var deletedVersions: [EntityID: UInt64] = [:]
        deletedVersions.reserveCapacity(deletedCount)
        for _ in 0..<deletedCount {
            let id = try reader.readEntityID()
            deletedVersions[id] = try reader.readVarint()
        }
        var orders: [String: [Int32]] = [:]
        for _ in 0..<(try reader.readVarint()) {
            let name = try reader.readString()
            var order: [Int32] = []
            order.reserveCapacity(count)
            for _ in 0..<count {
                let ordinal = try reader.readVarint()
                guard ordinal < count else { throw BinaryDecodingError(.invalidValue("index ordinal \(ordinal) of \(count)"), at: reader.offset) }
                order.append(Int32(ordinal))
            }
            orders[name] = order
        }
        let partCount = Int(try reader.readVarint())
        guard partCount <= reader.remaining else { throw BinaryDecodingError(.invalidValue("\(partCount) parts in \(reader.remaining) bytes"), at: reader.offset) }
        var partBytes: [[UInt8]] = []
        partBytes.reserveCapacity(partCount)
        for _ in 0..<partCount { partBytes.append(try reader.readBytes()) }
        guard reader.remaining == 0 else { throw BinaryDecodingError(.invalidValue("\(reader.remaining) bytes after the entities"), at: reader.offset) }
        // A payload codec's parts hold no ids: each part is handed its entities' ids, found by
        // the counts the parts start with (the entity codec's parts need none).
        var partIDs = [ArraySlice<EntityID>](repeating: [], count: partCount)
        if schema.hasPayloadParts(schemaVersion: entitySchemaVersion) {
            let ids = heads.map(\.id)
            var start = 0
            for (number, part) in partBytes.enumerated() {
                let partCount = try schema.payloadPartCount(part, schemaVersion: entitySchemaVersion) ?? 0
                guard partCount <= ids.count - start else {
                    throw BinaryDecodingError(.invalidValue("snapshot parts hold more than \(count) entities"), at: 0)
                }
                partIDs[number] = ids[start..<start + partCount]
                start += partCount
            }
            guard start == ids.count else { throw BinaryDecodingError(.invalidValue("snapshot parts hold \(start) of \(count) entities"), at: 0) }
        }
        // Upcast like events: a snapshot of an older schema version is still used. The parts
        // decode in parallel, each with its entities' index keys (the domain's key paths),
        // encoded into the part's own key columns, and alongside them one more task fills the
        // id map and the insertion order from the heads, which need no entity (done after the
        // decode, it was an eighth of an open).
        let parts = partBytes, restoredHeads = heads, restoredPartIDs = partIDs
        let results = Locked([Result<([Entity], RestoredKeys), any Error>?](repeating: nil, count: partCount))
        let restoredRows = Locked<Result<IndexedRows, BinaryDecodingError>?>(nil)
        var table = State(indexes: indexes)
        let emptyRows = table.rows
        DispatchQueue.concurrentPerform(iterations: partCount + 1) { task in
            guard task > 0 else {
                var rows = emptyRows
                rows.heads.reserveCapacity(count, stringIDs: restoredHeads.contains { if case .string = $0.id { true } else { false } })
                rows.slotsByID.reserveCapacity(count)
                if let repeated = rows.appendRestored(restoredHeads) {
                    restoredRows.withLock { $0 = .failure(BinaryDecodingError(.invalidValue("repeated entity id \(repeated)"), at: 0)) }
                    return
                }
                restoredRows.withLock { $0 = .success(rows) }
                return
            }
            let result = Result {
                let entities = try schema.decodeAll(parts[task - 1], schemaVersion: entitySchemaVersion, ids: restoredPartIDs[task - 1])
                return (entities, Self.restoredKeys(of: entities, indexes, rows: emptyRows))
            }
            results.withLock { $0[task - 1] = result }
        }
        let decoded = try results.withLock { $0 }.map { try $0!.get() }
        table.rows = try restoredRows.withLock { $0 }!.get()
        let decodedCount = decoded.reduce(0) { $0 + $1.0.count }
        guard decodedCount == count else {
            throw BinaryDecodingError(.invalidValue("\(count) ids for \(decodedCount) entities"), at: 0)
        }
        // The parts' entities and key columns are joined on two threads at once (one after the
        // other, copying a million entities and three million keys was an eighth of an open).
        let bySlot = Locked<[Entity?]>([]), joinedKeys = Locked<IndexedRows?>(nil)
        // Out of the table while their keys are joined on the other thread: the table then
        // holds no second reference to the rows, which a write into them would copy.
        let rowsWithoutKeys = table.rows
        table.rows = emptyRows
        DispatchQueue.concurrentPerform(iterations: 2) { task in
            if task == 0 {
                // Each entity copied into place: appending a lazy map to `Optional` asked the
                // runtime for generic metadata per entity (a third of the join, perf).
                let joined = [Entity?](initializingInPlace: count) { slots, initialized in
                    for (entities, _) in decoded {
                        entities.withUnsafeBufferPointer { part in
                            guard let source = part.baseAddress else { return }
                            for i in 0..<part.count { (slots.baseAddress! + initialized + i).initialize(to: source[i]) }
                            initialized += part.count
                        }
                    }
                }
                bySlot.withLock { $0 = joined }
            } else {
                var rows = rowsWithoutKeys
                rows.restoreKeys(parts: decoded.map(\.1))
                joinedKeys.withLock { $0 = rows }
            }
        }
        table.bySlot = bySlot.withLock { $0 }
        table.rows = joinedKeys.withLock { $0 }!
        table.rows.nextSequence = max(nextSequence, (heads.last?.sequence ?? 0) + 1)
        table.rows.deletedVersions = deletedVersions
        try table.rows.restoreIndexes(names: indexes.map(\.name), orders: orders)
        return table
    }

    /// A snapshot part's keys: a column per declared index, and one of the interval indexes' ends.
    typealias RestoredKeys = (columns: [KeyColumn], ends: KeyColumn)

    /// The keys and interval ends of a run of entities (a snapshot part), encoded into columns
    /// of `rows`' directions (``IndexedRows/restoreKeys(parts:)`` joins the parts'), read by
    /// ``keyColumns(of:_:)`` as the live fold reads a batch's. Encoding on
    /// the part's thread keeps the work parallel and holds no `IndexKey` per row and index:
    /// gathering those into one array, then encoding them on one thread, was a third of an open.
    static func restoredKeys(of entities: [Entity], _ indexes: [EntityIndex<Entity>], rows: IndexedRows) -> RestoredKeys {
        let (perIndex, perEnd) = keyColumns(of: entities, indexes)
        var columns = rows.columns.map { KeyColumn(descending: $0.descending) }
        for number in perIndex.indices { columns[number].restore(perIndex[number]) }
        var ends = KeyColumn(descending: rows.ends.descending)
        if !perEnd.isEmpty {
            // Row by row, each interval index's end (the layout of ``IndexedRows/ends``).
            var values: [IndexKey] = []
            values.reserveCapacity(entities.count * perEnd.count)
            for i in entities.indices {
                for end in perEnd { values.append(IndexKey(end[i])) }
            }
            ends.restore(values)
        }
        return (columns, ends)
    }
}
