import EventLog
import KernelPrimitives
import Foundation

/// What one ``EventStore/compact()`` did.
public struct CompactionReport: Hashable, Sendable, Codable {
    /// Purged streams whose events this compaction removed: from now on the store knows each
    /// by its digest only (``ForgottenStream``).
    public var streamsForgotten: Int
    /// Purged streams whose `$purged` event is still in the active segment: removed by a
    /// compaction after that segment is sealed.
    public var streamsPending: Int
    /// Events removed (every event of the forgotten streams but their `$purged` ones).
    public var eventsRemoved: Int
    /// `$purged` events replaced by a receipt (one per forgotten stream whose purge was in the
    /// segments read).
    public var receiptsWritten: Int
    /// Sealed segments read, and rewritten (a segment holding none of the streams stays as it is).
    public var segmentsRead: Int
    public var segmentsRewritten: Int
    /// The bytes of the segments read, before and after.
    public var bytesBefore: Int64
    public var bytesAfter: Int64
    /// Snapshot files removed: every one older than the snapshots written after the rewrite
    /// (they may hold what compaction removed).
    public var snapshotsRemoved: Int
}

extension EventStore {
    /// Removes from the log every event of the purged streams (Docs/Forgetting.md), online:
    /// appends, reads, queries and subscriptions go on meanwhile.
    ///
    /// Each purged stream is *forgotten*: its events are removed, its `$purged` event is
    /// replaced by a receipt at the same position (``ForgottenStream``: the entity type, when,
    /// and who purged, not the id), and the store keeps refusing the id by its digest, across
    /// reopens and replays from the start. Only sealed segments are rewritten: when a purge lies
    /// in the active segment, that segment is sealed first (a new one takes the appends), so a
    /// compaction forgets every purge committed before it; one committed meanwhile waits for the
    /// next (``CompactionReport/streamsPending``).
    /// Positions do not move: the log keeps gaps where events were removed.
    ///
    /// The steps, each safe to interrupt: the ids are replaced by digests in memory (the append
    /// path refuses them throughout); each sealed segment holding an event of those streams is
    /// rewritten and atomically replaces the old one (`SegmentedLog`'s rewrite; a crash leaves
    /// the old segment or the new one); then fresh snapshots are written and every older
    /// snapshot file is removed, since an older one may still name a purged id. A crash before
    /// the end leaves some segments rewritten and some not, and a store that still refuses every
    /// purged id; the next compaction finishes the work.
    ///
    /// - Returns: What was removed, and the bytes before and after.
    /// - Throws: ``RepositoryError/misuse(_:)``: ``Misuse/Code/compactionUnsupported`` for a log
    ///   that is not a local directory this store writes, ``Misuse/Code/compactionRunning``
    ///   while another compaction runs; ``RepositoryError/storage(_:)`` for a segment that
    ///   cannot be read or rewritten (with its file, offset and position: that segment is left
    ///   as it was) or a snapshot that cannot be written.
    /// - Complexity: Reads every sealed segment once and writes those it changes.
    public func compact() async throws -> CompactionReport {
        guard let segmented = log.localSegments, log.access == .exclusive, segmented.access == .exclusive else {
            throw RepositoryError.misuse(Misuse(.compactionUnsupported,
                "compaction rewrites the segments of a local log its writer holds; this store's log is \(log.access == .readOnly ? "read-only" : "not a local directory")"))
        }
        guard compaction.withLock({ running in running ? false : { running = true; return true }() }) else {
            throw RepositoryError.misuse(Misuse(.compactionRunning, "a compaction of this store is under way"))
        }
        defer { compaction.withLock { $0 = false } }
        // `close()` waits for a compaction that began first; one that began after is refused.
        guard !admission.withLock({ $0.closed }) else { throw RepositoryError.closed }

        var sealed = segmented.sealedSegments
        if versions.purgedStreams.values.contains(where: { $0 >= (sealed.last?.upperBound ?? 0) }) {
            // A purge in the active segment: seal it, so that this compaction forgets every
            // purge committed before it.
            do { try await segmented.sealActiveSegment() } catch let error as LogError { throw RepositoryError.storage(StorageFailure(error)) }
            sealed = segmented.sealedSegments
        }
        let rewritable = sealed
        let horizon = rewritable.last?.upperBound ?? 0
        let purged = versions.purgedStreams
        let forgetting = purged.filter { $0.value < horizon }
        var report = CompactionReport(streamsForgotten: forgetting.count, streamsPending: purged.count - forgetting.count,
                                      eventsRemoved: 0, receiptsWritten: 0, segmentsRead: 0, segmentsRewritten: 0,
                                      bytesBefore: 0, bytesAfter: 0, snapshotsRemoved: 0)
        guard !forgetting.isEmpty else { return report }
        let snapshotFolder = snapshots ?? SnapshotDirectory(storeDirectory: segmented.directory, logger: logger, fileIO: log.fileIO)
        // No snapshot is written while the log is rewritten, and none written before stays: a
        // snapshot from before the purges, whose anchor no rewrite touches, would otherwise still
        // match the log after a crash midway and bring a purged entity back; and any may hold a
        // purged id. Without snapshots, a crash midway costs a replay, never a wrong answer.
        try await holdingSnapshotWrites {
            report.snapshotsRemoved = try snapshotFolder.removeFiles(except: [])
            // Blocking file I/O for as long as the rewrite takes: off the cooperative threads.
            let (rewrites, digests) = try await runOnThreadOfItsOwn(named: "EventKernel compaction") {
                // Each stream's digest once (SHA-256): for its receipt and for the version table.
                let digests = Dictionary(uniqueKeysWithValues: forgetting.keys.map { ($0, ForgottenStream($0)) })
                return (try Self.rewrite(rewritable, of: segmented, removing: forgetting, digests: digests), digests)
            }
            // A segment may be rewritten by both passes: its bytes before the first, after the last.
            var bytes: [LogPosition: (before: Int64, after: Int64)] = [:]
            var rewritten: Set<LogPosition> = []
            for rewrite in rewrites {
                bytes[rewrite.basePosition] = (bytes[rewrite.basePosition]?.before ?? rewrite.bytesBefore, rewrite.bytesAfter)
                report.eventsRemoved += rewrite.recordsRemoved
                report.receiptsWritten += rewrite.recordsReplaced
                if rewrite.rewritten { rewritten.insert(rewrite.basePosition) }
            }
            report.segmentsRead = bytes.count
            report.segmentsRewritten = rewritten.count
            report.bytesBefore = bytes.values.reduce(0) { $0 + $1.before }
            report.bytesAfter = bytes.values.reduce(0) { $0 + $1.after }
            // Only now, every rewrite done: a compaction that failed midway leaves the ids
            // purged, and the next one forgets them (their `$purged` events are still there).
            forget(digests)
            if snapshots != nil {
                let written = try await writeSnapshotsHeld(of: nil)
                report.snapshotsRemoved += try snapshotFolder.removeFiles(except: Set(written))
            }
        }
        logger.notice("compaction", metadata: [
            "forgotten": "\(report.streamsForgotten)", "pending": "\(report.streamsPending)", "removed": "\(report.eventsRemoved)",
            "segmentsRewritten": "\(report.segmentsRewritten)", "bytesBefore": "\(report.bytesBefore)", "bytesAfter": "\(report.bytesAfter)",
        ])
        return report
    }

    /// What a compaction would find now, without doing it: purged streams whose `$purged` event
    /// is in a sealed segment, those in the active segment (which a compaction seals first, so
    /// it forgets both), and streams compaction forgot already. `nil` for a log that is not a local
    /// directory (it cannot be compacted).
    package var compactionCandidates: (ready: Int, waiting: Int, forgotten: Int)? {
        guard let segmented = log.localSegments else { return nil }
        let horizon = segmented.sealedSegments.last?.upperBound ?? 0
        let purged = versions.purgedStreams
        let ready = purged.values.count { $0 < horizon }
        return (ready, purged.count - ready, versions.forgottenCount)
    }

    /// Replaces the ids of `streams` by their digests: in the version table (which refuses
    /// them from then on) first, then in the repositories' projections that keep their
    /// versions (a deleted entity's version is kept; a purged one's must go).
    private func forget(_ digests: [StreamID: ForgottenStream]) {
        versions.forget(digests)
        let streams = Array(digests.keys)
        let sources = commit.withLock { $0.projections }.compactMap { $0 as? any StreamVersionSource }
        for source in sources {
            guard let type = source.versionedEntityType else { continue }
            let own = streams.filter { $0.entityType == type }
            if !own.isEmpty { source.forgetVersions(of: own) }
        }
    }

    /// Rewrites the sealed segments in `sealed` without the events of `streams`, in two
    /// passes that leave, at every instant, a log any replay folds to the same present:
    ///
    /// 1. from the last segment back to the first, every event of the streams but their
    ///    `$purged` event is removed: what remains of a stream is always a prefix of its events
    ///    and its `$purged` event (never an update without the add before it, which no
    ///    projection could fold), and the tombstone still ends it;
    /// 2. each `$purged` event is replaced by its receipt (the stream has no other event left).
    ///
    /// - Parameter digests: Each stream's digest, for its receipt.
    /// - Returns: Each rewrite, both passes' (a segment may be rewritten twice).
    /// - Throws: ``RepositoryError/storage(_:)`` for a record that is not an event, or a
    ///   segment that cannot be read or written: that segment is left as it was, and those
    ///   before it in the pass are not touched.
    private static func rewrite(
        _ sealed: [Range<LogPosition>], of log: SegmentedLog, removing streams: [StreamID: LogPosition],
        digests: [StreamID: ForgottenStream]
    ) throws -> [SegmentRewrite] {
        // No event of the streams lies past the last purge: the segments after it are not read.
        let last = streams.values.max() ?? 0
        let purges = Set(streams.values)
        var strings = StringInterner()
        var payloads: [String: [UInt8]] = [:]
        var rewrites: [SegmentRewrite] = []
        for segment in sealed.reversed() where segment.lowerBound <= last {
            rewrites.append(try readingRecords {
                try log.rewriteSealedSegment(startingAt: segment.lowerBound) { record in
                    if purges.contains(record.position) { return .keep }
                    // Only the stream is needed here: the rest of the record is not decoded.
                    let stream = try EventEnvelope.stream(inRecordPayload: Array(record.payload), strings: &strings)
                    return streams[stream] == nil ? .keep : .remove
                }
            })
        }
        for segment in sealed where purges.contains(where: { segment.contains($0) }) {
            rewrites.append(try readingRecords {
                try log.rewriteSealedSegment(startingAt: segment.lowerBound) { record in
                    guard purges.contains(record.position) else { return .keep }
                    let envelope = try EventEnvelope(recordPayload: Array(record.payload), position: record.position,
                                                     timestamp: record.timestamp, strings: &strings)
                    guard streams[envelope.stream] == record.position, let forgotten = digests[envelope.stream] else { return .keep }
                    return .replace(forgotten.receiptRecord(replacing: envelope, payloads: &payloads))
                }
            })
        }
        return rewrites
    }
}
