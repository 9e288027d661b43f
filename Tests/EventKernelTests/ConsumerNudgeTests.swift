import Foundation
import Synchronization
import Testing
@testable import EventKernel
import EventKernelTestSupport

/// A run caught up with the log waits for the next commit; what no commit announces (a reset, a
/// retry request made in the process) nudges it instead, and nothing else does.
@Suite("Consumer nudges")
struct ConsumerNudgeTests {
    /// A reset while the run waits: it reads from the new position at once, with no new
    /// event appended (it used to sit until the next commit).
    @Test func aResetWakesAnIdleRunWhichReadsFromTheNewPosition() async throws {
        let store = try EventStore.inMemory()
        try await appendCounted(store, 12)
        let consumer = try store.consumer(named: "index", options: ConsumerOptions(commitInterval: .zero))
        let seen = Seen()
        let run = Task { try await consumer.run { batch in seen.add(batch.map(\.position)) } }
        #expect(try await eventually { consumer.committed == 12 && store.commitSignal.waiterCount == 1 })
        try consumer.reset(to: .position(4))
        #expect(try await eventually { seen.positions.count == 20 }, "the reset run handled \(seen.positions)")
        #expect(seen.positions == Array(0..<12) + Array(4..<12))
        #expect(try await eventually { consumer.committed == 12 })
        run.cancel()
        try await run.value
        try await store.close()
    }

    /// A retry request while the run waits: served at once, with no new event appended.
    @Test func aRetryRequestWakesAnIdleRun() async throws {
        let store = try EventStore.inMemory()
        try await appendCounted(store, 10)
        let consumer = try store.consumer(named: "index", options: ConsumerOptions(retry: quickRetry, commitInterval: .zero))
        let refusing = Mutex(true)
        let seen = Seen()
        let run = Task {
            try await consumer.run(batchSize: 4) { batch in
                if refusing.withLock({ $0 }), batch.contains(where: { $0.position == 6 }) { throw Refused(position: 6) }
                seen.add(batch.map(\.position))
            }
        }
        #expect(try await eventually { (try? consumer.parked().map(\.position)) == [6] && consumer.committed == 10 && store.commitSignal.waiterCount == 1 })
        refusing.withLock { $0 = false }
        try consumer.requestRetry(ofParkedAt: 6)
        #expect(try await eventually { (try? consumer.parked())?.isEmpty == true }, "the request waits for a commit")
        #expect(seen.positions.last == 6)
        #expect(store.nextPosition == 10, "nothing was appended")
        run.cancel()
        try await run.value
        try await store.close()
    }

    /// Nudged while it waits out its commit interval with handled events pending, the run
    /// still commits them when the interval ends (it does not go on to a wait with no timeout).
    @Test func aNudgeKeepsThePendingCommitsTiming() async throws {
        let store = try EventStore.inMemory()
        try await appendCounted(store, 5)
        let consumer = try store.consumer(named: "index", options: ConsumerOptions(commitInterval: .seconds(3)))
        let seen = Seen()
        let run = Task { try await consumer.run { batch in seen.add(batch.map(\.position)) } }
        #expect(try await eventually { seen.positions.count == 5 && store.commitSignal.waiterCount == 1 })
        // Nothing parked: the request marks nothing, but it nudges the run, which must be in
        // its timed wait still (not on a machine so loaded that the interval passed already:
        // then there is nothing to check).
        let pending = consumer.committed == 0
        #expect(try consumer.requestRetryOfAllParked() == 0)
        guard pending else {
            run.cancel()
            try await run.value
            try await store.close()
            return
        }
        #expect(try await eventually { consumer.committed == 5 }, "the pending events were not committed by the interval")
        #expect(seen.positions == Array(0..<5))
        run.cancel()
        try await run.value
        try await store.close()
    }

    /// Closing the consumer ends its idle run at once, with nothing appended (it used to wait
    /// for the next commit to notice).
    @Test func closingAConsumerEndsItsIdleRun() async throws {
        let store = try EventStore.inMemory()
        try await appendCounted(store, 3)
        let consumer = try store.consumer(named: "index", options: ConsumerOptions(commitInterval: .zero))
        let ended = Atomic<Bool>(false)
        let run = Task {
            try await consumer.run { _ in }
            ended.store(true, ordering: .relaxed)
        }
        #expect(try await eventually { consumer.committed == 3 && store.commitSignal.waiterCount == 1 })
        consumer.close()
        #expect(try await eventually { ended.load(ordering: .relaxed) }, "the closed consumer's run still waits")
        try await run.value
        #expect(store.commitSignal.waiterCount == 0)
        try await store.close()
    }

    /// A nudge reaches its own key's waiter only, wakes it at most once, and one made before the
    /// wait is kept for it; a commit past the position wins over a pending nudge, which stays.
    @Test func aNudgeWakesItsOwnKeyOnceAndIsKeptUntilTaken() async {
        let signal = CommitSignal()
        let mine = signal.makeKey(), other = signal.makeKey()
        signal.nudge(mine)
        #expect(await signal.wait(forCommitOf: 0, timeout: .seconds(30), nudgedAs: mine) == .nudged)
        #expect(await signal.wait(forCommitOf: 0, timeout: .milliseconds(20), nudgedAs: mine) == .ended, "taken once")
        signal.nudge(other)
        #expect(await signal.wait(forCommitOf: 0, timeout: .milliseconds(20), nudgedAs: mine) == .ended, "another key's nudge")
        signal.forget(other)
        #expect(signal.pendingNudgeCount == 0)
        signal.nudge(mine)
        signal.advance(to: 1)
        #expect(await signal.wait(forCommitOf: 0, timeout: .seconds(30), nudgedAs: mine) == .committed)
        #expect(await signal.wait(forCommitOf: 1, timeout: .seconds(30), nudgedAs: mine) == .nudged, "kept for the next wait")
        // A waiter without a key is never nudged.
        let plain = Task { await signal.wait(forCommitOf: 1, timeout: .milliseconds(50)) }
        signal.nudge(mine)
        #expect(await plain.value == .ended)
        signal.forget(mine)
        signal.close()
        #expect(await signal.wait(forCommitOf: 5, nudgedAs: mine) == .ended)
    }

    /// Nudges racing waits, thousands of times: every nudge made after a waiter took its key
    /// ends a wait (before it starts or while it waits), none is lost, none wakes twice.
    @Test func nudgesRacingWaitsAreNeverLost() async {
        let signal = CommitSignal()
        for round in 0..<2_000 {
            let key = signal.makeKey()
            // Timed, so that a lost nudge fails the round instead of hanging the suite.
            async let outcome = signal.wait(forCommitOf: 0, timeout: .seconds(30), nudgedAs: key)
            if round % 3 == 0 { await Task.yield() }
            signal.nudge(key)
            #expect(await outcome == .nudged, "round \(round)")
            #expect(signal.pendingNudgeCount == 0)
            signal.forget(key)
        }
        // A key whose run ended (forgotten) keeps no nudge.
        let ended = signal.makeKey()
        signal.forget(ended)
        signal.nudge(ended)
        #expect(signal.pendingNudgeCount == 0)
        #expect(signal.waiterCount == 0)
    }
}
