/// Rebuilding the repository's projection under a new declaration without downtime, through
/// the store's one rebuild path (``EventStore/rebuild(_:from:progress:)``).
extension EventSourcedRepository {
    /// Rebuilds the entity table from the log under a new declaration (new indexes, new
    /// upcasters, a new codec) while the current one keeps answering, then switches to it in
    /// one step (blue/green).
    ///
    /// Queries, observations and writes go on throughout: a query reads either the complete old
    /// table or the complete new one (never a part), observers are told after the switch, and
    /// every write committed meanwhile is in the new table. From the switch on, writes encode
    /// with the new schema and queries may use the new indexes. A snapshot of the new table is
    /// written when the store writes snapshots, so the next open with the new declaration
    /// restores it rather than replaying. The process holds both tables while it runs.
    ///
    /// The new schema must read every version the old one writes (its version or an upcaster
    /// from it): a write encoded just before the switch is folded by the new one.
    /// - Parameters:
    ///   - schema: The new schema; `nil` keeps the current one.
    ///   - indexes: The new indexes; `nil` keeps the current ones.
    ///   - progress: Called after each batch and after the switch, outside every lock.
    /// - Throws: ``RepositoryError/undecodableEvent(_:)`` with the position and cause when the
    ///   new declaration cannot fold a stored event; `CancellationError` when the task is
    ///   cancelled; as ``EventStore/rebuild(_:from:progress:)``. The current declaration and
    ///   table stay in force on every error.
    public func rebuild(
        schema: EntitySchema<Entity>? = nil, indexes: [EntityIndex<Entity>]? = nil,
        progress: (@Sendable (RebuildProgress) -> Void)? = nil
    ) async throws {
        let schema = schema ?? self.schema
        let indexes = indexes ?? self.indexes
        try Self.checkFieldEvents(schema, indexes, typeName: typeName)
        // A command that read the old schema may commit a field event after the switch: the new
        // schema must fold every event the old one could append.
        for field in self.schema.fieldEvents.values {
            guard let kept = schema.fieldEvents[field.name], (kept.keyPath as AnyKeyPath) == (field.keyPath as AnyKeyPath) else {
                throw RepositoryError.misuse(Misuse(.invalidRebuild,
                    "the rebuild's schema of \(typeName) does not record the field event \"\(field.name)\" (setting \(field.keyPath)) as the current one does"))
            }
        }
        let fresh = Self.makeProjection(typeName: typeName, schema: schema, indexes: indexes)
        try await store.rebuild(projection, from: fresh, progress: progress, whileSwitching: {
            currentSchema.withLock { $0 = SchemaBox(schema, eventTypes) }
        })
    }
}
