import Foundation
import Synchronization
import Testing
@testable import EventKernel
import EventKernelTestSupport

/// A commit's events are prepared (decoded, upcast, keyed: the domain's code) before the store's
/// commit lock is taken. A projection registered, or switched by a rebuild, between that and
/// the fold used to prepare them itself, under the lock; now the store leaves the lock,
/// prepares them and comes back.
@Suite("Preparing outside the commit lock")
struct PreparingOutsideTheLockTests {
    /// Whether the store's commit lock is free (no other thread takes it in these tests: a held
    /// lock is the preparing thread's own).
    static func commitLockIsFree(_ store: EventStore) -> Bool { !store.commit.isHeld }

    /// Runs an action inside a projection's first preparation of a commit: there, between the
    /// store's prepare and its fold, on the committing thread (no second thread, so no wait).
    final class Gate: Sendable {
        private let action = Mutex<(@Sendable () throws -> Void)?>(nil)
        private let ran = Atomic<Bool>(false)
        /// Sets what the next preparation runs.
        func set(_ body: @escaping @Sendable () throws -> Void) { action.withLock { $0 = body } }
        /// Runs the action once.
        func pass() {
            guard let body = action.withLock({ let body = $0; $0 = nil; return body }) else { return }
            do {
                try body()
                ran.store(true, ordering: .relaxed)
            } catch {
                Issue.record(error)
            }
        }
        /// Whether the action ran (and did not throw).
        var didRun: Bool { ran.load(ordering: .relaxed) }
    }

    /// Counts preparations that ran while the commit lock was held.
    final class Counter: Sendable {
        private let count = Atomic<Int>(0)
        func add() { count.add(1, ordering: .relaxed) }
        var value: Int { count.load(ordering: .relaxed) }
    }

    /// A projection counting events, whose preparation records whether the commit lock was
    /// free while it ran; `gate`, when given, runs its action in the first preparation.
    static func counting(_ name: String, store: @escaping @Sendable () -> EventStore?, gate: Gate? = nil,
                         underLock: Counter) -> ProjectedState<Int> {
        ProjectedState<Int>(
            name: name, schemaVersion: 1, initial: 0,
            encode: { Array(String($0).utf8) }, decode: { Int(String(decoding: $0, as: UTF8.self)) ?? 0 },
            prepare: { envelope -> Int in
                gate?.pass()
                if let store = store(), !commitLockIsFree(store) { underLock.add() }
                return 1
            },
            fold: { state, _, one in state += one })
    }

    @Test func aProjectionRegisteredBetweenPrepareAndFoldIsPreparedOutsideTheLock() async throws {
        let store = try EventStore.inMemory()
        let underLock = Counter()
        let gate = Gate()
        let first = Self.counting("first", store: { () -> EventStore? in nil }, gate: gate, underLock: underLock)
        try store.register(first)
        // Registered while the commit's events are prepared for `first` (the log is empty
        // below the commit, so its catch-up prepares nothing).
        let late = Self.counting("late", store: { [store] in store }, underLock: underLock)
        gate.set { try store.register(late) }
        try await appendCounted(store, 1)
        #expect(gate.didRun)
        #expect(late.state == 1 && first.state == 1, "both projections folded the commit")
        #expect(underLock.value == 0, "the late projection prepared the commit under the commit lock")
        try await appendCounted(store, 3)
        #expect(late.state == 4 && first.state == 4)
        #expect(underLock.value == 0)
        try await store.close()
    }

    @Test func aProjectionRebuiltBetweenPrepareAndFoldIsPreparedOutsideTheLock() async throws {
        let store = try EventStore.inMemory()
        let underLock = Counter()
        let gate = Gate()
        let current = Self.counting("counted", store: { () -> EventStore? in nil }, gate: gate, underLock: underLock)
        try store.register(current)
        // Switched to a new definition while the commit is prepared by the old one, as a
        // rebuild's switch does it (under the commit lock; neither version has folded
        // anything): the fold must prepare with the new one, and outside the lock.
        let fresh = Self.counting("counted", store: { [store] in store }, underLock: underLock)
        gate.set { store.commit.withLock { _ in current.replaceState(with: fresh) } }
        try await appendCounted(store, 1)
        #expect(gate.didRun)
        #expect(current.state == 1)
        #expect(underLock.value == 0, "the new definition prepared the commit under the commit lock")
        try await store.close()
    }

    /// The same on a shared log, for the events another instance appended (the follower's
    /// fold, `refresh()`): a projection registered while they are prepared gets them prepared
    /// outside the lock.
    @Test func aProjectionRegisteredWhileAnotherInstancesEventsArePreparedIsPreparedOutsideTheLock() async throws {
        let server = SharedMemoryServer()
        let writer = try EventStore(log: SharedMemoryLog(server), directory: nil)
        let reader = try EventStore(log: SharedMemoryLog(server, notified: false), directory: nil)
        let underLock = Counter()
        let gate = Gate()
        let first = Self.counting("first", store: { () -> EventStore? in nil }, gate: gate, underLock: underLock)
        try reader.register(first)
        let late = Self.counting("late", store: { [reader] in reader }, underLock: underLock)
        gate.set { try reader.register(late) }
        try await appendCounted(writer, 2)
        #expect(try reader.refresh() == 2)
        #expect(gate.didRun)
        #expect(late.state == 2 && first.state == 2, "both projections folded the other instance's events")
        #expect(underLock.value == 0, "the late projection prepared them under the commit lock")
        try await writer.close()
        try await reader.close()
    }
}
