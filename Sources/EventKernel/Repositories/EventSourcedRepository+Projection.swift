/// The repository's projection: what `prepare` computes for an event outside every lock (the
/// decoded, upcast entity and its index keys, or a field event's value and its index values)
/// and the fold that moves it into the
/// ``EntityTable``, which is also its entity type's stream-version source.
extension EventSourcedRepository {
    /// What `prepareAll` computes for one event of a batch outside every lock: the decoded
    /// (upcast) entity and its row of the batch's index keys, a field event's write, or `nil`
    /// (a deletion, a tombstone, or an event of another entity type).
    enum Prepared: Sendable {
        /// The whole entity (added or updated) and its keys: its row of the array holding every
        /// added and updated entity's keys of the batch (``BatchKeys``), not an array of its own.
        case entity(Entity, keys: RowKeys)
        /// A field event's write, applied to the entity the table holds when folded.
        case field(FieldWrite<Entity>)
    }

    /// A run of entities' keys by column, each property read for the whole run at once (see
    /// ``IndexComponent``'s readers): per declared index its keys, per interval index its end's
    /// values, in declaration order. The one reading of the domain's key paths for a run, for
    /// the live fold (``rowKeys(of:_:)``) and a snapshot's restore (``restoredKeys(of:_:rows:)``),
    /// so that the two cannot file an entity under different keys.
    ///
    /// Why a run: this code is not specialised for the domain's entity, and reading one
    /// entity's keys copied each `EntityIndex` and `IndexComponent` (retains and releases of
    /// their closures) and asked the runtime for their metadata, per entity and index: a
    /// tenth of a batch append of activities (perf); a run asks once per index and property.
    static func keyColumns(of entities: [Entity], _ indexes: [EntityIndex<Entity>]) -> (perIndex: [[IndexKey]], perEnd: [[IndexValue]]) {
        let perIndex = indexes.map { $0.keys(of: entities) }
        let perEnd = indexes.compactMap(\.intervalEnd).map { end in
            var column: [IndexValue] = []
            column.reserveCapacity(entities.count)
            end.values(entities, &column)
            return column
        }
        return (perIndex, perEnd)
    }

    /// A batch's rows of keys, one after the other in one array (no array per row).
    struct BatchKeys: Sendable {
        let all: [IndexKey]
        /// Keys per row: the columns ``keyColumns(of:_:)`` read, so that the rows are cut where
        /// they were laid out (``IndexedRows/upsert(id:version:keys:)`` checks it against the
        /// table's ``IndexedRows/rowWidth`` under InternalChecks).
        let width: Int

        /// The keys of the `j`th entity of the run.
        func row(_ j: Int) -> RowKeys { RowKeys(all, start: j &* width, width: width) }
    }

    /// The keys of a run of entities (a batch's added and updated ones), one row after the
    /// other in the layout ``IndexedRows/upsert(id:version:keys:)`` takes (each declared index's
    /// key, then each interval index's end), from ``keyColumns(of:_:)``.
    static func rowKeys(of entities: [Entity], _ indexes: [EntityIndex<Entity>]) -> BatchKeys {
        let (perIndex, perEnd) = keyColumns(of: entities, indexes)
        let width = perIndex.count + perEnd.count
        guard !entities.isEmpty else { return BatchKeys(all: [], width: width) }
        var keys: [IndexKey] = []
        keys.reserveCapacity(entities.count * width)
        for i in entities.indices {
            for index in perIndex { keys.append(index[i]) }
            for end in perEnd { keys.append(IndexKey(end[i])) }
        }
        return BatchKeys(all: keys, width: width)
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
        let own = OwnEventTypes(typeName)
        let added = own.added, updated = own.updated, deleted = own.deleted
        let fieldEvents = Dictionary(uniqueKeysWithValues: schema.fieldEvents.values.map { (own.field($0.name), ($0, splices(of: $0, indexes))) })
        return ProjectedState<State>(
            name: "repository:\(typeName)", schemaVersion: snapshotLayoutVersion, initial: State(indexes: indexes),
            encode: { table in try encodeSnapshot(table, schema: schema, indexes: indexes) },
            decode: { bytes in try decodeSnapshot(bytes, schema: schema, indexes: indexes) },
            // Decoding, upcasting and the index keys (the domain's code) run here, outside every
            // lock; the fold below only moves values. The keys of a batch's entities are read a
            // property at a time, once every entity is decoded (`rowKeys`).
            prepareAll: { envelopes -> [Result<Prepared?, any Error>] in
                var results: [Result<Prepared?, any Error>] = []
                results.reserveCapacity(envelopes.count)
                // The decoded entities, and where each one's result goes.
                var entities: [Entity] = [], at: [Int] = []
                for envelope in envelopes {
                    let index = results.count
                    results.append(Result { () throws -> Prepared? in
                        guard envelope.stream.entityType == typeName else { return nil }
                        switch envelope.eventType {
                        case added, updated:
                            let entity = try schema.decode(envelope.payload, schemaVersion: envelope.schemaVersion, id: envelope.entityID)
                            entities.append(entity)
                            at.append(index)
                            // Completed below, with its keys.
                            return nil
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
                    })
                }
                let keys = rowKeys(of: entities, indexes)
                // By index: `enumerated()` over the generic entities asked the runtime for the
                // iterator's and the pair's metadata per entity (3.7% of a batch append, perf).
                for j in entities.indices {
                    results[at[j]] = .success(.entity(entities[j], keys: keys.row(j)))
                }
                return results
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
                    table.upsert(entity, id: envelope.entityID, version: envelope.entityVersion, keys: RowKeys(keys))
                case nil:
                    table.remove(envelope.entityID, version: envelope.entityVersion)
                }
            },
            // The table keeps each entity's version (and a deleted one's): the store reads
            // this type's stream versions from it, by the lookup a command reads the entity
            // and its version with (`EntityTable.entityAndVersion`), so both apply one rule.
            versioning: .init(entityType: typeName, version: { table, stream in table.rows.lookup(stream.entityID).version },
                              contains: { table, stream in table.rows.lookup(stream.entityID).slot != nil },
                              forget: { table, streams in table.rows.forgetDeletedVersions(of: streams.map(\.entityID)) }))
    }
}
