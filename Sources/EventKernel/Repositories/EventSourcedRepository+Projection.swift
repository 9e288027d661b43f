/// The repository's projection: what `prepare` computes for an event outside every lock (the
/// decoded, upcast entity and its index keys) and the fold that moves it into the
/// ``EntityTable``, which is also its entity type's stream-version source.
extension EventSourcedRepository {
    /// What `prepare` computes for one event outside every lock: the decoded (upcast) entity
    /// and its index keys, or `nil` for a deletion.
    struct Prepared: Sendable {
        var entity: Entity
        var keys: [IndexKey]
    }

    static func keys(of entity: Entity, _ indexes: [EntityIndex<Entity>], ends: [@Sendable (Entity) -> IndexValue]) -> [IndexKey] {
        var keys: [IndexKey] = []
        keys.reserveCapacity(indexes.count + ends.count)
        appendKeys(of: entity, indexes, ends: ends, to: &keys)
        return keys
    }

    /// The readers of the interval indexes' ends (``EntityIndex/intervalEnd``), in declaration
    /// order: taken out once per projection or snapshot, so that a repository without interval
    /// indexes loops over an empty array per entity, not over its indexes again.
    static func intervalEnds(_ indexes: [EntityIndex<Entity>]) -> [@Sendable (Entity) -> IndexValue] {
        indexes.compactMap { $0.intervalEnd?.value }
    }

    /// Appends `entity`'s key in each of `indexes` to `keys`, then each interval index's end
    /// (the layout ``IndexedRows/upsert(id:version:keys:)`` takes).
    static func appendKeys(
        of entity: Entity, _ indexes: [EntityIndex<Entity>], ends: [@Sendable (Entity) -> IndexValue], to keys: inout [IndexKey]
    ) {
        for index in indexes { keys.append(index.key(of: entity)) }
        for end in ends { keys.append(IndexKey(end(entity))) }
    }

    /// The keys and interval ends of a run of entities (a snapshot part), in the layouts of
    /// `IndexedRows.keys` and ``IndexedRows/ends``, each property read for the whole run at
    /// once (see ``IndexComponent``'s readers); a snapshot's parts gather a million entities'
    /// keys into one array, rather than an array per entity.
    static func appendKeys(
        of entities: [Entity], _ indexes: [EntityIndex<Entity>], to keys: inout [IndexKey], ends: inout [IndexValue]
    ) {
        let perIndex = indexes.map { $0.keys(of: entities) }
        let perEnd = indexes.compactMap(\.intervalEnd).map { end in
            var column: [IndexValue] = []
            column.reserveCapacity(entities.count)
            end.values(entities, &column)
            return column
        }
        keys.reserveCapacity(keys.count + entities.count * perIndex.count)
        ends.reserveCapacity(ends.count + entities.count * perEnd.count)
        for i in entities.indices {
            for index in perIndex { keys.append(index[i]) }
            for end in perEnd { ends.append(end[i]) }
        }
    }

    static func makeProjection(
        typeName: String, schema: EntitySchema<Entity>, indexes: [EntityIndex<Entity>]
    ) -> ProjectedState<State> {
        let ends = intervalEnds(indexes)
        let added = typeName + ".added", updated = typeName + ".updated", deleted = typeName + ".deleted"
        return ProjectedState<State>(
            name: "repository:\(typeName)", schemaVersion: snapshotLayoutVersion, initial: State(indexes: indexes),
            encode: { table in try encodeSnapshot(table, schema: schema, indexes: indexes) },
            decode: { bytes in try decodeSnapshot(bytes, schema: schema, indexes: indexes) },
            // Decoding, upcasting and the index keys (the domain's code) run here, outside every
            // lock; the fold below only moves values.
            prepare: { envelope -> Prepared? in
                guard envelope.stream.entityType == typeName else { return nil }
                switch envelope.eventType {
                case added, updated:
                    let entity = try schema.decode(envelope.payload, schemaVersion: envelope.schemaVersion, id: envelope.entityID)
                    return Prepared(entity: entity, keys: keys(of: entity, indexes, ends: ends))
                case deleted:
                    return nil
                default:
                    throw EventDecodingError.unknownEventType(envelope.eventType, entityType: typeName)
                }
            },
            fold: { table, envelope, prepared in
                guard envelope.stream.entityType == typeName else { return }
                if let prepared {
                    table.upsert(prepared.entity, id: envelope.entityID, version: envelope.entityVersion, keys: prepared.keys)
                } else {
                    table.remove(envelope.entityID, version: envelope.entityVersion)
                }
            },
            // The table keeps each entity's version (and a deleted one's): the store reads
            // this type's stream versions from it.
            versioning: .init(entityType: typeName, version: { table, stream in table.version(of: stream.entityID) }))
    }
}
