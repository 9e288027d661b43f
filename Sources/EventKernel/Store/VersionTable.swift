import EventLog
import Synchronization
import KernelPrimitives

/// The store's stream versions: the one place that decides whether an expected version holds.
///
/// Committed versions come from two places. A stream whose entity type has a
/// ``StreamVersionSource`` (a repository's projection, which keeps each entity's version with
/// its state) is read from that source; every other stream is kept here, in a
/// ``StreamVersionMap``, folded from the log like a projection and snapshotted with the others.
/// In-flight versions (appends reserved, not yet committed) are kept here for every stream.
///
/// ``reserve(_:basis:planned:)`` checks a batch's expected versions against committed and
/// in-flight versions and reserves the next ones, all or nothing. A command whose reads are
/// still current (no commit since its first read, nothing in flight: the single writer's batch)
/// takes a fast path that looks nothing up: its versions were decided from reads that still
/// hold.
///
/// It is also the one place that keeps purged streams (``Tombstone/purged``): ``reserve(_:basis:planned:)``
/// refuses any append to a stream purged or being purged (``RepositoryError/streamPurged(_:)``),
/// so no repository, import or CLI can revive one, and the set is folded from the log and
/// snapshotted with the versions (schema 4: older snapshots, which cannot hold it, are ignored).
/// Once compaction has removed a purged stream, the table keeps only its digest
/// (``ForgottenStream``): folded from the receipt compaction leaves in the log, snapshotted in
/// place of the id (schema 5), and checked by the same append path.
///
/// Memory: one entry per stream without a source, plus one per stream with an append in flight,
/// plus one per purged or forgotten stream.
final class VersionTable: Projection {
    let name = "$entity-versions"
    /// 5: the forgotten section (the digests of purged streams compaction removed). 4: the
    /// purged section (the purged streams with their `$purged` positions). 3: streams kept by a
    /// source are left out and their entity types listed. Older snapshots are ignored (the
    /// table is rebuilt from the log): a version 3 snapshot may come from a build that knows no
    /// purge and dropped the section, so it cannot say that nothing is purged; a version 4 one
    /// cannot say that nothing is forgotten.
    let schemaVersion: UInt16 = 5

    /// What a lookup found: the version, the source that has it, or nothing yet (the stream's
    /// entity type awaits its source; see ``awaitingEntityTypes``).
    enum Lookup {
        case known(UInt64)
        case source(any StreamVersionSource)
        case unknown
    }

    /// A reserved batch, handed back to ``release(_:)`` once it committed or failed.
    struct Reservation: Sendable {
        fileprivate let id: UInt64
    }

    /// How the table treats an entity type.
    private enum Kind {
        /// Kept here.
        case own
        /// Kept by a source.
        case sourced(any StreamVersionSource)
        /// A source kept it when the restored snapshot was written and has not registered since:
        /// what is here (the events since) is exact, a stream that is not here is unknown.
        case awaiting
    }

    private struct Batch {
        var events: [PendingEvent]
        var versions: [UInt64]
        /// Its distinct streams, once they are in `reserved`: `nil` for a batch reserved on the
        /// fast path, entered there only when another reservation or a waiter needs it.
        var indexed: [StreamID]?
        /// The streams the batch purges: in ``State/purging`` until it is released.
        var purges: [StreamID] = []
    }

    private struct State {
        var committed = StreamVersionMap()
        var sources: [ExactString: any StreamVersionSource] = [:]
        var awaiting: Set<ExactString> = []
        /// Versions handed out to appends not yet acknowledged, with how many are in flight.
        var reserved: [StreamID: (version: UInt64, inFlight: Int)] = [:]
        var batches: [UInt64: Batch] = [:]
        var nextBatch: UInt64 = 0
        /// Commands waiting for a stream's in-flight appends to settle before they retry.
        var waiters: [StreamID: [CheckedContinuation<Void, Never>]] = [:]
        var nextPosition: LogPosition = 0
        /// The last entity type classified: a batch or a replay mostly repeats one type.
        var lastType: (name: String, kind: Kind)?
        /// Purged streams, each with the position of its `$purged` event (the first one).
        var purged: [StreamID: LogPosition] = [:]
        /// Streams whose `$purged` event is reserved but not yet committed, with how many.
        var purging: [StreamID: Int] = [:]
        /// Purged streams compaction removed, by digest: their ids are known no more.
        var forgotten: Set<ForgottenStream> = []
    }

    private let state = Locked(State())
    /// Advanced by every fold of committed events, after their versions are published and
    /// before their reservations are released: a command whose first read saw the same count
    /// read versions that still hold when nothing is in flight.
    private let commits = Atomic<UInt64>(0)
    /// Set once the table holds a forgotten stream's digest: appends then compute their
    /// streams' digests (SHA-256) before taking the lock. A hint only: ``checkPurges`` computes
    /// under the lock any digest it needs and was not given, so a stream forgotten between the
    /// peek and the lock is refused all the same.
    private let holdsForgotten = Atomic<Bool>(false)

    var nextPosition: LogPosition { state.withLock { $0.nextPosition } }

    /// The commit count to record before a command's first read (see ``reserve(_:basis:planned:)``).
    var commitBasis: UInt64 { commits.load(ordering: .acquiring) }

    // MARK: Sources

    /// Makes `source` the keeper of its entity type's versions from now on: the entries kept
    /// here for that type are dropped. Call once the source is caught up with the log (with
    /// the store's commit lock held, so that no commit interleaves), or before any event is
    /// folded (at open).
    /// - Throws: ``RepositoryError/misuse(_:)`` (``Misuse/Code/streamVersionsKeptTwice``) when another source keeps that type.
    func adopt(_ source: any StreamVersionSource) throws {
        guard let entityType = source.versionedEntityType else { return }
        try state.withLock { (state) throws(RepositoryError) in
            let type = ExactString(entityType)
            if let other = state.sources[type], other !== source {
                throw RepositoryError.misuse(Misuse(.streamVersionsKeptTwice, "the versions of \"\(type.value)\" streams are kept by projection \"\(other.name)\" already; \"\(source.name)\" cannot keep them too"))
            }
            state.sources[type] = source
            state.awaiting.remove(type)
            state.committed.removeEntries(ofEntityType: type.value)
            state.lastType = nil
        }
    }

    /// Entity types whose versions a source kept when the restored snapshot was written and
    /// whose source has not registered since.
    var awaitingEntityTypes: Set<ExactString> { state.withLock { $0.awaiting } }

    /// Records what a scan of the log found for awaiting entity types (each stream's last
    /// version), which are then kept here like any other. Versions only rise: a commit folded
    /// meanwhile is never undone by the scan's older view.
    func resolve(_ types: Set<ExactString>, found: [StreamID: UInt64]) {
        state.withLock { state in
            let resolved = types.intersection(state.awaiting)
            for (stream, version) in found where resolved.contains(ExactString(stream.entityType)) {
                if version > (state.committed[stream] ?? 0) { state.committed[stream] = version }
            }
            state.awaiting.subtract(resolved)
            state.lastType = nil
        }
    }

    private static func kind(of entityType: String, in state: inout State) -> Kind {
        if let last = state.lastType, last.name.hasSameUTF8(as: entityType) { return last.kind }
        let key = ExactString(entityType)
        let kind: Kind = if let source = state.sources[key] { .sourced(source) } else if state.awaiting.contains(key) { .awaiting } else { .own }
        state.lastType = (entityType, kind)
        return kind
    }

    /// The committed version of `stream` as far as this table knows it.
    func lookup(_ stream: StreamID) -> Lookup {
        state.withLock { state -> Lookup in
            switch Self.kind(of: stream.entityType, in: &state) {
            case .own: return .known(state.committed[stream] ?? 0)
            case .sourced(let source): return .source(source)
            case .awaiting:
                guard let version = state.committed[stream] else { return .unknown }
                return .known(version)
            }
        }
    }

    // MARK: Reserving

    /// Checks every expected version (against committed and in-flight versions) and reserves
    /// the next ones; all or nothing.
    /// - Parameters:
    ///   - events: The batch, in order.
    ///   - basis: The ``commitBasis`` read before the command's first read of a version, if the
    ///     batch comes from a command.
    ///   - planned: Each event's version as the command derived it from its reads, if it could
    ///     for every event.
    /// - Returns: The version each event gets and the reservation to release; `nil` when a
    ///   stream's version is unknown (an awaiting entity type): resolve it and call again.
    /// - Throws: ``RepositoryError/conflict(stream:expected:actual:)`` and reserves nothing.
    ///   ``RepositoryError/streamPurged(_:)`` for an event of a stream that is purged, being
    ///   purged by a batch in flight, or purged earlier in this batch; but a conflict for a
    ///   tombstone (`$deleted`, `$purged`) with an expected version, of a stream purged or
    ///   being purged by another batch,
    ///   so that a command which decided before the purge was visible decides again.
    func reserve(_ events: [PendingEvent], basis: UInt64?, planned: [UInt64]?) throws(RepositoryError) -> (versions: [UInt64], reservation: Reservation)? {
        let digests = holdsForgotten.load(ordering: .relaxed) ? Self.digests(of: events) : nil
        return try state.withLock { (state) throws(RepositoryError) -> ([UInt64], Reservation)? in
            // Fast path: nothing committed since the command's first read and nothing in
            // flight, so every version it read still holds and the versions it planned are
            // the ones the checks below would give.
            if let basis, let planned, basis == commits.load(ordering: .relaxed), state.batches.isEmpty {
                // Purges are checked on this path too: a command's reads say nothing about them
                // (a repository sees a purged entity as absent, and would add it).
                let purges = try Self.checkPurges(events, versions: planned, digests: digests, state)
                let id = state.nextBatch
                state.nextBatch += 1
                state.batches[id] = Batch(events: events, versions: planned, indexed: nil, purges: purges)
                for stream in purges { state.purging[stream, default: 0] += 1 }
                return (planned, Reservation(id: id))
            }
            Self.indexUnindexedBatches(&state)
            guard let versions = try Self.check(events, &state) else { return nil }
            // After the version checks: a command that decided before a purge committed (or
            // while it is in flight) conflicts, and decides again on the purged state (where a
            // second purge finds the stream purged already) instead of failing here.
            let purges = try Self.checkPurges(events, versions: versions, digests: digests, state)
            var streams: [StreamID] = []
            if events.count == 1 {
                let stream = events[0].event.stream
                state.reserved[stream] = (versions[0], (state.reserved[stream]?.inFlight ?? 0) + 1)
                streams = [stream]
            } else {
                var last: [StreamID: UInt64] = [:]
                last.reserveCapacity(events.count)
                for (index, pending) in events.enumerated() { last[pending.event.stream] = versions[index] }
                streams.reserveCapacity(last.count)
                state.reserved.reserveCapacity(state.reserved.count + last.count)
                for (stream, version) in last {
                    state.reserved[stream] = (version, (state.reserved[stream]?.inFlight ?? 0) + 1)
                    streams.append(stream)
                }
            }
            let id = state.nextBatch
            state.nextBatch += 1
            state.batches[id] = Batch(events: events, versions: versions, indexed: streams, purges: purges)
            for stream in purges { state.purging[stream, default: 0] += 1 }
            return (versions, Reservation(id: id))
        }
    }

    /// Refuses a batch with an event of a purged stream (committed, in flight, or purged by an
    /// earlier event of the batch itself), or with an event of a `$` type that is not a valid
    /// tombstone (``Tombstone/validate(eventType:schemaVersion:payloadCount:stream:versionBefore:)``).
    /// - Parameters:
    ///   - versions: The version each event gets (a tombstone's must follow an event).
    ///   - digests: Each event's stream's digest, computed before the lock (``digests(of:)``),
    ///     or `nil`: then computed here, when the table holds a forgotten stream.
    /// - Returns: The streams the batch purges.
    /// - Complexity: O(events), with one hash lookup per event when a stream is purged.
    private static func checkPurges(_ events: [PendingEvent], versions: [UInt64], digests: [ForgottenStream]?, _ state: State) throws(RepositoryError) -> [StreamID] {
        // The common store has no purge at all: one check per event, of its type's first byte.
        var purges: [StreamID] = []
        // A set, not the array: a batch purging n streams checks each event against it.
        var purgedInBatch: Set<StreamID> = []
        let anyPurged = !state.purged.isEmpty || !state.purging.isEmpty || !state.forgotten.isEmpty
        // A digest per event only once compaction forgot a stream: given by the caller, or
        // computed here, once, when compaction forgot one after the caller's peek.
        var digests = digests
        func isForgotten(_ index: Int) -> Bool {
            guard !state.forgotten.isEmpty else { return false }
            let all = digests ?? Self.digests(of: events)
            digests = all
            return state.forgotten.contains(all[index])
        }
        for (index, pending) in events.enumerated() {
            let stream = pending.event.stream
            if anyPurged, state.purged[stream] != nil || state.purging[stream] != nil || isForgotten(index) {
                // A tombstone decided before the purge was visible to its command: a commit
                // folds the version sources before this table, so a command can read the
                // version after a `$purged` while ``isPurged(_:)`` is still false. A conflict
                // makes ``EventStore/execute(maxAttempts:_:)`` wait and decide again, on the
                // purged state (`.alreadyPurged`), instead of failing a whole batch of purges.
                // Only a conditional tombstone (what a command appends): an unconditional one
                // (a raw append, an import) decided nothing, and is refused as before.
                if let expected = pending.expectedVersion, Self.eventTypeIsReserved(pending.event.eventType) {
                    throw RepositoryError.conflict(stream: stream, expected: expected, actual: versions[index] - 1)
                }
                throw RepositoryError.streamPurged(stream)
            }
            if !purges.isEmpty, purgedInBatch.contains(stream) { throw RepositoryError.streamPurged(stream) }
            let eventType = pending.event.eventType
            guard Self.eventTypeIsReserved(eventType) else { continue }
            try Tombstone.validate(eventType: eventType, schemaVersion: pending.event.schemaVersion,
                                   payloadCount: pending.event.payload.count, stream: stream, versionBefore: versions[index] - 1)
            if Tombstone(eventType: eventType) == .purged {
                purges.append(stream)
                purgedInBatch.insert(stream)
            }
        }
        return purges
    }

    /// Each event's stream's digest, one SHA-256 per run of events of the same stream: what
    /// ``checkPurges(_:versions:digests:_:)`` looks up, computed before the lock.
    /// - Complexity: O(events), one digest per run.
    private static func digests(of events: [PendingEvent]) -> [ForgottenStream] {
        var digests: [ForgottenStream] = []
        digests.reserveCapacity(events.count)
        for (index, pending) in events.enumerated() {
            if index > 0, events[index - 1].event.stream == pending.event.stream {
                digests.append(digests[index - 1])
            } else {
                digests.append(ForgottenStream(pending.event.stream))
            }
        }
        return digests
    }

    /// Whether `eventType` is one of the store's own (`$`) types: the first-byte test
    /// ``checkPurges(_:versions:digests:_:)`` uses.
    private static func eventTypeIsReserved(_ eventType: String) -> Bool {
        eventType.utf8.first == UInt8(ascii: "$")
    }

    /// Whether `stream` is purged: its `$purged` event is committed (a purge in flight, whose
    /// write could still fail, is not counted here; the append path counts it).
    /// A stream compaction removed counts, by its digest.
    func isPurged(_ stream: StreamID) -> Bool {
        if state.withLock({ $0.purged[stream] != nil }) { return true }
        guard state.withLock({ !$0.forgotten.isEmpty }) else { return false }
        let digest = ForgottenStream(stream)
        return state.withLock { $0.forgotten.contains(digest) }
    }

    /// The purged streams, each with the position of its `$purged` event: what compaction
    /// removes (every event of these streams, the tombstone's position included). Streams
    /// compaction removed are not here (``forgottenCount``).
    var purgedStreams: [StreamID: LogPosition] { state.withLock { $0.purged } }

    /// How many purged streams compaction removed (known by digest only).
    var forgottenCount: Int { state.withLock { $0.forgotten.count } }

    /// Keeps only the digest of each stream of `digests` (purged, their events being removed by
    /// compaction): the digests join the forgotten set before the ids leave the purged set and
    /// the version map, under one hold of the lock, so the append path refuses them throughout.
    /// - Parameter digests: Each stream with its digest (computed by the caller, off the lock).
    /// - Complexity: O(n) for the version map's n entries (rebuilt once), plus O(1) a stream.
    func forget(_ digests: [StreamID: ForgottenStream]) {
        guard !digests.isEmpty else { return }
        let ids = Set(digests.keys)
        state.withLock { state in
            state.forgotten.formUnion(digests.values)
            holdsForgotten.store(true, ordering: .relaxed)
            for stream in digests.keys { state.purged[stream] = nil }
            state.committed.removeEntries(ids)
        }
    }

    /// The version of each event of a batch after committed and in-flight versions; `nil` when
    /// one is unknown.
    private static func check(_ events: [PendingEvent], _ state: inout State) throws(RepositoryError) -> [UInt64]? {
        /// The version `pending` gets after `current`: the one rule for every event of a batch.
        func next(_ pending: PendingEvent, after current: UInt64) throws(RepositoryError) -> UInt64 {
            let stream = pending.event.stream
            if let expected = pending.expectedVersion, expected != current {
                throw RepositoryError.conflict(stream: stream, expected: expected, actual: current)
            }
            guard current < StreamVersionMap.maxVersion else {
                throw RepositoryError.limitExceeded(LimitExceeded(.streamVersion, "stream \(stream) is at the largest version \(current)"))
            }
            return current + 1
        }
        func current(_ stream: StreamID, _ state: inout State) -> UInt64? {
            if let reserved = state.reserved[stream] { return reserved.version }
            switch kind(of: stream.entityType, in: &state) {
            case .own: return state.committed[stream] ?? 0
            case .sourced(let source): return source.committedVersion(of: stream)
            case .awaiting: return state.committed[stream]
            }
        }
        if events.count == 1 {
            guard let now = current(events[0].event.stream, &state) else { return nil }
            return [try next(events[0], after: now)]
        }
        var batch: [StreamID: UInt64] = [:]
        batch.reserveCapacity(events.count)
        var versions: [UInt64] = []
        versions.reserveCapacity(events.count)
        for pending in events {
            let stream = pending.event.stream
            guard let now = batch[stream] ?? current(stream, &state) else { return nil }
            let version = try next(pending, after: now)
            batch[stream] = version
            versions.append(version)
        }
        return versions
    }

    /// Enters batches reserved on the fast path into `reserved`, for a check or a waiter that
    /// must see them. (At most one exists: the fast path requires none in flight.)
    private static func indexUnindexedBatches(_ state: inout State) {
        for (id, batch) in state.batches where batch.indexed == nil {
            var last: [StreamID: UInt64] = [:]
            last.reserveCapacity(batch.events.count)
            for (index, pending) in batch.events.enumerated() { last[pending.event.stream] = batch.versions[index] }
            for (stream, version) in last {
                let inFlight = state.reserved[stream]?.inFlight ?? 0
                // Batches commit in reservation order, so a later batch's version is the newer.
                let newest = inFlight > 0 ? max(version, state.reserved[stream]!.version) : version
                state.reserved[stream] = (newest, inFlight + 1)
            }
            state.batches[id]!.indexed = Array(last.keys)
        }
    }

    /// Releases a batch's reservation (after it committed or failed). A failed batch fails
    /// every later one (the log's contract), so their reservations are released in turn.
    /// Commands waiting on a stream whose last reservation this was are resumed.
    func release(_ reservation: Reservation) {
        let resumed = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard let batch = state.batches.removeValue(forKey: reservation.id) else { return [] }
            // Committed purges are in `purged` already (folded before the release); a failed
            // one leaves its stream as it was.
            for stream in batch.purges {
                if let count = state.purging[stream], count > 1 { state.purging[stream] = count - 1 } else { state.purging[stream] = nil }
            }
            guard let streams = batch.indexed else { return [] }
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
                Self.indexUnindexedBatches(&state)
                guard state.reserved[stream] != nil else { return false }
                state.waiters[stream, default: []].append(continuation)
                return true
            }
            if !wait { continuation.resume() }
        }
    }

    // MARK: Folding

    func apply(_ envelopes: [EventEnvelope]) {
        state.withLock { state in
            for envelope in envelopes where envelope.position >= state.nextPosition {
                if envelope.stream.entityType == ForgottenStream.streamType, let receipt = ForgottenStream(receipt: envelope) {
                    // A receipt's stream never gets another event: its digest is what counts.
                    state.forgotten.insert(receipt)
                    holdsForgotten.store(true, ordering: .relaxed)
                    state.nextPosition = envelope.position + 1
                    continue
                }
                if case .sourced = Self.kind(of: envelope.stream.entityType, in: &state) {} else {
                    state.committed[envelope.stream] = envelope.entityVersion
                }
                // Every stream's, a sourced type's too: the mark is the store's, not a source's.
                // The first purge counts (a log written elsewhere could hold a second).
                if Tombstone(eventType: envelope.eventType) == .purged, state.purged[envelope.stream] == nil {
                    state.purged[envelope.stream] = envelope.position
                }
                state.nextPosition = envelope.position + 1
            }
            // Inside the lock and before the batch's reservation is released (by the caller,
            // after this): see `commits`.
            commits.add(1, ordering: .releasing)
        }
    }

    /// Layout: the entity types left out (kept by a source, or awaiting one) as a count and
    /// names; then the entity type count and names, the entry count and per entry the type's
    /// index, the entity id and the version. Then the purged section: its count and per stream
    /// the entity type, the entity id and the position of its `$purged` event, in (type, id)
    /// order. Then the forgotten section: its count and the 16-byte digests, in byte order.
    /// Older builds neither read nor write the sections: their snapshots are ignored here
    /// (``schemaVersion``), so one written after a purge or a compaction cannot hide it.
    func snapshotState() throws -> ProjectionSnapshot {
        let (committed, excluded, next, purged, forgotten) = state.withLock { state in
            let excluded: [String] = state.sources.keys.map { type in type.value } + state.awaiting.map { type in type.value }
            return (state.committed, excluded, state.nextPosition, state.purged, state.forgotten)
        }
        var writer = BinaryWriter(capacity: 32 + committed.count * 24)
        writer.writeVarint(UInt64(excluded.count))
        for type in excluded.sorted(by: { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }) { writer.writeString(type) }
        // Types by name and entries by (type, id): the table's own order follows its hash
        // table's capacity and insertion history (and, for string ids, a per-process hash
        // seed), and snapshots are byte-for-byte deterministic.
        let names = committed.typeNames
        let order = names.indices.sorted { names[$0].utf8.lexicographicallyPrecedes(names[$1].utf8) }
        var canonical = [Int](repeating: 0, count: names.count)
        for (new, old) in order.enumerated() { canonical[old] = new }
        writer.writeVarint(UInt64(names.count))
        for old in order { writer.writeString(names[old]) }
        var entries: [(code: Int, id: EntityID, version: UInt64)] = []
        entries.reserveCapacity(committed.count)
        committed.forEach { code, id, version in entries.append((canonical[code], id, version)) }
        entries.sort { $0.code != $1.code ? $0.code < $1.code : EntityID.canonicallyPrecedes($0.id, $1.id) }
        writer.writeVarint(UInt64(entries.count))
        for entry in entries {
            writer.writeVarint(UInt64(entry.code))
            writer.writeEntityID(entry.id)
            writer.writeVarint(entry.version)
        }
        let streams = purged.keys.sorted { a, b in
            a.entityType != b.entityType ? a.entityType.utf8.lexicographicallyPrecedes(b.entityType.utf8) : EntityID.canonicallyPrecedes(a.entityID, b.entityID)
        }
        writer.writeVarint(UInt64(streams.count))
        for stream in streams {
            writer.writeString(stream.entityType)
            writer.writeEntityID(stream.entityID)
            writer.writeVarint(purged[stream]!)
        }
        writer.writeVarint(UInt64(forgotten.count))
        for digest in forgotten.sorted(by: { $0.precedes($1) }) { writer.writeRaw(digest.digest) }
        return ProjectionSnapshot(bytes: writer.bytes, nextPosition: next)
    }

    func restore(from snapshot: ProjectionSnapshot) throws {
        var reader = BinaryReader(snapshot.bytes)
        let excludedCount = try reader.readVarint()
        guard excludedCount <= UInt64(StreamVersionMap.maxEntityTypes) else {
            throw BinaryDecodingError(.invalidValue("\(excludedCount) entity types left out"), at: 0)
        }
        var excluded: Set<ExactString> = []
        for _ in 0..<excludedCount { excluded.insert(ExactString(try reader.readString())) }
        let typeCount = try reader.readVarint()
        guard typeCount <= UInt64(StreamVersionMap.maxEntityTypes) else {
            throw BinaryDecodingError(.invalidValue("\(typeCount) entity types"), at: reader.offset)
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
        var purged: [StreamID: LogPosition] = [:]
        let purgedCount = try reader.readVarint()
        // An entry takes at least 3 bytes (a type, an id, a position).
        guard purgedCount <= UInt64(reader.remaining / 3) else {
            throw BinaryDecodingError(.invalidValue("\(purgedCount) purged streams in \(reader.remaining) bytes"), at: reader.offset)
        }
        purged.reserveCapacity(Int(purgedCount))
        for _ in 0..<purgedCount {
            let at = reader.offset
            let stream = StreamID(try reader.readString(), try reader.readEntityID())
            let position = try reader.readVarint()
            guard position < snapshot.nextPosition, purged.updateValue(position, forKey: stream) == nil else {
                throw BinaryDecodingError(.invalidValue("purged stream \(stream) at \(position) (repeated, or not below the snapshot's position \(snapshot.nextPosition))"), at: at)
            }
        }
        let forgottenOffset = reader.offset
        let forgottenCount = try reader.readVarint()
        guard forgottenCount <= UInt64(reader.remaining / ForgottenStream.digestLength) else {
            throw BinaryDecodingError(.invalidValue("\(forgottenCount) forgotten streams in \(reader.remaining) bytes"), at: forgottenOffset)
        }
        var forgotten: Set<ForgottenStream> = []
        forgotten.reserveCapacity(Int(forgottenCount))
        for _ in 0..<forgottenCount {
            let at = reader.offset
            guard let digest = ForgottenStream(digest: try reader.readRaw(count: ForgottenStream.digestLength)), forgotten.insert(digest).inserted else {
                throw BinaryDecodingError(.invalidValue("a forgotten stream's digest is repeated"), at: at)
            }
        }
        try reader.expectEnd()
        state.withLock { state in
            for type in state.sources.keys { committed.removeEntries(ofEntityType: type.value) }
            state.committed = committed
            state.awaiting = excluded.subtracting(state.sources.keys)
            state.nextPosition = snapshot.nextPosition
            state.lastType = nil
            state.purged = purged
            state.forgotten = forgotten
            holdsForgotten.store(!forgotten.isEmpty, ordering: .relaxed)
        }
    }
}
