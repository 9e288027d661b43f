import Foundation
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
/// `condition`, which orders those fields' accesses between successive leaders. This file
/// decides who leads; how a round executes is `GroupCommitWriter+Round.swift`.
final class GroupCommitWriter: @unchecked Sendable {
    typealias AppendCompletion = @Sendable (Result<Range<LogPosition>, LogError>) -> Void
    typealias Completion = @Sendable (Result<Void, LogError>) -> Void

    enum Request {
        /// Entries, their approximate encoded size, and the completion.
        case append([LogEntry], Int, AppendCompletion)
        case sync(Completion)
        case close(Completion)
        /// Seal the active segment (after the appends queued before) unless it holds nothing.
        case seal(Completion)
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

    // Leader only (not private: the round, in GroupCommitWriter+Round.swift, works on them).
    let core: LogCore
    /// The segment appends go to; its next position is the log's.
    var active: Segment.Active
    var poisoned: LogError?
    var dirty = false
    var lastSync = ContinuousClock.now
    var output: [UInt8] = []
    var scratch: [UInt8] = []
    var batchBytes: [UInt8] = []

    var configuration: SegmentedLog.Configuration { core.configuration }

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
            case .seal(let completion): completion(.failure(closed))
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
}
