import Foundation
import EventLog

/// The append path: admission (expected versions checked, versions reserved, envelopes
/// encoded, the batch queued on the log), then the completion the log calls once the batch is
/// durable, which folds it into every projection and the version table, feeds subscribers and
/// may start a periodic snapshot.
extension EventStore {
    /// Appends events atomically, as one log batch.
    ///
    /// Every expected version is checked first against committed and in-flight versions; on
    /// a mismatch nothing is written. Once the log made the batch durable, the events are
    /// folded into the projections and sent to subscribers, then this method returns.
    ///
    /// - Parameter events: The events, in order. Several may concern the same entity.
    /// - Returns: The committed envelopes, with positions and entity versions.
    /// Repositories write through ``execute(maxAttempts:_:)``, which reads versions before state
    /// and retries conflicts; this is the primitive under it, for callers that supply their own
    /// expected versions.
    ///
    /// - Throws: ``RepositoryError/conflict(stream:expected:actual:)``, ``RepositoryError/closed``,
    ///   ``RepositoryError/limitExceeded(_:)`` for a date a log timestamp cannot hold,
    ///   ``RepositoryError/storage(_:)`` when the log failed (nothing acknowledged).
    @discardableResult
    public func append(_ events: [PendingEvent]) async throws -> [EventEnvelope] {
        try await append(events, basis: nil, planned: nil)
    }

    /// ``append(_:)-([PendingEvent])`` for a command: `basis` is the commit count its first read
    /// saw and `planned` each event's version as the command derived it from its reads, which
    /// the version table takes as they are when no commit happened since (its fast path).
    @discardableResult
    func append(_ events: [PendingEvent], basis: UInt64?, planned: [UInt64]?) async throws -> [EventEnvelope] {
        guard !events.isEmpty else { return [] }
        let now = Date()
        var stamps: [LogTimestamp] = []
        stamps.reserveCapacity(events.count)
        for pending in events {
            do { stamps.append(try pending.timestamp ?? LogTimestamp(pending.recordedAt ?? now)) } catch {
                throw RepositoryError.limitExceeded(LimitExceeded(.timestamp, "recordedAt \(pending.recordedAt ?? now) of an event of \(pending.event.stream) cannot be stored", cause: error))
            }
        }
        let timestamps = stamps
        return try await withCheckedThrowingContinuation { continuation in
            admission.withLock { admission in
                guard !admission.closed else { return continuation.resume(throwing: RepositoryError.closed) }
                let entityVersions: [UInt64], reservation: VersionTable.Reservation
                do {
                    while true {
                        if let reserved = try versions.reserve(events, basis: basis, planned: planned) {
                            (entityVersions, reservation) = reserved
                            break
                        }
                        // A stream of an entity type whose versions await their source: read
                        // them from the log (under the admission lock: no append can slip in).
                        try resolveAwaitingVersions()
                    }
                } catch {
                    return continuation.resume(throwing: error)
                }
                var entries: [LogEntry] = []
                entries.reserveCapacity(events.count)
                for (index, pending) in events.enumerated() {
                    let e = pending.event
                    entries.append(LogEntry(timestamp: timestamps[index], payload: EventEnvelope.encodeRecordPayload(
                        eventType: e.eventType, schemaVersion: e.schemaVersion, stream: e.stream,
                        entityVersion: entityVersions[index], metadata: pending.metadata, payload: e.payload)))
                }
                log.enqueueAppend(entries, committer: .caller) { result in
                    self.complete(result, events: events, versions: entityVersions, reservation: reservation, stamps: timestamps, continuation: continuation)
                }
            }
            // Outside the admission lock: this thread writes and syncs the batch (and folds
            // the round's completions, which take only the commit lock) when no commit is in
            // progress; otherwise the commit in progress, or the log's writer after it, does.
            log.commitEnqueuedAppends()
        }
    }

    /// Appends one event. See ``append(_:)-([PendingEvent])``.
    @discardableResult
    public func append(_ event: PendingEvent) async throws -> EventEnvelope {
        try await append([event])[0]
    }

    private func complete(
        _ result: Result<Range<LogPosition>, LogError>, events: [PendingEvent], versions entityVersions: [UInt64],
        reservation: VersionTable.Reservation, stamps: [LogTimestamp], continuation: CheckedContinuation<[EventEnvelope], any Error>
    ) {
        switch result {
        case .failure(let error):
            versions.release(reservation)
            continuation.resume(throwing: Self.repositoryError(for: error))
        case .success(let range):
            var envelopes: [EventEnvelope] = []
            envelopes.reserveCapacity(events.count)
            for (index, pending) in events.enumerated() {
                let e = pending.event
                envelopes.append(EventEnvelope(
                    position: range.lowerBound + LogPosition(index), timestamp: stamps[index],
                    eventType: e.eventType, schemaVersion: e.schemaVersion, stream: e.stream,
                    entityVersion: entityVersions[index], metadata: pending.metadata, payload: e.payload))
            }
            // A shared log: what other writers committed below this batch is folded first.
            foldAppendedElsewhere(before: range.lowerBound)
            // Decoding and a domain's closures (upcasters, index keys) run here, before the
            // commit lock. Completions run one at a time in position order, so preparing
            // outside the lock cannot reorder anything.
            var prepared = PreparedFold.prepare(commit.withLock { $0.projections }, envelopes)
            var snapshotDue = false
            // Order matters. Projections first (sources of stream versions last, see
            // `inFoldOrder`): a writer that reads an entity's version and then a projection's
            // state (to decide add vs. update) must never see the new version with the old
            // state, or two concurrent adds of one id could both pass. Then the version table
            // folds the rest before the reservation is released, so a concurrent check never
            // sees an older version.
            withCommitLock(covering: &prepared, envelopes) { state, prepared in
                // On a shared log the follower may have folded this batch already, or what lies
                // below it could not be read (a later fold takes both); otherwise it starts here.
                let folded = state.nextPosition
                guard folded >= range.lowerBound, folded < range.upperBound else {
                    versions.release(reservation)
                    return
                }
                for (index, projection) in state.projections.enumerated() {
                    prepared.fold(envelopes, into: projection, at: index)
                }
                versions.apply(envelopes)
                versions.release(reservation)
                let fresh = envelopes[Int(folded - range.lowerBound)...]
                for subscriber in state.subscribers.values {
                    for envelope in fresh { subscriber.yield(envelope) }
                }
                state.nextPosition = range.upperBound
                commitSignal.advance(to: range.upperBound)
                state.eventsSinceSnapshot += fresh.count
                guard let every = snapshotPolicy.everyEvents, snapshots != nil,
                      state.eventsSinceSnapshot >= every,
                      Double(state.eventsSinceSnapshot) >= snapshotPolicy.growthFraction * Double(state.nextPosition),
                      !state.snapshotInFlight, !state.closed else { return }
                state.snapshotInFlight = true
                state.eventsSinceSnapshot = 0
                snapshotDue = true
            }
            if snapshotDue {
                // Off the commit path: file writes and fsyncs never delay acknowledgements.
                Task.detached { [self] in
                    do { try await self.writeSnapshots() } catch {
                        self.logger.error("periodic snapshot failed", metadata: ["error": "\(error)"])
                    }
                    self.commit.withLock { $0.snapshotInFlight = false }
                }
            }
            continuation.resume(returning: envelopes)
        }
    }
}

extension EventStore {
    /// Runs `body` under the commit lock once `prepared` covers the projections registered at
    /// that moment (`[PreparedFold].cover(_:)`): the one rule of every fold of prepared events,
    /// a commit's and a follower's (`foldAppendedElsewhere(through:)`). While a
    /// projection registered or rebuilt since the events were prepared leaves them uncovered,
    /// the lock is left, the events are prepared for the projections registered then (the
    /// domain's decoders, upcasters and index keys never run under the lock), and it is taken
    /// again.
    /// - Parameters:
    ///   - prepared: What `envelopes` were prepared for; what they are prepared for when `body` runs.
    ///   - envelopes: The events to fold.
    ///   - body: The fold, under the lock, given the store's state and `prepared`.
    /// - Throws: What `body` throws (the lock is released).
    func withCommitLock<Result, Failure: Error>(
        covering prepared: inout [PreparedFold], _ envelopes: [EventEnvelope],
        _ body: (inout CommitState, [PreparedFold]) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        while true {
            let covered = prepared
            let outcome = try commit.withLock { (state) throws(Failure) -> Result? in
                guard covered.cover(state.projections) else { return nil }
                return try body(&state, covered)
            }
            if let outcome { return outcome }
            prepared = PreparedFold.prepare(commit.withLock { $0.projections }, envelopes, reusing: prepared)
        }
    }
}
