import EventLog

/// The store's stream → last version map, kept as a projection so it is snapshotted and
/// restored with the others (optimistic concurrency keeps working after a snapshot startup).
///
/// It is the one place that decides whether an expected version holds: ``reserve(_:)`` checks
/// every event of a batch against committed and in-flight versions and reserves the next ones,
/// all or nothing.
///
/// Memory: one entry per stream ever written (see ``StreamVersionMap``), plus one per stream
/// with an append in flight.
final class VersionTable: Projection {
    let name = "$entity-versions"
    /// 2: keyed by stream (entity type + id). Version 1 snapshots (keyed by id) are ignored and
    /// the table is rebuilt from the log.
    let schemaVersion: UInt16 = 2

    private struct State {
        var committed = StreamVersionMap()
        /// Versions handed out to appends not yet acknowledged, with how many are in flight.
        var reserved: [StreamID: (version: UInt64, inFlight: Int)] = [:]
        /// Commands waiting for a stream's in-flight appends to settle before they retry.
        var waiters: [StreamID: [CheckedContinuation<Void, Never>]] = [:]
        var nextPosition: LogPosition = 0
    }

    private let state = Locked(State())

    var nextPosition: LogPosition { state.withLock { $0.nextPosition } }

    /// The last committed version of a stream (0: none).
    func committedVersion(of stream: StreamID) -> UInt64 { state.withLock { $0.committed[stream] ?? 0 } }

    /// Checks every expected version (against committed and in-flight versions) and reserves
    /// the next ones; all or nothing.
    /// - Returns: The version each event gets, and the distinct streams reserved (for ``release(_:)``).
    /// - Throws: ``RepositoryError/conflict(stream:expected:actual:)`` and reserves nothing.
    func reserve(_ events: [PendingEvent]) throws(RepositoryError) -> (versions: [UInt64], streams: [StreamID]) {
        /// The version `pending` gets after `current`: the one rule for every event of a batch.
        func next(_ pending: PendingEvent, after current: UInt64) throws(RepositoryError) -> UInt64 {
            let stream = pending.event.stream
            if let expected = pending.expectedVersion, expected != current {
                throw RepositoryError.conflict(stream: stream, expected: expected, actual: current)
            }
            guard current < StreamVersionMap.maxVersion else {
                throw RepositoryError.validationFailed("stream \(stream) is at the largest version \(current)")
            }
            return current + 1
        }
        return try state.withLock { (state) throws(RepositoryError) -> ([UInt64], [StreamID]) in
            if events.count == 1 {
                // The common single-event command: no per-batch map.
                let pending = events[0], stream = pending.event.stream
                let version = try next(pending, after: state.reserved[stream]?.version ?? state.committed[stream] ?? 0)
                state.reserved[stream] = (version, (state.reserved[stream]?.inFlight ?? 0) + 1)
                return ([version], [stream])
            }
            var batch: [StreamID: UInt64] = [:]
            batch.reserveCapacity(events.count)
            var versions: [UInt64] = []
            versions.reserveCapacity(events.count)
            // With nothing in flight (a single writer's batches) no reservation can apply.
            let noneInFlight = state.reserved.isEmpty
            for pending in events {
                let stream = pending.event.stream
                let current = batch[stream] ?? (noneInFlight ? nil : state.reserved[stream]?.version) ?? state.committed[stream] ?? 0
                let version = try next(pending, after: current)
                batch[stream] = version
                versions.append(version)
            }
            var streams: [StreamID] = []
            streams.reserveCapacity(batch.count)
            state.reserved.reserveCapacity(state.reserved.count + batch.count)
            for (stream, version) in batch {
                if noneInFlight {
                    state.reserved[stream] = (version, 1)
                } else {
                    state.reserved[stream] = (version, (state.reserved[stream]?.inFlight ?? 0) + 1)
                }
                streams.append(stream)
            }
            return (versions, streams)
        }
    }

    /// Releases a batch's reservations (after it committed or failed). A failed batch fails
    /// every later one (the log's contract), so their reservations are released in turn.
    /// Commands waiting on a stream whose last reservation this was are resumed.
    func release(_ streams: [StreamID]) {
        let resumed = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            var resumed: [CheckedContinuation<Void, Never>] = []
            // Every reservation is this batch's (its streams are distinct), once each: clear
            // them all without a lookup per stream.
            if state.reserved.count == streams.count, state.reserved.values.allSatisfy({ $0.inFlight == 1 }) {
                state.reserved.removeAll(keepingCapacity: true)
                if !state.waiters.isEmpty {
                    for stream in streams { if let waiting = state.waiters.removeValue(forKey: stream) { resumed += waiting } }
                }
                return resumed
            }
            for stream in streams {
                guard let index = state.reserved.index(forKey: stream) else { continue }
                if state.reserved.values[index].inFlight <= 1 {
                    state.reserved.remove(at: index)
                    if !state.waiters.isEmpty, let waiting = state.waiters.removeValue(forKey: stream) { resumed += waiting }
                } else {
                    state.reserved.values[index].inFlight -= 1
                }
            }
            return resumed
        }
        for waiter in resumed { waiter.resume() }
    }

    /// Returns once no append of `stream` is in flight (at once if none is): a command whose
    /// check lost to an in-flight append waits for it to commit before reading again, instead
    /// of spending its retries while the winner is still being synced.
    func waitUntilSettled(_ stream: StreamID) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let wait = state.withLock { state -> Bool in
                guard state.reserved[stream] != nil else { return false }
                state.waiters[stream, default: []].append(continuation)
                return true
            }
            if !wait { continuation.resume() }
        }
    }

    func apply(_ envelopes: [EventEnvelope]) {
        state.withLock { state in
            for envelope in envelopes where envelope.position >= state.nextPosition {
                state.committed[envelope.stream] = envelope.entityVersion
                state.nextPosition = envelope.position + 1
            }
        }
    }

    /// Layout: entity type count and names, then the entry count and per entry the type's
    /// index, the entity id and the version.
    func snapshotState() throws -> ProjectionSnapshot {
        let (committed, next) = state.withLock { ($0.committed, $0.nextPosition) }
        var writer = BinaryWriter(capacity: committed.count * 24)
        writer.writeVarint(UInt64(committed.typeNames.count))
        for type in committed.typeNames { writer.writeString(type) }
        writer.writeVarint(UInt64(committed.count))
        committed.forEach { code, id, version in
            writer.writeVarint(UInt64(code))
            writer.writeEntityID(id)
            writer.writeVarint(version)
        }
        return ProjectionSnapshot(bytes: writer.bytes, nextPosition: next)
    }

    func restore(from snapshot: ProjectionSnapshot) throws {
        var reader = BinaryReader(snapshot.bytes)
        let typeCount = try reader.readVarint()
        guard typeCount <= UInt64(StreamVersionMap.maxEntityTypes) else {
            throw BinaryDecodingError(.invalidValue("\(typeCount) entity types"), at: 0)
        }
        var types: [String] = []
        for _ in 0..<typeCount { types.append(try reader.readString()) }
        let count = try reader.readVarint()
        // Sized from the count first (bounded by what the bytes can hold: an entry takes at
        // least 4 bytes), so the table never grows while it is filled.
        var committed = StreamVersionMap()
        committed.reserveCapacity(Int(min(count, UInt64(reader.remaining / 4))))
        for _ in 0..<count {
            let codeOffset = reader.offset
            let code = try reader.readVarint()
            guard code < UInt64(types.count) else {
                throw BinaryDecodingError(.invalidValue("entity type \(code) of \(types.count)"), at: codeOffset)
            }
            let id = try reader.readEntityID()
            committed[StreamID(types[Int(code)], id)] = try reader.readVarint()
        }
        try reader.expectEnd()
        state.withLock {
            $0.committed = committed
            $0.nextPosition = snapshot.nextPosition
        }
    }
}
