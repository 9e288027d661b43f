import EventLog

/// The store's entity -> last version map, kept as a projection so it is snapshotted and
/// restored with the others (optimistic concurrency keeps working after a snapshot startup).
///
/// Memory: one dictionary entry per entity ever written (id + 8 bytes), plus one entry per
/// entity with an append in flight.
final class VersionTable: Projection {
    let name = "$entity-versions"
    let schemaVersion: UInt16 = 1

    private struct State {
        var committed = EntityVersionMap()
        /// Versions handed out to appends not yet acknowledged, with how many are in flight.
        var reserved: [EntityID: (version: UInt64, inFlight: Int)] = [:]
        var nextPosition: LogPosition = 0
    }

    private let state = Locked(State())

    var nextPosition: LogPosition { state.withLock { $0.nextPosition } }

    /// The last committed version of an entity (0: none).
    func committedVersion(of id: EntityID) -> UInt64 { state.withLock { $0.committed[id] ?? 0 } }

    /// Checks every expected version (against committed and in-flight versions) and reserves
    /// the next ones; all or nothing.
    /// - Returns: The version each event gets.
    /// - Throws: ``RepositoryError/conflict(entity:expected:actual:)`` and reserves nothing.
    func reserve(_ events: [PendingEvent]) throws(RepositoryError) -> [UInt64] {
        try state.withLock { (state) throws(RepositoryError) -> [UInt64] in
            var batch: [EntityID: UInt64] = [:]
            var versions: [UInt64] = []
            versions.reserveCapacity(events.count)
            for pending in events {
                let id = pending.event.entityID
                let current = batch[id] ?? state.reserved[id]?.version ?? state.committed[id] ?? 0
                if let expected = pending.expectedVersion, expected != current {
                    throw RepositoryError.conflict(entity: id, expected: expected, actual: current)
                }
                batch[id] = current + 1
                versions.append(current + 1)
            }
            for (id, version) in batch {
                state.reserved[id] = (version, (state.reserved[id]?.inFlight ?? 0) + 1)
            }
            return versions
        }
    }

    /// Releases a batch's reservations (after it committed or failed). A failed batch fails
    /// every later one (the log's contract), so their reservations are released in turn.
    func release(_ ids: Set<EntityID>) {
        state.withLock { state in
            for id in ids {
                guard let entry = state.reserved[id] else { continue }
                if entry.inFlight <= 1 { state.reserved[id] = nil } else { state.reserved[id] = (entry.version, entry.inFlight - 1) }
            }
        }
    }

    func apply(_ envelopes: [EventEnvelope]) {
        state.withLock { state in
            for envelope in envelopes where envelope.position >= state.nextPosition {
                state.committed[envelope.entityID] = envelope.entityVersion
                state.nextPosition = envelope.position + 1
            }
        }
    }

    func snapshotState() throws -> ProjectionSnapshot {
        let (committed, next) = state.withLock { ($0.committed, $0.nextPosition) }
        var writer = BinaryWriter(capacity: committed.count * 24)
        writer.writeVarint(UInt64(committed.count))
        committed.forEach { id, version in
            writer.writeEntityID(id)
            writer.writeVarint(version)
        }
        return ProjectionSnapshot(bytes: writer.bytes, nextPosition: next)
    }

    func restore(from snapshot: ProjectionSnapshot) throws {
        var reader = BinaryReader(snapshot.bytes)
        let count = try reader.readVarint()
        var committed = EntityVersionMap()
        committed.reserveCapacity(Int(min(count, 1 << 20)))
        for _ in 0..<count { committed[try reader.readEntityID()] = try reader.readVarint() }
        try reader.expectEnd()
        state.withLock {
            $0.committed = committed
            $0.nextPosition = snapshot.nextPosition
        }
    }
}
