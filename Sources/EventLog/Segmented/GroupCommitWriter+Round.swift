import Foundation
import Synchronization

/// How one group-commit round executes, once ``GroupCommitWriter`` has decided who leads it:
/// the round's requests in order, appends merged into batches, one write and one sync per
/// segment, rolling to a new segment, completions, and poisoning after a failed write or sync.
/// Only the leader of a round runs this code.
extension GroupCommitWriter {
    /// Handles one round of requests; returns true once the log is closed.
    func process(_ work: [Request]) -> Bool {
        var appends: [(entries: [LogEntry], bytes: Int, completion: AppendCompletion)] = []
        for request in work {
            switch request {
            case .append(let entries, let bytes, let completion):
                appends.append((entries, bytes, completion))
            case .sync(let completion):
                commit(appends)
                appends.removeAll()
                completion(syncIfDirty())
            case .close(let completion):
                commit(appends)
                appends.removeAll()
                completion(finish())
                return true
            case .seal(let completion):
                commit(appends)
                appends.removeAll()
                completion(sealIfNotEmpty())
            }
        }
        commit(appends)
        return false
    }

    /// Writes the appends of one round: merged into batches, one write and one sync per segment.
    private func commit(_ appends: [(entries: [LogEntry], bytes: Int, completion: AppendCompletion)]) {
        guard !appends.isEmpty else { return }
        if let poisoned {
            for append in appends { append.completion(.failure(poisonedError(poisoned))) }
            return
        }
        output.removeAll(keepingCapacity: true)
        var pendingBatches: [BatchLocation] = []
        var acknowledged: [(AppendCompletion, Range<LogPosition>)] = []
        var position = active.nextPosition
        var index = 0
        while index < appends.count {
            // Merge consecutive appends up to the group size; one append never spans batches.
            var end = index + 1
            var groupBytes = appends[index].bytes
            while end < appends.count && groupBytes + appends[end].bytes <= configuration.maxGroupBytes {
                groupBytes += appends[end].bytes
                end += 1
            }
            let group = appends[index..<end]
            batchBytes.removeAll(keepingCapacity: true)
            let header: BatchHeader
            do {
                header = try BatchPayload.encodeBatch(group.lazy.flatMap { $0.entries }, firstPosition: position,
                                                      codec: configuration.compression, into: &batchBytes, scratch: &scratch)
            } catch {
                // Only an oversized group can fail to encode; its appends fail, nothing is written.
                for append in group { append.completion(.failure(error)) }
                index = end
                continue
            }
            if active.mustSeal(beforeAdding: batchBytes.count, pendingBytes: output.count, pendingBatches: pendingBatches.count) {
                guard write(&pendingBatches, acknowledging: &acknowledged) else {
                    failRemaining(appends[index...])
                    return
                }
                do {
                    try roll()
                } catch {
                    poison(error)
                    failRemaining(appends[index...])
                    return
                }
            }
            let offset = active.dataEnd + Int64(output.count)
            output.append(contentsOf: batchBytes)
            pendingBatches.append(BatchLocation(
                firstPosition: position, positionCount: header.positionCount, batchLength: UInt32(header.batchLength),
                offset: offset, minTimestamp: header.minTimestamp, maxTimestamp: header.maxTimestamp))
            for append in group {
                let range = position..<(position + LogPosition(append.entries.count))
                acknowledged.append((append.completion, range))
                position = range.upperBound
            }
            index = end
        }
        _ = write(&pendingBatches, acknowledging: &acknowledged)
    }

    /// Writes `output` to the active segment, syncs per policy, publishes the batches and calls
    /// the completions. On failure, poisons the log and fails the completions.
    private func write(_ batches: inout [BatchLocation], acknowledging acknowledged: inout [(AppendCompletion, Range<LogPosition>)]) -> Bool {
        defer {
            batches.removeAll()
            acknowledged.removeAll()
            output.removeAll(keepingCapacity: true)
        }
        guard !batches.isEmpty else { return true }
        var syncDuration: Duration?
        do {
            let synced = configuration.durability == .synced
            // Measured only when instrumented: a round's durable write is one pwrite into the
            // page cache (microseconds) and one fdatasync.
            let started = configuration.instrumentation == nil ? nil : ContinuousClock.now
            try active.append(output, batches: batches, synchronize: synced)
            if synced {
                core.dataSyncs.add(1, ordering: .relaxed)
                lastSync = .now
                syncDuration = started.map { lastSync - $0 }
            } else {
                dirty = true
            }
        } catch {
            poison(error)
            for (completion, _) in acknowledged { completion(.failure(error)) }
            return false
        }
        core.bytesWritten.add(output.count, ordering: .relaxed)
        core.batchesWritten.add(batches.count, ordering: .relaxed)
        let published = batches
        core.state.withLock { state in
            for batch in published { state.segments[state.segments.count - 1].add(batch) }
            let last = published[published.count - 1]
            state.bounds.nextPosition = last.endPosition
            for batch in published {
                let lo = LogTimestamp(nanosecondsSince1970: batch.minTimestamp)
                let hi = LogTimestamp(nanosecondsSince1970: batch.maxTimestamp)
                state.bounds.minTimestamp = Swift.min(state.bounds.minTimestamp ?? lo, lo)
                state.bounds.maxTimestamp = Swift.max(state.bounds.maxTimestamp ?? hi, hi)
            }
        }
        core.appendsAcknowledged.add(acknowledged.count, ordering: .relaxed)
        configuration.instrumentation?.logWroteRound(
            appends: acknowledged.count, records: published.reduce(0) { $0 + Int($1.positionCount) },
            bytes: output.count, sync: syncDuration)
        for (completion, range) in acknowledged { completion(.success(range)) }
        return true
    }

    private func failRemaining(_ appends: ArraySlice<(entries: [LogEntry], bytes: Int, completion: AppendCompletion)>) {
        let error = poisonedError(poisoned ?? LogError(.io, "write failed"))
        for append in appends { append.completion(.failure(error)) }
    }

    /// Seals the active segment unless it holds no batch (a compaction asked: what it holds
    /// becomes rewritable). A failure poisons the log, as a failed roll does.
    private func sealIfNotEmpty() -> Result<Void, LogError> {
        if let poisoned { return .failure(poisonedError(poisoned)) }
        guard !publishedBatches().isEmpty else { return .success(()) }
        do {
            try roll()
            return .success(())
        } catch {
            poison(error)
            return .failure(error)
        }
    }

    /// Seals the active segment and starts the next one.
    private func roll() throws(LogError) {
        try active.seal(batches: publishedBatches())
        dirty = false  // sealing synced the whole file
        let created = try Segment.create(base: active.nextPosition, directory: core.directory, configuration: configuration)
        core.state.withLock { state in
            state.segments[state.segments.count - 1].sealed = true
            state.segments.append(created.segment)
        }
        active = created.active
    }

    /// The active segment's batches, as its readers see them (the side files list them).
    private func publishedBatches() -> [BatchLocation] {
        core.state.withLock { $0.segments[$0.segments.count - 1].batches }
    }

    func syncIfDirty() -> Result<Void, LogError> {
        if let poisoned { return .failure(poisonedError(poisoned)) }
        guard dirty else { return .success(()) }
        do {
            let started = configuration.instrumentation == nil ? nil : ContinuousClock.now
            try active.synchronizeData()
            core.dataSyncs.add(1, ordering: .relaxed)
            dirty = false
            lastSync = .now
            if let started { configuration.instrumentation?.logSynced(duration: lastSync - started) }
            return .success(())
        } catch {
            poison(error)
            return .failure(error)
        }
    }

    /// Final sync; trims the active segment's preallocated tail and writes its checkpoint, so
    /// that a closed store takes only the space it uses and the next open need not re-check
    /// what it holds.
    private func finish() -> Result<Void, LogError> {
        defer { core.state.withLock { $0.closed = true } }
        let synced = syncIfDirty()
        guard case .success = synced else { return synced }
        do {
            try active.trimPreallocation()
            active.writeCheckpoint(batches: publishedBatches())
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    /// After a failed write or sync the kernel may have dropped dirty pages and cleared the
    /// error (PostgreSQL's "fsyncgate"): retrying could acknowledge data that is not on disk.
    /// So the log acknowledges nothing more until it is reopened and recovered.
    private func poison(_ error: LogError) {
        if poisoned == nil { poisoned = error }
        // Nothing more is synced either (`syncIfDirty` fails first): data left dirty would keep
        // the buffered policy's sync due, and the writer thread waking for it at once, forever.
        dirty = false
    }

    private func poisonedError(_ cause: LogError) -> LogError {
        var error = LogError(.poisoned, "an earlier write or sync failed (\(cause.message)); nothing more is acknowledged until the store is reopened",
                             file: cause.file, offset: cause.offset, systemErrorNumber: cause.systemErrorNumber)
        error.position = cause.position
        return error
    }
}
