import Foundation
import Testing
@testable import EventLog
@testable import EventKernel
import EventKernelTestSupport

/// `EventStore.consumer(named:startingAt:options:waitingForLease:)` on a store directory: it
/// waits while another holder has the consumer's lock file (as `tail --consumer` does), takes it
/// once released, and stops on cancellation and on the store's close.
@Suite("Consumers: waiting for a consumer another holder has")
struct ConsumerLeaseWaitTests {
    @Test("waits while another holder has the lock file, then takes the consumer at its committed position")
    func waitsThenTakes() async throws {
        let directory = TemporaryDirectory("ek-consumer-wait")
        let store = try EventStore.open(at: directory.url, snapshotPolicy: .never)
        try await appendCounted(store, 5)
        try await store.consumer(named: "mail").commit(through: 2)
        try await store.close()

        let reopened = try EventStore.open(at: directory.url, snapshotPolicy: .never)
        let other = try ConsumerLock(consumer: "mail", in: ConsumerDirectory(storeDirectory: directory.url))
        #expect(throws: ConsumerError.self) { try reopened.consumer(named: "mail") }
        let taken = TestFlag()
        let waiting = Task {
            let consumer = try await reopened.consumer(named: "mail", waitingForLease: .milliseconds(20))
            taken.set()
            return consumer
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(!taken.isSet, "took a consumer another holder has")
        other.release()
        let consumer = try await waiting.value
        #expect(consumer.committed == 3)
        try await reopened.close()
    }

    @Test("a wait ends with CancellationError when its task is cancelled, and with RepositoryError.closed when the store closes")
    func cancelAndClose() async throws {
        let directory = TemporaryDirectory("ek-consumer-wait-end")
        let store = try EventStore.open(at: directory.url, snapshotPolicy: .never)
        let other = try ConsumerLock(consumer: "mail", in: ConsumerDirectory(storeDirectory: directory.url))
        let cancelled = Task { try await store.consumer(named: "mail", waitingForLease: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(50))
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }

        let closing = Task { try await store.consumer(named: "mail", waitingForLease: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(50))
        try await store.close()
        await #expect(throws: RepositoryError.closed) { try await closing.value }
        other.release()
        // Nor does a closed store open one without waiting: it would keep its lock.
        #expect(throws: RepositoryError.closed) { try store.consumer(named: "mail") }
        #expect(try ConsumerDirectory(storeDirectory: directory.url).lock(consumer: "mail") != nil)
    }
}
