import Foundation
import Synchronization

/// The single thread that writes a ``SegmentedLog``: it takes every queued append, encodes them
/// into batches, writes them with one `pwrite` and makes them durable with one `fdatasync`
/// (group commit), then acknowledges them in position order.
///
/// A dedicated thread rather than a task: `fdatasync` blocks for ~0.1 ms to many ms, and a
/// blocked cooperative-pool thread (there are as many as cores) would stall every other task.
///
/// Fields below `// Writer thread only` are touched by the writer thread alone after
/// ``start()``; the queue is guarded by `condition`.
final class GroupCommitWriter: @unchecked Sendable {
    typealias AppendCompletion = @Sendable (Result<Range<LogPosition>, LogError>) -> Void
    typealias Completion = @Sendable (Result<Void, LogError>) -> Void

    enum Request {
        /// Entries, their approximate encoded size, and the completion.
        case append([LogEntry], Int, AppendCompletion)
        case sync(Completion)
        case close(Completion)
    }

    private let condition = NSCondition()
    private var queue: [Request] = []
    private var accepting = true
    /// Requests submitted and not yet taken; read without the lock while the writer spins.
    private let submitted = Atomic<Int>(0)
    /// How long the writer polls for the next request before sleeping on the condition.
    /// A synced appender that awaits each append comes back within a few tens of
    /// microseconds; catching it without a futex wake-up saves that much on every append.
    private static let spinBeforeSleeping: Duration = .microseconds(50)

    // Writer thread only.
    private let core: LogCore
    private var active: ActiveSegment
    private var nextPosition: LogPosition
    private var poisoned: LogError?
    private var dirty = false
    private var lastSync = ContinuousClock.now
    private var output: [UInt8] = []
    private var scratch: [UInt8] = []
    private var batchBytes: [UInt8] = []

    private var configuration: SegmentedLog.Configuration { core.configuration }
    private var io: any LogFileIO { core.configuration.fileIO }

    init(core: LogCore, active: ActiveSegment, nextPosition: LogPosition) {
        self.core = core
        self.active = active
        self.nextPosition = nextPosition
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = Self.threadName
        thread.qualityOfService = .userInitiated
        thread.start()
    }

    /// Queues a request; after close, fails it at once.
    func submit(_ request: Request) {
        condition.lock()
        guard accepting else {
            condition.unlock()
            let closed = LogError(.closed, "the log is closed", file: core.directory)
            switch request {
            case .append(_, _, let completion): completion(.failure(closed))
            case .sync(let completion): completion(.failure(closed))
            case .close(let completion): completion(.success(()))  // closing twice is fine
            }
            return
        }
        if case .close = request { accepting = false }
        queue.append(request)
        submitted.add(1, ordering: .releasing)
        condition.signal()
        condition.unlock()
    }

    static let threadName = "EventLog writer"

    /// Called when the log is released without `close()`: finishes queued work and stops.
    /// Closes the log for an owner that went away without closing (a store whose open failed
    /// after its log opened, say). `lock` is held until the close is done, and the caller waits
    /// for it, so that an immediate reopen finds the store closed and unlocked: never a
    /// closing writer still trimming the active segment. On a writer thread (a completion
    /// dropped the last reference) it cannot wait: the lock is then released by the close.
    func abandon(releasing lock: DirectoryLock?) {
        guard Thread.current.name != Self.threadName else {
            submit(.close({ _ in lock?.unlock() }))
            return
        }
        let done = DispatchSemaphore(value: 0)
        submit(.close({ _ in
            lock?.unlock()
            done.signal()
        }))
        done.wait()
    }

    // MARK: - Writer thread

    private func run() {
        while true {
            spinForWork()
            condition.lock()
            var timedOut = false
            while queue.isEmpty {
                if dirty, case .buffered(let interval) = configuration.durability {
                    // The deadline is re-checked after every wake-up: a timed wait may return
                    // early, and syncing before the interval would break the policy's promise
                    // of batching syncs (and the counters tests rely on).
                    let remaining = lastSync.advanced(by: interval) - ContinuousClock.now
                    if remaining <= .zero {
                        timedOut = true
                        break
                    }
                    let seconds = Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18
                    _ = condition.wait(until: Date(timeIntervalSinceNow: seconds))
                } else {
                    condition.wait()
                }
            }
            let work = queue
            queue.removeAll(keepingCapacity: true)
            submitted.subtract(work.count, ordering: .relaxed)
            condition.unlock()

            if timedOut && work.isEmpty {
                _ = syncIfDirty()
                continue
            }
            if process(work) { return }
        }
    }

    private func spinForWork() {
        guard submitted.load(ordering: .acquiring) == 0 else { return }
        let deadline = ContinuousClock.now.advanced(by: Self.spinBeforeSleeping)
        // Yielding, not burning: on a machine with few cores the threads that will submit the
        // next request need this core; a pure busy-wait slowed 64 concurrent appenders 2-3x.
        while submitted.load(ordering: .acquiring) == 0 && ContinuousClock.now < deadline { sched_yield() }
    }

    /// Handles one round of requests; returns true once the log is closed.
    private func process(_ work: [Request]) -> Bool {
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
        var position = nextPosition
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
            let segmentFull = active.dataEnd + Int64(output.count + batchBytes.count) > Int64(configuration.segmentSize)
            if segmentFull && (active.batchCount > 0 || !pendingBatches.isEmpty) {
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
                firstPosition: position, recordCount: header.recordCount, batchLength: UInt32(header.batchLength),
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
        do {
            let end = active.dataEnd + Int64(output.count)
            if configuration.preallocate && end > active.preallocatedTo {
                // Grow in whole segment-size steps so that the next writes again land in
                // preallocated space.
                let target = end + Int64(configuration.segmentSize)
                try io.preallocate(descriptor: active.file.descriptor, path: active.file.path, length: target)
                active.preallocatedTo = target
            }
            try output.withBytes { (raw) throws(LogError) in
                try io.writeAll(raw, toAbsoluteOffset: active.dataEnd, descriptor: active.file.descriptor, path: active.file.path)
            }
            if configuration.durability == .synced {
                try io.synchronizeData(descriptor: active.file.descriptor, path: active.file.path)
                core.dataSyncs.add(1, ordering: .relaxed)
                lastSync = .now
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
        active.dataEnd += Int64(output.count)
        active.batchCount += batches.count
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
        nextPosition = published[published.count - 1].endPosition
        core.appendsAcknowledged.add(acknowledged.count, ordering: .relaxed)
        for (completion, range) in acknowledged { completion(.success(range)) }
        return true
    }

    private func failRemaining(_ appends: ArraySlice<(entries: [LogEntry], bytes: Int, completion: AppendCompletion)>) {
        let error = poisonedError(poisoned ?? LogError(.io, "write failed"))
        for append in appends { append.completion(.failure(error)) }
    }

    /// Seals the active segment (trim, sync, index) and starts the next one.
    private func roll() throws(LogError) {
        let file = active.file
        try io.truncate(descriptor: file.descriptor, path: file.path, length: active.dataEnd)
        try io.synchronize(descriptor: file.descriptor, path: file.path)
        dirty = false
        let batches = core.state.withLock { $0.segments[$0.segments.count - 1].batches }
        let index = SegmentIndexFile(basePosition: active.basePosition, nextPosition: nextPosition,
                                     dataLength: active.dataEnd, batches: batches)
        try StoreDirectory.writeAtomically(index.encoded(), directory: core.directory,
                                           name: SegmentName.index(active.basePosition), io: io)
        // The index supersedes a checkpoint left by an earlier clean close.
        try StoreDirectory.remove(core.directory + "/" + SegmentName.checkpoint(active.basePosition))
        let loader = LogLoader(directory: core.directory, writable: true, configuration: configuration)
        let created = try loader.createSegment(base: nextPosition)
        core.state.withLock { state in
            state.segments[state.segments.count - 1].sealed = true
            state.segments.append(created.entry)
        }
        active = created.active
    }

    private func syncIfDirty() -> Result<Void, LogError> {
        if let poisoned { return .failure(poisonedError(poisoned)) }
        guard dirty else { return .success(()) }
        do {
            try io.synchronizeData(descriptor: active.file.descriptor, path: active.file.path)
            core.dataSyncs.add(1, ordering: .relaxed)
            dirty = false
            lastSync = .now
            return .success(())
        } catch {
            poison(error)
            return .failure(error)
        }
    }

    /// Final sync; trims the preallocated tail so a closed store takes only the space it uses.
    private func finish() -> Result<Void, LogError> {
        defer { core.state.withLock { $0.closed = true } }
        let synced = syncIfDirty()
        guard case .success = synced else { return synced }
        do {
            if active.preallocatedTo > active.dataEnd {
                try io.truncate(descriptor: active.file.descriptor, path: active.file.path, length: active.dataEnd)
                try io.synchronize(descriptor: active.file.descriptor, path: active.file.path)
            }
            writeCheckpoint()
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    /// Records the active segment's batches so that the next open need not re-check them.
    /// Best effort: without a checkpoint, open scans the whole active segment, as after a crash.
    private func writeCheckpoint() {
        let name = SegmentName.checkpoint(active.basePosition)
        let batches = core.state.withLock { $0.segments[$0.segments.count - 1].batches }
        guard !batches.isEmpty else {
            try? StoreDirectory.remove(core.directory + "/" + name)
            return
        }
        let checkpoint = SegmentIndexFile(basePosition: active.basePosition, nextPosition: nextPosition,
                                          dataLength: active.dataEnd, batches: batches)
        try? StoreDirectory.writeAtomically(checkpoint.encoded(), directory: core.directory, name: name, io: io)
    }

    /// After a failed write or sync the kernel may have dropped dirty pages and cleared the
    /// error (PostgreSQL's "fsyncgate"): retrying could acknowledge data that is not on disk.
    /// So the log acknowledges nothing more until it is reopened and recovered.
    private func poison(_ error: LogError) {
        if poisoned == nil { poisoned = error }
    }

    private func poisonedError(_ cause: LogError) -> LogError {
        var error = LogError(.poisoned, "an earlier write or sync failed (\(cause.message)); nothing more is acknowledged until the store is reopened",
                             file: cause.file, offset: cause.offset, systemErrorNumber: cause.systemErrorNumber)
        error.position = cause.position
        return error
    }
}
