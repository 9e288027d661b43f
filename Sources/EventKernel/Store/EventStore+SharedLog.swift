import Foundation
import EventLog

/// A store over a ``SharedRecordLog`` (a PostgreSQL log several instances append to, or a
/// segmented log read beside its writer) folds what the others append exactly as it folds its
/// own commits: into every projection, then the version table, then subscribers and
/// observers. Everything the store does differently for a shared log is in this file; the
/// append path calls it at two points (folding the records from elsewhere below a completing
/// batch, and mapping a refused append to its conflict), and the command path at one
/// (catching up before it decides again after a conflict). Docs/ScaleOut.md, "What each
/// instance keeps".
extension EventStore {
    /// Records appended elsewhere, read and prepared outside the commit lock, for
    /// `fold(_:into:)` to fold under it.
    struct RecordsFromElsewhere {
        var envelopes: [EventEnvelope] = []
        var prepared: [PreparedFold] = []
        /// The first position read. The envelopes may begin later: a compacted log has gaps
        /// (Docs/FileFormat.md, "Sparse batches"), so the range read, not the first record,
        /// says which positions these cover.
        var start: LogPosition = 0
        /// One past the last position read: what the store covers once they are folded.
        var end: LogPosition = 0
    }

    /// The log as one that others append to, or `nil`, as its `RecordLog.access` says. A log
    /// this store alone appends to (`LogAccess.exclusive`) has no other writer, and its
    /// bounds run ahead of what the store has folded while a batch of its own completes:
    /// catching up from them would fold that batch before its completion does, so it is not
    /// followed even when it could be (a segmented log opened for writing). A log read beside
    /// its writer, or one instances share, learns of appends from elsewhere (`init` refused
    /// one that says so but is no `SharedRecordLog`). The one rule every shared-log path asks.
    var sharedLog: (any SharedRecordLog)? {
        guard log.access.othersMayAppend else { return nil }
        return log as? any SharedRecordLog
    }

    /// Starts folding what the log learns of by itself (a shared log's notifications and
    /// polls). Called once, at the end of `init`.
    func followSharedLog() {
        guard let shared = sharedLog else { return }
        shared.setAppendedElsewhereHandler { [weak self] in
            guard let self else { return }
            do {
                try self.foldAppendedElsewhere(through: shared.bounds.nextPosition)
            } catch RepositoryError.closed {
            } catch {
                self.logger.error("folding other writers' events failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Stops following (at close).
    func stopFollowingSharedLog() {
        sharedLog?.setAppendedElsewhereHandler(nil)
    }

    /// Folds the log's records from the store's position up to `end` (exclusive), in chunks,
    /// each read and prepared outside the commit lock.
    /// - Returns: How many events were folded.
    /// - Throws: ``RepositoryError/storage(_:)`` when the log cannot be read,
    ///   ``RepositoryError/undecodableEvent(_:)`` when a projection cannot fold one,
    ///   ``RepositoryError/closed``.
    @discardableResult
    func foldAppendedElsewhere(through end: LogPosition) throws -> Int {
        var folded = 0
        while true {
            let start = commit.withLock { $0.nextPosition }
            guard start < end else { return folded }
            let chunk = try readAppendedElsewhere(from: start, before: Swift.min(end, start + 4096))
            // As for a commit: prepared for every projection registered when it folds.
            var prepared = chunk.prepared
            folded += try withCommitLock(covering: &prepared, chunk.envelopes) { (state, prepared) throws -> Int in
                guard !state.closed else { throw RepositoryError.closed }
                var covered = chunk
                covered.prepared = prepared
                let count = fold(covered, into: &state)
                for projection in state.projections {
                    if let failure = projection.failure { throw RepositoryError.undecodableEvent(failure) }
                }
                return count
            }
        }
    }

    /// The records `[start, end)`, read and prepared by the projections registered now.
    /// - Throws: ``RepositoryError/storage(_:)``.
    func readAppendedElsewhere(from start: LogPosition, before end: LogPosition) throws -> RecordsFromElsewhere {
        var records = RecordsFromElsewhere(start: start, end: start)
        guard start < end else { return records }
        records.envelopes.reserveCapacity(Int(end - start))
        try forEachEnvelope(from: start, through: end - 1) { envelope in
            records.envelopes.append(envelope)
            return true
        }
        // The log must cover every position up to `end`: a record at `end - 1`, or a gap
        // there that compaction left (a sparse batch covers it; a log that ends before `end`
        // has no batch there at all). The last record read says nothing about that once the
        // log has gaps.
        let coversEnd: Bool
        if records.envelopes.last?.position == end - 1 {
            coversEnd = true
        } else {
            coversEnd = try Self.readingRecords { try log.isCompacted(at: end - 1) }
        }
        guard coversEnd else {
            throw RepositoryError.storage(StorageFailure(LogError(.corruption,
                "the log ends at position \(records.envelopes.last.map { $0.position + 1 } ?? start) but acknowledged records up to \(end)", position: end - 1)))
        }
        records.end = end
        records.prepared = PreparedFold.prepare(commit.withLock { $0.projections }, records.envelopes)
        return records
    }

    /// Folds what other writers committed between what the store has folded and `position`,
    /// a completing batch's first (nothing, for a log no one else appends to). On failure the
    /// batch stays unfolded (it committed; the store cannot fold it before what lies below it)
    /// until the next fold, the follower's or the next commit's, reads it.
    func foldAppendedElsewhere(before position: LogPosition) {
        guard commit.withLock({ $0.nextPosition }) < position else { return }
        do {
            try foldAppendedElsewhere(through: position)
        } catch RepositoryError.closed {
        } catch {
            logger.error("could not fold other writers' events below a commit", metadata: ["error": "\(error)"])
        }
    }

    /// Folds `records` into projections, the version table and subscribers (called with the
    /// commit lock held): what is still new of them, as a commit is folded.
    /// - Returns: How many events were new.
    func fold(_ records: RecordsFromElsewhere, into state: inout CommitState) -> Int {
        // Only a read that covers the store's position (neither stale nor ahead of it) is
        // folded. Whether it does is a matter of the positions read, not of the first record:
        // with gaps, that record may lie anywhere in the range, or there may be none.
        guard records.start <= state.nextPosition, records.end > state.nextPosition else { return 0 }
        for (index, projection) in state.projections.enumerated() {
            // Projections skip what they folded already (the caller checked that every one
            // prepared these: `cover`).
            records.prepared.fold(records.envelopes, into: projection, at: index)
        }
        // After the projections, as for a commit: a version read before state is never newer.
        versions.apply(records.envelopes)
        // Positions are not indices once the log has gaps: what is new starts at the first
        // envelope at or after the store's position.
        let nextPosition = state.nextPosition
        let fresh = records.envelopes[(records.envelopes.firstIndex { $0.position >= nextPosition } ?? records.envelopes.endIndex)...]
        for subscriber in state.subscribers.values {
            for envelope in fresh { subscriber.yield(envelope) }
        }
        state.nextPosition = records.end
        commitSignal.advance(to: records.end)
        state.eventsSinceSnapshot += fresh.count
        return fresh.count
    }

    /// Catches up with what other writers appended (a shared log), before a command decides
    /// again after a conflict: the conflict means the stream moved on elsewhere, and deciding
    /// on the same state would only conflict again.
    func catchUpAfterConflict() {
        do {
            try refresh()
        } catch {
            logger.notice("catching up after a conflict failed; deciding again on the state as it is", metadata: ["error": "\(error)"])
        }
    }

    /// The repository error for a failed append: a shared log's refusal is the conflict it
    /// carries; anything else is a storage failure keeping the `LogError`.
    static func repositoryError(for error: LogError) -> RepositoryError {
        if error.code == .conflict, let conflict = error.cause as? RepositoryError { return conflict }
        return RepositoryError.storage(StorageFailure(error))
    }

    /// Catches up with what other writers appended: for a store over a read-only log opened
    /// beside a running writer, or over a log several instances share (`PostgresLog`, which
    /// also does this by itself on notifications and polls). Reads what they committed since,
    /// folds it into every projection and the version table, and sends it to subscribers,
    /// exactly as the store's own commits are (so ``nextPosition``, versions and observations
    /// advance).
    /// - Returns: The number of events read.
    /// - Throws: ``RepositoryError/storage(_:)`` when the log cannot be read;
    ///   ``RepositoryError/undecodableEvent(_:)`` when a projection cannot fold a new event;
    ///   ``RepositoryError/closed``.
    /// - Complexity: O(new events).
    @discardableResult
    public func refresh() throws -> Int {
        guard let shared = sharedLog else { return 0 }
        guard !commit.withLock({ $0.closed }) else { throw RepositoryError.closed }
        let bounds = try Self.readingRecords { try shared.refresh() }
        return try foldAppendedElsewhere(through: bounds.nextPosition)
    }
}
