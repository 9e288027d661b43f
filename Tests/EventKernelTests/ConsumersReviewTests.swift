import Foundation
import Synchronization
import Testing
@testable import EventLog
@testable import EventKernel
import EventKernelTestSupport

/// The defects of the consumers review (Docs/Consumers.md), each with the test that fails without its fix.
@Suite("Consumers: review fixes")
struct ConsumersReviewTests {
    // B: a checkpoint is bound to its log's history.
    @Test func aCheckpointLeftBehindByACutIsNotUsedEvenOnceTheLogGrewPastIt() async throws {
        let directory = TemporaryDirectory("ek-consumers-cut")
        let before = TemporaryDirectory("ek-consumers-cut-copy")
        var store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 9)
        try await store.close()
        // The history without event 9, as a cut (a repair, a lost unsynced tail) leaves it.
        try FileManager.default.removeItem(at: before.url)
        try FileManager.default.copyItem(at: directory.url, to: before.url)
        store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 1, prefix: "lost")
        try await store.consumer(named: "index").commit(through: 9)
        try await store.close()
        try FileManager.default.copyItem(at: directory.file("consumers"), to: before.file("consumers"))

        // The cut log grows past the checkpoint again before the consumer opens.
        store = try EventStore.open(at: before.url, snapshotPolicy: .never)
        try await appendCounted(store, 5, prefix: "new")
        let consumer = try store.consumer(named: "index")
        #expect(consumer.committed == 10)
        var iterator = consumer.events().makeAsyncIterator()
        await #expect {
            try await iterator.next()
        } throws: { error in
            guard case ConsumerError.checkpointOffHistory(let name, let committed, let reason) = error else { return false }
            return name == "index" && committed == 10 && reason.contains("position 9")
        }
        await #expect(throws: ConsumerError.self) { try await consumer.run { _ in } }
        await #expect(throws: ConsumerError.self) { try await consumer.commit(through: 12) }
        // A reset is the way on; it delivers the new event at 9.
        try consumer.reset(to: .position(9))
        iterator = consumer.events().makeAsyncIterator()
        #expect(try await iterator.next()?.stream == counted("new0"))
        try await store.close()
    }

    @Test func aCheckpointStaysValidWhenTheLogIsCutOnlyAfterIt() async throws {
        let directory = TemporaryDirectory("ek-consumers-epoch")
        var store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 5)
        try await store.consumer(named: "a").commit(through: 2)
        try await store.close()
        _ = try SegmentedLog.startNewHistoryEpoch(at: directory.url)
        store = try consumerTestStore(at: directory.url)
        var iterator = try store.consumer(named: "a").events().makeAsyncIterator()
        #expect(try await iterator.next()?.position == 3)
        try await store.close()
    }

    // B: under buffered durability a commit never covers events a crash could take away.
    @Test func aCommitUnderBufferedDurabilitySyncsTheLogFirst() async throws {
        let directory = TemporaryDirectory("ek-consumers-buffered")
        let io = WatchedFileIO()
        let store = try consumerTestStore(at: directory.url, io: io, durability: .buffered(syncInterval: .seconds(3600)))
        try await appendCounted(store, 3)
        let consumer = try store.consumer(named: "durable")
        let syncsBefore = io.dataSyncs.load(ordering: .relaxed)
        try await consumer.commit(through: 2)
        #expect(io.dataSyncs.load(ordering: .relaxed) > syncsBefore)
        try await store.close()
    }

    // D: one consumer per name per store, locked against other processes.
    @Test func aNameIsOneConsumerPerStoreAndItsLockKeepsOthersOut() async throws {
        let directory = TemporaryDirectory("ek-consumers-one")
        let store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 3)
        let first = try store.consumer(named: "mail", options: ConsumerOptions(retry: quickRetry))
        let second = try store.consumer(named: "mail", startingAt: .end, options: ConsumerOptions(retry: quickRetry))
        #expect(first === second)
        #expect(throws: ConsumerError.openWithOtherOptions(consumer: "mail")) { try store.consumer(named: "mail") }
        // Parks through one handle and skips through the other cannot lose each other's change.
        try first.park([ParkedEvent(position: 1, stream: "s", eventType: "t", errorType: "E", error: "e", attempts: 1, parkedAt: .now())])
        try second.park([ParkedEvent(position: 2, stream: "s", eventType: "t", errorType: "E", error: "e", attempts: 1, parkedAt: .now())])
        try first.skipParked(at: 1)
        #expect(try second.parked().map(\.position) == [2])
        // Another holder (here a second open of the lock file, as the CLI takes it) is refused.
        let consumers = ConsumerDirectory(storeDirectory: directory.url)
        #expect(throws: ConsumerError.inUse(consumer: "mail", path: directory.file("consumers/mail.lock").path)) {
            try ConsumerLock(consumer: "mail", in: consumers)
        }
        try await store.close()
        _ = try ConsumerLock(consumer: "mail", in: consumers)
    }

    @Test func temporaryNamesAreUniqueAndTheStoresOwn() {
        let a = ConsumerFiles.temporaryFile(for: "mail.checkpoint")
        let b = ConsumerFiles.temporaryFile(for: "mail.checkpoint")
        #expect(a != b)
        #expect(ConsumerFiles.isOwnedFile(a) && ConsumerFiles.isOwnedFile(b))
        #expect(ConsumerFiles.isOwnedFile(".mail.checkpoint.tmp"))
        #expect(ConsumerFiles.isOwnedFile("mail.lock"))
        #expect(!ConsumerFiles.isOwnedFile(".notes.txt.1-1.tmp"))
        #expect(ConsumerFiles.consumerName(ofFile: "mail.lock") == nil)
    }

    // Memory: the events a batch parks are written in one replacement of the parked list.
    @Test func theEventsABatchParksAreWrittenOnce() async throws {
        let directory = TemporaryDirectory("ek-consumers-parkbatch")
        let io = WatchedFileIO()
        let store = try consumerTestStore(at: directory.url, io: io)
        try await appendCounted(store, 8)
        let consumer = try store.consumer(named: "picky", options: ConsumerOptions(retry: RetryPolicy(maxAttempts: 1)))
        try await runUntil(consumer, batchSize: 8, seen: Seen(), { consumer.committed == 8 }) { batch in
            if batch.contains(where: { $0.position % 2 == 1 }) { throw Refused(position: batch[0].position) }
        }
        #expect(try consumer.parked().map(\.position) == [1, 3, 5, 7])
        #expect(io.synced.withLock { $0.filter { $0.contains("picky.parked") }.count } == 1)
        try await store.close()
    }

    // E: the store directory is synced once `consumers/` is created in it.
    @Test func creatingTheConsumersDirectorySyncsTheStoreDirectory() async throws {
        let directory = TemporaryDirectory("ek-consumers-dirsync")
        let io = WatchedFileIO()
        let store = try consumerTestStore(at: directory.url, io: io)
        io.synced.withLock { $0.removeAll() }
        _ = try store.consumer(named: "first")
        let storePath = directory.url.path
        #expect(io.synced.withLock { $0.contains { $0 == storePath || $0 == storePath + "/" } })
        try await store.close()
    }

    // F: a failed final sync still ends the consumers waiting on the store.
    @Test func aFailedSyncAtCloseStillEndsWaitingConsumers() async throws {
        let directory = TemporaryDirectory("ek-consumers-close")
        let io = WatchedFileIO()
        let store = try consumerTestStore(at: directory.url, io: io, durability: .buffered(syncInterval: .seconds(3600)))
        let consumer = try store.consumer(named: "waiting", options: ConsumerOptions(checkpoint: .handler))
        let ended = Atomic<Bool>(false)
        let task = Task {
            for try await _ in consumer.events() {}
            ended.store(true, ordering: .relaxed)
        }
        #expect(try await eventually { store.commitSignal.waiterCount == 1 })
        try await appendCounted(store, 1)
        io.failDataSyncs.store(true, ordering: .relaxed)
        await #expect(throws: RepositoryError.self) { try await store.close() }
        #expect(try await eventually(within: .seconds(5)) { ended.load(ordering: .relaxed) })
        task.cancel()
        try await task.value
    }
}
