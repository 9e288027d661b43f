/// The repository's projection: what `prepare` computes for an event outside every lock (the
/// decoded, upcast entity and its index keys, or a field event's value and its index values)
/// and the fold that moves it into the
/// ``EntityTable``, which is also its entity type's stream-version source.
extension EventSourcedRepository {
    /// What `prepare` computes for one event outside every lock: the decoded (upcast) entity
    /// and its index keys, or `nil` for a deletion.
    enum Prepared: Sendable {
        /// The whole entity (added or updated) and its keys.
        case entity(Entity, keys: [IndexKey])
        /// A field event's write, applied to the entity the table holds when folded.
        case field(FieldWrite<Entity>)
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

    /// Where a field event's value goes in a row's keys (``IndexedRows/upsert(id:version:keys:)``'s
    /// layout): every component of a declared index, or interval end, on the event's property.
    struct SplicePlan: Sendable {
        var key: Int
        var component: Int
        var indexValue: @Sendable (any Sendable) -> IndexValue?
    }

    static func splices(of field: RegisteredFieldEvent<Entity>, _ indexes: [EntityIndex<Entity>]) -> [SplicePlan] {
        var plans: [SplicePlan] = []
        for (number, index) in indexes.enumerated() {
            for (c, component) in index.components.enumerated() where (component.keyPath as AnyKeyPath) == (field.keyPath as AnyKeyPath) {
                plans.append(SplicePlan(key: number, component: c, indexValue: component.indexValueOf))
            }
        }
        for (j, end) in indexes.compactMap(\.intervalEnd).enumerated() where (end.keyPath as AnyKeyPath) == (field.keyPath as AnyKeyPath) {
            plans.append(SplicePlan(key: indexes.count + j, component: 0, indexValue: end.indexValueOf))
        }
        return plans
    }

    /// Refuses indexes that a field event of `schema` would leave stale: with field events, every
    /// indexed property must be stored (a computed one's key would have to be computed again,
    /// under the lock, by the domain's code), and none may be stored in part of a field's bytes
    /// without being that field.
    /// - Throws: ``RepositoryError/misuse(_:)`` with ``Misuse/Code/fieldEventIndexConflict``.
    static func checkFieldEvents(_ schema: EntitySchema<Entity>, _ indexes: [EntityIndex<Entity>], typeName: String) throws {
        guard !schema.fieldEvents.isEmpty else { return }
        for index in indexes {
            for component in index.components + (index.intervalEnd.map { [$0] } ?? []) {
                guard let storage = component.storage else {
                    throw RepositoryError.misuse(Misuse(.fieldEventIndexConflict,
                        "\(typeName) records field events (\(schema.fieldEventNames.joined(separator: ", "))) and indexes \(component.keyPath), which is not a stored property: its key could not follow a field event"))
                }
                for field in schema.fieldEvents.values where field.storage.overlaps(storage)
                    && (field.keyPath as AnyKeyPath) != (component.keyPath as AnyKeyPath) {
                    throw RepositoryError.misuse(Misuse(.fieldEventIndexConflict,
                        "\(typeName)'s field event \"\(field.name)\" sets \(field.keyPath), which holds the indexed \(component.keyPath): index the property the event sets, or update the entity instead"))
                }
            }
        }
    }

    static func makeProjection(
        typeName: String, schema: EntitySchema<Entity>, indexes: [EntityIndex<Entity>]
    ) -> ProjectedState<State> {
        let ends = intervalEnds(indexes)
        let added = typeName + ".added", updated = typeName + ".updated", deleted = typeName + ".deleted"
        let fieldEvents = Dictionary(uniqueKeysWithValues: schema.fieldEvents.values.map { (typeName + "." + $0.name, ($0, splices(of: $0, indexes))) })
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
                    return .entity(entity, keys: keys(of: entity, indexes, ends: ends))
                // The kernel's tombstones end the entity as its own delete event does.
                case deleted, Tombstone.deleted.eventType, Tombstone.purged.eventType:
                    return nil
                default:
                    guard let (field, splices) = fieldEvents[envelope.eventType] else {
                        throw EventDecodingError.unknownEventType(envelope.eventType, entityType: typeName)
                    }
                    let (value, apply) = try field.decode(envelope.payload, envelope.schemaVersion)
                    // The index values of the new value, here, outside every lock.
                    return .field(FieldWrite(apply: apply, splices: try splices.map { splice in
                        guard let indexValue = splice.indexValue(value) else {
                            throw EventDecodingError.unknownEventType(envelope.eventType, entityType: typeName)
                        }
                        return FieldWrite.Splice(key: splice.key, component: splice.component, value: indexValue)
                    }))
                }
            },
            fold: { table, envelope, prepared in
                guard envelope.stream.entityType == typeName else { return }
                switch prepared {
                case .entity(let entity, let keys)?:
                    table.upsert(entity, id: envelope.entityID, version: envelope.entityVersion, keys: keys)
                case .field(let write)?:
                    // The entity as the log stood before this event is only known here: the
                    // write is a key path's store, and the row's keys get the values prepared
                    // outside the lock (no code of the domain's runs here).
                    guard var entity = table[envelope.entityID], var keys = table.rows.keys(of: envelope.entityID) else {
                        throw EventDecodingError.noEntityForFieldEvent(eventType: envelope.eventType, stream: envelope.stream)
                    }
                    write.apply(&entity)
                    for splice in write.splices { keys[splice.key].set(splice.component, splice.value) }
                    table.upsert(entity, id: envelope.entityID, version: envelope.entityVersion, keys: keys)
                case nil:
                    table.remove(envelope.entityID, version: envelope.entityVersion)
                }
            },
            // The table keeps each entity's version (and a deleted one's): the store reads
            // this type's stream versions from it.
            versioning: .init(entityType: typeName, version: { table, stream in table.version(of: stream.entityID) },
                              contains: { table, stream in table[stream.entityID] != nil }))
    }
}
