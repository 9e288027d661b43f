@testable import EventLog
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
import EventKernelTestSupport

/// Leader/follower group commit, made deterministic by holding the leader inside its
/// `fdatasync` (``FaultInjectingFileIO/holdNextDataSync()``) while followers arrive.
@Suite("Group commit: leaders and followers")
struct GroupCommitTests {
    /// What the completions of one test saw, in the order they ran.
    final class Completions: Sendable {
        let results = Mutex<[(tag: Int, result: Result<Range<LogPosition>, LogError>)]>([])
        var count: Int { results.withLock { $0.count } }

        func record(_ tag: Int) -> @Sendable (Result<Range<LogPosition>, LogError>) -> Void {
            { result in self.results.withLock { $0.append((tag, result)) } }
        }

        /// Waits (polling; completions run on the log's threads) until `n` completions ran.
        func wait(for n: Int) async throws {
            _ = try await eventually(every: .milliseconds(1)) { count >= n }
            #expect(count == n, "\(count) of \(n) completions ran")
        }
    }

    /// Runs `body` on a thread of its own; returns that thread's identity once it started.
    static func onThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
        let identity = Mutex<pthread_t?>(nil)
        let started = DispatchSemaphore(value: 0)
        Thread {
            identity.withLock { $0 = pthread_self() }
            started.signal()
            body()
        }.start()
        started.wait()
        return identity.withLock { $0! }
    }

    static func openLog(_ dir: TemporaryDirectory) throws -> (SegmentedLog, FaultInjectingFileIO) {
        let io = FaultInjectingFileIO()
        var configuration = SegmentedLog.Configuration()
        configuration.fileIO = io
        return (try SegmentedLog.open(at: dir.url, configuration: configuration), io)
    }

    /// Enqueues appends `tags` from the calling thread while a leader is mid-sync: each commit
    /// call must return at once, as a follower's does.
    static func follow(_ log: SegmentedLog, _ tags: ClosedRange<Int>, _ completions: Completions, entries: (Int) -> [LogEntry]) {
        for tag in tags {
            log.enqueueAppend(entries(tag), committer: .caller, completion: completions.record(tag))
            log.commitEnqueuedAppends()
        }
    }

    /// Starts a thread that appends once (the log meets a new appender: the writer thread
    /// commits that), then appends `entry(0)` as the leader of a round and holds inside its
    /// `fdatasync` (failing it with `EIO` when released, if `failing`). Returns the thread once
    /// it is held there.
    static func leaderAfterWarmUp(
        _ log: SegmentedLog, io: FaultInjectingFileIO, failing: Bool = false,
        completion: @escaping @Sendable (Result<Range<LogPosition>, LogError>) -> Void
    ) -> pthread_t {
        let warmedUp = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let thread = onThread {
            log.enqueueAppend([entry(-1)], committer: .caller) { _ in warmedUp.signal() }
            log.commitEnqueuedAppends()
            go.wait()
            // The writer thread calls the completion inside its round: wait for the round to
            // end, or this append would meet it and follow.
            while !log.writer!.isIdle { usleep(100) }
            log.enqueueAppend([entry(0)], committer: .caller, completion: completion)
            log.commitEnqueuedAppends()
        }
        warmedUp.wait()
        if failing { io.inject(.error(EIO), on: .dataSync) }
        let entered = io.holdNextDataSync()
        go.signal()
        entered.wait()
        return thread
    }

    @Test("a lone appender writes and syncs its batch on its own thread, completing before it returns")
    func loneAppenderLeads() async throws {
        let dir = TemporaryDirectory("group-commit")
        let (log, io) = try Self.openLog(dir)
        let completions = Completions()
        let returned = DispatchSemaphore(value: 0)
        let countAtReturn = Atomic<Int>(-1)
        let appender = Self.onThread {
            // The first append goes to the writer thread: the log has not seen this appender.
            let first = DispatchSemaphore(value: 0)
            log.enqueueAppend([entry(99)], committer: .caller) { _ in first.signal() }
            log.commitEnqueuedAppends()
            first.wait()
            while !log.writer!.isIdle { usleep(100) }
            for i in 0..<3 {
                log.enqueueAppend([entry(i)], committer: .caller, completion: completions.record(i))
                log.commitEnqueuedAppends()
            }
            countAtReturn.store(completions.count, ordering: .relaxed)
            returned.signal()
        }
        returned.wait()
        #expect(countAtReturn.load(ordering: .relaxed) == 3, "each commit completes its own append before returning")
        let threads = io.dataSyncThreads.dropFirst()
        #expect(threads.count == 3 && threads.allSatisfy { pthread_equal($0, appender) != 0 }, "no hand-off to another thread")
        #expect(log.statistics.dataSyncs == 4)
        try await log.close()
    }

    @Test("appenders arriving during a leader's sync follow: one write and one sync take them all, completions in position order")
    func followersShareTheNextRound() async throws {
        let dir = TemporaryDirectory("group-commit")
        let (log, io) = try Self.openLog(dir)
        let completions = Completions()
        let leader = Self.leaderAfterWarmUp(log, io: io, completion: completions.record(0))
        let follower = pthread_self()
        Self.follow(log, 1...20, completions) { [entry($0), entry(1000 + $0)] }
        #expect(completions.count == 0, "nothing is acknowledged before the leader's sync returns")
        io.releaseHeldSync()
        try await completions.wait(for: 21)
        let seen = completions.results.withLock { $0 }
        #expect(seen.map(\.tag) == Array(0...20), "completions run in the order of enqueueing")
        var next: LogPosition = 1  // after the warm-up
        for (tag, result) in seen {
            let range = try result.get()
            #expect(range.lowerBound == next && range.count == (tag == 0 ? 1 : 2), "append \(tag) got \(range)")
            next = range.upperBound
        }
        let stats = log.statistics
        #expect(stats.dataSyncs == 3 && stats.batchesWritten == 3, "the followers share one round: \(stats)")
        let threads = Array(io.dataSyncThreads.dropFirst())  // after the warm-up
        #expect(threads.count == 2 && pthread_equal(threads[0], leader) != 0, "the leader syncs on its own thread")
        #expect(threads.count == 2 && pthread_equal(threads[1], leader) == 0 && pthread_equal(threads[1], follower) == 0,
                "the round after it goes to the writer thread, not back to an appender")
        let records = try allRecords(log)
        #expect(records.count == 42)
        try await log.close()
    }

    @Test("a failed sync fails its leader and every follower waiting behind it; none is ever acknowledged")
    func failedLeaderSyncFailsFollowers() async throws {
        let dir = TemporaryDirectory("group-commit")
        do {
            let (log, io) = try Self.openLog(dir)
            let completions = Completions()
            _ = Self.leaderAfterWarmUp(log, io: io, failing: true, completion: completions.record(0))
            Self.follow(log, 1...10, completions) { [entry($0)] }
            io.releaseHeldSync()
            try await completions.wait(for: 11)
            let seen = completions.results.withLock { $0 }
            #expect(seen.map(\.tag) == Array(0...10))
            for (tag, result) in seen {
                guard case .failure(let error) = result else {
                    Issue.record("append \(tag) was acknowledged after its leader's sync failed")
                    continue
                }
                #expect(error.code == (tag == 0 ? .io : .poisoned), "append \(tag): \(error)")
            }
            _ = try? await log.close()
        }
        // The leader's batch was written before its sync failed: it may be on disk (never
        // acknowledged). The followers' were never written.
        let reopened = try SegmentedLog.open(at: dir.url)
        let records = try allRecords(reopened)
        #expect(records.first?.payload == entry(-1).payload, "the warm-up append was acknowledged")
        #expect(records.count <= 2 && records.dropFirst().allSatisfy { $0.payload == entry(0).payload })
        try await reopened.close()
    }

    @Test("many tasks and a commit in progress: positions gap-free, each task's appends in its order", arguments: [1, 8, 64])
    func concurrentTasks(tasks: Int) async throws {
        let dir = TemporaryDirectory("group-commit")
        let log = try SegmentedLog.open(at: dir.url)
        let perTask = 2_000 / tasks
        let positions = try await withThrowingTaskGroup(of: [LogPosition].self) { group in
            for t in 0..<tasks {
                group.addTask {
                    var mine: [LogPosition] = []
                    for i in 0..<perTask { mine.append(try await log.append(entry(t * 100_000 + i))) }
                    return mine
                }
            }
            var all: [LogPosition] = []
            for try await part in group {
                #expect(part == part.sorted(), "a task's appends got positions out of its order")
                all += part
            }
            return all
        }
        #expect(positions.sorted() == Array(0..<LogPosition(tasks * perTask)))
        #expect(log.statistics.appendsAcknowledged == tasks * perTask)
        try await log.close()
    }
}
