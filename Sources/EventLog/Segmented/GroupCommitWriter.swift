import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Writes a ``SegmentedLog`` by leader/follower group commit: queued appends are encoded into
/// batches, written with one `pwrite` and made durable with one `fdatasync`, then acknowledged
/// in position order.
///
/// Who writes (the *leader*) is decided per round, as SQLite's, RocksDB's and PostgreSQL's
/// group commits do:
/// - An appender that queued with ``AppendCommitter/caller``, finds no round in progress and
///   is appending alone (it made the last append, and no one met a round in progress since
///   the appenders last went quiet) leads a round itself, on its own thread
///   (``commitEnqueuedAppends()``): a lone synced writer pays for its `pwrite` and `fdatasync`
///   and nothing else — no thread hand-off, no wake-up.
/// - Appenders that arrive while a round is in progress queue and return; they are followers.
///   When the round ends with work queued, leadership passes to the writer thread, which keeps
///   leading while the queue refills; while several tasks append, their rounds stay there.
///   So at most one thread of the Swift concurrency pool blocks on the disk at a time, and
///   only while one task appends alone; a busy log's rounds run on a thread of their own while
///   the pool prepares the next appends. (Leading in turn would serialize appenders whenever
///   the pool is short of threads: each would sync alone before the next could even queue.)
/// - The writer thread also takes what must not wait for an appender: appends queued with
///   ``AppendCommitter/log``, `synchronize`, `close`, and the buffered policy's interval sync
///   (a timed wait needs a thread that is not an appender's: that is where it measurably wins).
///
/// The leader owns the fields under `// Leader only`; leadership is taken and released under
/// `condition`, which orders those fields' accesses between successive leaders.
final class GroupCommitWriter: @unchecked Sendable {
    typealias AppendCompletion = @Sendable (Result<Range<LogPosition>, LogError>) -> Void
    typealias Completion = @Sendable (Result<Void, LogError>) -> Void

    enum Request {
        /// Entries, their approximate encoded size, and the completion.
        case append([LogEntry], Int, AppendCompletion)
        case sync(Completion)
        case close(Completion)
    }

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var queue: [Request] = []
    private var accepting = true
    /// A round is in progress (by an appender or the writer thread).
    private var leading = false
    /// The thread leading the round, so that a completion that drops the last reference to the
    /// log (and so closes it) on that thread does not wait for itself.
    private var leaderThread: pthread_t?
    /// The writer thread must take the queue: a request for it, or a hand-off.
    private var writerTurn = false
    /// Buffered policy: when data written since the last sync must be synced.
    private var syncDeadline: ContinuousClock.Instant?
    /// The log is closed and the writer thread has left (or is leaving).
    private var stopped = false
    /// The task (or thread) that committed the last append: a caller leads only when it is
    /// the one that appended last, so that leadership stays with a task appending alone.
    private var lastAppender: Int?
    /// Appenders met a round in progress since the writer thread last led a round of one
    /// append: several tasks are appending, and rounds go to the writer thread.
    private var contended = false
    /// The writer thread, once it runs.
    private var writerThread: pthread_t?
    /// The writer thread waits with no deadline: a round that leaves unsynced data must wake it.
    private var writerSleepsUntimed = false

    // Leader only.
    private let core: LogCore
    /// The segment appends go to; its next position is the log's.
    private var active: Segment.Active
    private var poisoned: LogError?
    private var dirty = false
    private var lastSync = ContinuousClock.now
    private var output: [UInt8] = []
    private var scratch: [UInt8] = []
    private var batchBytes: [UInt8] = []

    private var configuration: SegmentedLog.Configuration { core.configuration }

    init(core: LogCore, active: Segment.Active) {
        self.core = core
        self.active = active
    }

    func start() {
        let thread = Thread { [self] in runWriterThread() }
        thread.name = Self.threadName
        thread.qualityOfService = .userInitiated
        thread.start()
    }

    static let threadName = "EventLog writer"

    /// Queues a request; after close, fails it at once.
    /// - Parameter writerCommits: Whether the writer thread must commit it; `false` for an
    ///   append whose caller promises to call ``commitEnqueuedAppends()`` next.
    func submit(_ request: Request, writerCommits: Bool = true) {
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
        if writerCommits && !writerTurn {
            writerTurn = true
            condition.signal()
        }
        condition.unlock()
    }

    /// Leads a round on the calling thread if requests are queued and no round is in progress;
    /// otherwise returns at once (the round in progress, or the writer thread after it, takes
    /// them).
    func commitEnqueuedAppends() {
        let appender = Self.currentAppender()
        condition.lock()
        let previousAppender = lastAppender
        lastAppender = appender
        if leading {
            contended = true
            condition.unlock()
            return
        }
        guard !queue.isEmpty else {
            condition.unlock()
            return
        }
        // A leader blocks its thread for a write and a sync. When one task appends alone that
        // is the whole point (no hand-off); when several do, they are better served by the
        // writer thread: if the pool is short of threads (one blocked elsewhere, as a benchmark
        // harness's own semaphore does), appenders that each led in turn would run one after
        // another, one sync each, never meeting in a round.
        if contended || previousAppender != appender {
            if !writerTurn {
                writerTurn = true
                condition.signal()
            }
            condition.unlock()
            return
        }
        let work = takeLeadership()
        condition.unlock()
        let closed = process(work)
        condition.lock()
        releaseLeadership(closed: closed, appends: work.count)
        condition.unlock()
    }

    /// Called when the log is released without `close()`: finishes queued work and stops.
    /// Closes the log for an owner that went away without closing (a store whose open failed
    /// after its log opened, say). `lock` is held until the close is done, and the caller waits
    /// for it, so that an immediate reopen finds the store closed and unlocked: never a
    /// closing writer still trimming the active segment. On the thread leading a round (a
    /// completion dropped the last reference) it cannot wait: the lock is then released by the
    /// close.
    func abandon(releasing lock: DirectoryLock?) {
        // By thread identity: Foundation's `Thread.name` is not the pthread's name on Linux.
        condition.lock()
        let me = pthread_self()
        let onLogThread = [leaderThread, writerThread].contains { $0.map { pthread_equal($0, me) != 0 } ?? false }
        condition.unlock()
        guard !onLogThread else {
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

    /// Whether no round is in progress (for tests that stage leaders and followers).
    var isIdle: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !leading
    }

    /// Whether the buffered policy has a sync due (for tests: a poisoned log has none).
    var hasSyncDue: Bool {
        condition.lock()
        defer { condition.unlock() }
        return syncDeadline != nil
    }

    /// Who is appending: the current task, or the thread outside any task.
    private static func currentAppender() -> Int {
        withUnsafeCurrentTask { task in task?.hashValue } ?? Int(bitPattern: UInt(pthread_self()))
    }

    // MARK: - Leadership (with `condition` held)

    private func takeLeadership() -> [Request] {
        leading = true
        leaderThread = pthread_self()
        writerTurn = false
        let work = queue
        queue.removeAll(keepingCapacity: true)
        return work
    }

    /// Ends a round: hands queued work to the writer thread and tells it when the buffered
    /// policy's next sync is due. Still the leader here, so reading `dirty` is safe.
    private func releaseLeadership(closed: Bool, appends: Int) {
        // A round of one append with nothing queued behind it: the appenders went quiet.
        if appends <= 1 && queue.isEmpty { contended = false }
        leading = false
        leaderThread = nil
        if closed { stopped = true }
        var wake = closed
        if case .buffered(let interval) = configuration.durability, dirty {
            syncDeadline = lastSync.advanced(by: interval)
            // Only a writer asleep without a deadline needs telling; a timed wait finds it.
            if writerSleepsUntimed { wake = true }
        } else {
            syncDeadline = nil
        }
        if !queue.isEmpty {
            // The writer may have been told already and gone back to sleep seeing this round.
            writerTurn = true
            wake = true
        }
        if wake { condition.signal() }
    }

    // MARK: - Writer thread

    private func runWriterThread() {
        condition.lock()
        writerThread = pthread_self()
        while !stopped {
            if !leading && writerTurn && !queue.isEmpty {
                let work = takeLeadership()
                condition.unlock()
                let closed = process(work)
                condition.lock()
                releaseLeadership(closed: closed, appends: work.count)
                continue
            }
            if !leading && writerTurn { writerTurn = false }  // an appender took the queue
            if !leading, let deadline = syncDeadline, ContinuousClock.now >= deadline {
                leading = true
                leaderThread = pthread_self()
                condition.unlock()
                _ = syncIfDirty()
                condition.lock()
                releaseLeadership(closed: false, appends: 0)
                continue
            }
            if let deadline = syncDeadline, !leading {
                // A timed wait may return early: the loop re-checks the deadline, so that no
                // sync comes before the interval (the policy batches syncs; tests count them).
                let remaining = deadline - ContinuousClock.now
                let seconds = Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18
                _ = condition.wait(until: Date(timeIntervalSinceNow: max(0, seconds)))
            } else {
                writerSleepsUntimed = true
                condition.wait()
                writerSleepsUntimed = false
            }
        }
        condition.unlock()
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
            appends: acknowledged.count, records: published.reduce(0) { $0 + Int($1.recordCount) },
            bytes: output.count, sync: syncDuration)
        for (completion, range) in acknowledged { completion(.success(range)) }
        return true
    }

    private func failRemaining(_ appends: ArraySlice<(entries: [LogEntry], bytes: Int, completion: AppendCompletion)>) {
        let error = poisonedError(poisoned ?? LogError(.io, "write failed"))
        for append in appends { append.completion(.failure(error)) }
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

    private func syncIfDirty() -> Result<Void, LogError> {
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
