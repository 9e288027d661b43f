import Foundation
import EventLog

extension EventStore {
    /// What a snapshot is to the log as it is now.
    enum SnapshotStanding {
        /// The log still holds the history the snapshot describes: use it.
        case matches
        /// It describes another history, for a reason that is not damage (the log was cut by
        /// recovery or repair since, or the file predates anchors): never used; a writer
        /// removes it.
        case stale(String)
        /// It describes events the log acknowledged and no longer holds, in a history that was
        /// never cut: damage.
        case contradicts(LogError)
    }

    /// The rule binding snapshots to their log (Docs/Durability.md, "Derived state"), in one
    /// place: open, registration and time travel all judge snapshots here.
    ///
    /// A snapshot is used only if the log still holds, at `nextPosition - 1`, the very record
    /// it was built up to (its timestamp and payload checksum). Otherwise the log's history
    /// epoch says why: an older epoch means the log was cut (a torn tail, a repair) since, and
    /// the snapshot is merely stale; the same epoch means acknowledged events vanished or
    /// changed underneath it, which is reported as damage rather than answered from.
    /// - Throws: ``RepositoryError/storage(_:)`` when the anchor record cannot be read.
    func standing(of snapshot: SnapshotFile, at file: URL) throws -> SnapshotStanding {
        var next = log.bounds.nextPosition
        if snapshot.nextPosition > next, let shared = sharedLog {
            // A follower's view is a prefix: the writer (another instance) may have appended
            // (and snapshotted) since it was taken. Look again before calling anything missing.
            next = (try? shared.refresh().nextPosition) ?? next
        }
        return try Self.standing(of: snapshot, at: file, in: log, historyEpoch: log.historyEpoch, logEnd: next)
    }

    /// ``standing(of:at:)`` against any log (a backup judges the snapshots of a store no
    /// `EventStore` is open on).
    /// - Parameters:
    ///   - snapshot: The snapshot.
    ///   - file: Its file, for the error.
    ///   - log: The log it must be bound to.
    ///   - historyEpoch: The log's history epoch.
    ///   - logEnd: The log's next position as seen now.
    /// - Throws: ``RepositoryError/storage(_:)`` when the anchor record cannot be read.
    static func standing(
        of snapshot: SnapshotFile, at file: URL, in log: any RecordLog, historyEpoch: UInt64, logEnd next: LogPosition
    ) throws -> SnapshotStanding {
        try standing(nextPosition: snapshot.nextPosition, anchor: snapshot.anchor, snapshotEpoch: snapshot.historyEpoch,
                     at: file, in: log, historyEpoch: historyEpoch, logEnd: next)
    }

    /// ``standing(of:at:in:historyEpoch:logEnd:)`` from what a snapshot's header records (its
    /// next position, anchor and history epoch): all the rule reads, so a backup judges a
    /// snapshot it does not read whole.
    static func standing(
        nextPosition position: LogPosition, anchor: SnapshotAnchor?, snapshotEpoch: UInt64?, at file: URL, in log: any RecordLog,
        historyEpoch: UInt64, logEnd next: LogPosition
    ) throws -> SnapshotStanding {
        guard position > 0 else { return .matches }
        guard let anchor, let epoch = snapshotEpoch else {
            return .stale("it was written by a version that did not record which history it covers")
        }
        let found = position <= next ? try Self.anchor(in: log, coveringUpTo: position) : nil
        if found == anchor { return .matches }
        if position <= next, try Self.readingRecords({ try log.isCompacted(at: position - 1) }) {
            // Compaction removed or replaced the event it was anchored to: no damage, and the
            // state it holds may name what compaction removed (a purged stream's version).
            return .stale("compaction rewrote the events up to position \(position) since it was written")
        }
        let what = found == nil ? "the log ends before position \(next)" : "the log holds a different event at position \(position - 1)"
        guard epoch == historyEpoch else {
            return .stale("it covers positions up to \(position) of an earlier history (epoch \(epoch); the log was cut since and is now in epoch \(historyEpoch)), but \(what)")
        }
        return .contradicts(LogError(.corruption,
            "the snapshot covers acknowledged events up to position \(position), but \(what) and the log was never cut: acknowledged events are missing or changed (`eventkernel verify` shows the damage; `eventkernel repair --yes` accepts the loss)",
            file: file.path, offset: 0, position: position - 1))
    }

    /// The newest snapshot of `projection` that matches the log, up to `maxNextPosition`.
    /// Stale snapshots are skipped (and removed when `removingStale`, by the store's writer).
    /// - Throws: ``RepositoryError/storage(_:)`` for a snapshot that contradicts the log.
    func usableSnapshot(for projection: any Projection, maxNextPosition: LogPosition, removingStale: Bool) throws -> SnapshotFile? {
        guard let snapshots else { return nil }
        for (url, file) in snapshots.candidates(projectionName: projection.name, schemaVersion: projection.schemaVersion) {
            // Judged even when beyond `maxNextPosition`: one that contradicts the log is damage.
            switch try standing(of: file, at: url) {
            case .matches:
                if file.nextPosition <= maxNextPosition { return file }
            case .stale(let why):
                logger.notice("snapshot of another history, not used", metadata: ["file": "\(url.path)", "reason": "\(why)"])
                if removingStale { try? FileManager.default.removeItem(at: url) }
            case .contradicts(let error):
                throw RepositoryError.storage(StorageFailure(error))
            }
        }
        return nil
    }

    /// The anchor of the record at `nextPosition - 1`, for a snapshot covering up to there.
    /// - Throws: ``RepositoryError/storage(_:)`` when it cannot be read.
    func anchor(coveringUpTo nextPosition: LogPosition) throws -> SnapshotAnchor? {
        try Self.anchor(in: log, coveringUpTo: nextPosition)
    }

    /// The anchor of the last record below `nextPosition` of `log` (a backup judges snapshots
    /// against a log no store is open on): the record at `nextPosition - 1`, unless compaction
    /// removed it, and then the last one it kept before.
    /// - Throws: ``RepositoryError/storage(_:)`` when it cannot be read.
    static func anchor(in log: any RecordLog, coveringUpTo nextPosition: LogPosition) throws -> SnapshotAnchor? {
        guard nextPosition > 0 else { return nil }
        var last = nextPosition - 1
        while true {
            var found: SnapshotAnchor?
            // The batch holding `last` is decoded whole either way: visit it up to `last`.
            let start = log.batchStart(containing: last) ?? last
            try Self.readingRecords {
                try log.forEachRecord(from: start, through: last) { record in
                    found = SnapshotAnchor(record)
                    return true
                }
            }
            if let found { return found }
            // Nothing there: the log ends before it, or compaction left a gap (go on before it).
            let compacted = try Self.readingRecords { try log.isCompacted(at: last) }
            guard compacted, start > 0 else { return nil }
            last = start - 1
        }
    }

    /// Writes a snapshot of every projection and of the stream-version table now.
    ///
    /// Each snapshot records the history it describes (the log's history epoch and the last
    /// event it covers), and the log is synced before any is written, so a snapshot never
    /// covers an event a crash could take away (Docs/Durability.md, "Derived state").
    /// - Throws: ``RepositoryError/misuse(_:)`` (``Misuse/Code/noSnapshotDirectory``) when the store has no directory,
    ///   ``RepositoryError/storage(_:)`` when the sync or a write fails, or (code
    ///   `LogError.Code.readOnly`) when the log is read-only: its snapshots are its writer's.
    public func writeSnapshots() async throws {
        try await writeSnapshots(of: nil)
    }

    /// ``writeSnapshots()`` of `only` these projections (a rebuilt one), or of every projection
    /// and the version table (`nil`): every snapshot write of the store comes here, and waits
    /// while a compaction runs (``holdingSnapshotWrites(_:)``).
    /// - Returns: The names of the files written.
    @discardableResult
    func writeSnapshots(of only: [any Projection]?) async throws -> [String] {
        try await holdingSnapshotWrites { try await self.writeSnapshotsHeld(of: only) }
    }

    /// Runs `body` while no other snapshot write runs: a compaction holds this for its whole
    /// run, so that no snapshot captures a state that names what it removes, or one that would
    /// still match the log after a crash midway (the other writers wait their turn).
    func holdingSnapshotWrites<T>(_ body: () async throws -> T) async throws -> T {
        while !snapshotWrites.withLock({ held in held ? false : { held = true; return true }() }) {
            try await Task.sleep(for: .milliseconds(5))
        }
        defer { snapshotWrites.withLock { $0 = false } }
        return try await body()
    }

    /// ``writeSnapshots(of:)`` by a caller holding ``holdingSnapshotWrites(_:)``.
    @discardableResult
    func writeSnapshotsHeld(of only: [any Projection]?) async throws -> [String] {
        guard log.access.isWritable else {
            throw RepositoryError.storage(StorageFailure(LogError(.readOnly,
                "the store's log is read-only: the snapshots beside it are its writer's, not written by a reader")))
        }
        guard let snapshots else { throw RepositoryError.misuse(Misuse(.noSnapshotDirectory, "the store was opened without a directory for snapshots")) }
        let projections: [any Projection] = only ?? [versions] + commit.withLock { $0.projections }
        var captured: [(projection: any Projection, schemaVersion: UInt16, state: ProjectionSnapshot, encoding: Duration)] = []
        for projection in projections {
            // A projection that failed to fold an event holds a partial state: snapshotting it
            // would turn an error into lost data.
            if let failure = projection.failure {
                logger.error("snapshot skipped for a failed projection", metadata: ["projection": "\(projection.name)", "error": "\(failure)"])
                continue
            }
            let started = ContinuousClock.now
            let schemaVersion = projection.schemaVersion
            let state = try projection.snapshotState()
            // A rebuild switched the projection's definition in between: the state may be of
            // the other version; the next snapshot takes it.
            guard projection.schemaVersion == schemaVersion else {
                logger.notice("snapshot skipped: the projection was rebuilt while it was taken", metadata: ["projection": "\(projection.name)"])
                continue
            }
            captured.append((projection, schemaVersion, state, ContinuousClock.now - started))
        }
        // Under buffered durability the captured states may include events not yet on disk.
        do { try await log.synchronize() } catch {
            throw RepositoryError.storage(StorageFailure("the log sync before writing snapshots failed", cause: error))
        }
        let epoch = log.historyEpoch
        // Projections usually stand at the same position: read each anchor record once.
        var anchors: [LogPosition: SnapshotAnchor?] = [:]
        var written: [String] = []
        for (projection, schemaVersion, state, encoding) in captured {
            let started = ContinuousClock.now
            let anchor: SnapshotAnchor?
            if let known = anchors[state.nextPosition] { anchor = known } else {
                anchor = try self.anchor(coveringUpTo: state.nextPosition)
                anchors[state.nextPosition] = .some(anchor)
            }
            written.append(try snapshots.write(
                SnapshotFile(projectionName: projection.name, schemaVersion: schemaVersion,
                             nextPosition: state.nextPosition, historyEpoch: epoch, anchor: anchor, body: state.bytes),
                keep: snapshotPolicy.keep))
            instrumentation?.snapshotWritten(projection: projection.name, bytes: state.bytes.count,
                                             duration: encoding + (ContinuousClock.now - started))
        }
        return written
    }
}
