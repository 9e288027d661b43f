import Foundation
import Synchronization
import Testing
@testable import EventLog
@testable import EventKernel
import EventKernelTestSupport
import KernelPrimitives

/// A log (in memory unless given one) that records the range of every read asked of it.
final class ReadWatchingLog: RecordLog {
    let base: any RecordLog
    /// The (from, through) of each `forEachRecord(from:through:)` call.
    let reads = Mutex<[ClosedRange<UInt64>]>([])
    init(base: any RecordLog = InMemoryLog()) { self.base = base }
    func batchStart(containing position: LogPosition) -> LogPosition? { base.batchStart(containing: position) }
    func firstCompactedPosition(in range: Range<LogPosition>) throws -> LogPosition? { try base.firstCompactedPosition(in: range) }
    var bounds: LogBounds { base.bounds }
    var access: LogAccess { base.access }
    var fileIO: any LogFileIO { base.fileIO }
    var historyEpoch: UInt64 { base.historyEpoch }
    var localSegments: SegmentedLog? { base.localSegments }
    func append(_ entries: [LogEntry]) async throws -> Range<LogPosition> { try await base.append(entries) }
    func enqueueAppend(_ entries: [LogEntry], committer: AppendCommitter,
                       completion: @escaping @Sendable (Result<Range<LogPosition>, LogError>) -> Void) {
        base.enqueueAppend(entries, committer: committer, completion: completion)
    }
    func commitEnqueuedAppends() { base.commitEnqueuedAppends() }
    func forEachRecord(from start: LogPosition, through end: LogPosition?, _ body: (LogRecordView) throws -> Bool) throws {
        reads.withLock { $0.append(start...(end ?? .max)) }
        try base.forEachRecord(from: start, through: end, body)
    }
    func forEachRecord(timestampsIn range: ClosedRange<LogTimestamp>, _ body: (LogRecordView) throws -> Bool) throws {
        try base.forEachRecord(timestampsIn: range, body)
    }
    func synchronize() async throws { try await base.synchronize() }
    func close() async throws { try await base.close() }
}

@Suite("Consumers")
struct ConsumersTests {
    @Test func catchUpThenLiveWithConcurrentAppendersDeliversEveryEventOnceInOrder() async throws {
        let directory = TemporaryDirectory("ek-consumers")
        let store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 300)
        let consumer = try store.consumer(named: "orders.v1", options: ConsumerOptions(readBatchSize: 16))
        let seen = Seen()
        let writers = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for w in 0..<8 { group.addTask { try await appendCounted(store, 100, prefix: "w\(w)-") } }
                try await group.waitForAll()
            }
        }
        try await runUntil(consumer, seen: seen) { seen.positions.count >= 1100 }
        try await writers.value
        #expect(seen.positions == Array(0..<1100))
        #expect(consumer.committed == 1100)
        #expect(consumer.lag == 0)
        try await store.close()
    }

    @Test func eventsYieldsFromTheCommittedPositionAndCommitIsDurable() async throws {
        let directory = TemporaryDirectory("ek-consumers")
        var store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 10)
        var consumer = try store.consumer(named: "audit")
        var iterator = consumer.events().makeAsyncIterator()
        for expected in 0..<4 as Range<UInt64> { #expect(try await iterator.next()?.position == expected) }
        try await consumer.commit(through: 3)
        // A commit never goes backwards.
        try await consumer.commit(through: 1)
        #expect(consumer.committed == 4)
        await #expect(throws: ConsumerError.positionOutOfRange(consumer: "audit", position: 10, logEnd: 10)) { try await consumer.commit(through: 10) }
        try await store.close()

        store = try consumerTestStore(at: directory.url)
        consumer = try store.consumer(named: "audit", startingAt: .end)  // the start is ignored: it has a position
        #expect(consumer.committed == 4)
        #expect(consumer.lag == 6)
        iterator = consumer.events().makeAsyncIterator()
        #expect(try await iterator.next()?.position == 4)
        #expect(try store.consumerNames() == ["audit"])
        try await store.close()
    }

    @Test func aHandlerKeptPositionLeftBehindByACutIsRefusedEvenOnceTheLogGrewPastIt() async throws {
        let directory = TemporaryDirectory("ek-consumers-handler-cut")
        let before = TemporaryDirectory("ek-consumers-handler-cut-copy")
        let options = ConsumerOptions(checkpoint: .handler)
        var store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 9)
        try await store.close()
        // The history without event 9, as a cut (a repair, a lost unsynced tail) leaves it.
        try FileManager.default.removeItem(at: before.url)
        try FileManager.default.copyItem(at: directory.url, to: before.url)
        store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 1, prefix: "lost")
        let events = try store.read(from: 0)
        let consumer = try store.consumer(named: "index", options: options)
        // What a handler stores in its own transaction, through its own encoding.
        let lost = try JSONDecoder().decode(ConsumerPosition.self, from: JSONEncoder().encode(try consumer.position(after: events[9])))
        let kept = try consumer.position(after: events[8])
        #expect(lost.next == 10 && kept.next == 9)
        var uncommitted = events[9]
        uncommitted.position = 10
        #expect(throws: ConsumerError.self) { try consumer.position(after: uncommitted) }
        try await store.close()

        // The cut log grows past the handler's position again before the consumer opens.
        store = try EventStore.open(at: before.url, snapshotPolicy: .never)
        try await appendCounted(store, 5, prefix: "new")
        var refused = try store.consumer(named: "index", startingAt: .checkpoint(lost), options: options)
        #expect(refused.committed == 10)
        var iterator = refused.events().makeAsyncIterator()
        await #expect {
            try await iterator.next()
        } throws: { error in
            guard case ConsumerError.checkpointOffHistory(let name, let committed, let reason) = error else { return false }
            return name == "index" && committed == 10 && reason.contains("position 9")
        }
        #expect(throws: ConsumerError.self) { try refused.reset(to: .checkpoint(lost)) }
        // A position taken before the cut point still fits, and delivers the new event at 9.
        try refused.reset(to: .checkpoint(kept))
        iterator = refused.events().makeAsyncIterator()
        #expect(try await iterator.next()?.stream == counted("new0"))
        try await store.close()
        store = try EventStore.open(at: before.url, snapshotPolicy: .never)
        refused = try store.consumer(named: "index", startingAt: .checkpoint(kept), options: options)
        iterator = refused.events().makeAsyncIterator()
        #expect(try await iterator.next()?.position == 9)
        try await store.close()
    }

    @Test func startingPoints() async throws {
        let store = try EventStore.inMemory()
        let early = Date(timeIntervalSince1970: 1_000_000)
        let late = Date(timeIntervalSince1970: 2_000_000)
        try await store.append([PendingEvent(event("a", 1).event, recordedAt: early), PendingEvent(event("a", 1).event, recordedAt: early),
                                PendingEvent(event("a", 1).event, recordedAt: late)])
        #expect(try store.consumer(named: "b", startingAt: .beginning).committed == 0)
        #expect(try store.consumer(named: "e", startingAt: .end).committed == 3)
        #expect(try store.consumer(named: "p", startingAt: .position(1)).committed == 1)
        #expect(try store.consumer(named: "d", startingAt: .recordedAt(late)).committed == 2)
        #expect(try store.consumer(named: "d2", startingAt: .recordedAt(Date(timeIntervalSince1970: 3_000_000))).committed == 3)
        #expect(throws: ConsumerError.positionOutOfRange(consumer: "x", position: 4, logEnd: 3)) {
            try store.consumer(named: "x", startingAt: .position(4))
        }
        // In memory, the checkpoint lives as long as the store.
        let e = try store.consumer(named: "e")
        #expect(e.committed == 3)
        #expect(try store.consumerNames() == ["b", "d", "d2", "e", "p"])
    }

    @Test(arguments: ["a/b", "", ".hidden", "..", "a b", "naïve", String(repeating: "x", count: 129)])
    func invalidNamesAreRejected(name: String) async throws {
        let directory = TemporaryDirectory("ek-consumers")
        let store = try consumerTestStore(at: directory.url)
        #expect {
            try store.consumer(named: name)
        } throws: { error in
            guard case ConsumerError.invalidName(let rejected, _) = error else { return false }
            return rejected == name
        }
        let written = (try? FileManager.default.contentsOfDirectory(atPath: directory.file("consumers").path)) ?? []
        #expect(written.isEmpty)
        try await store.close()
    }

    @Test func restartResumesAfterTheLastCommitNothingSkipped() async throws {
        let directory = TemporaryDirectory("ek-consumers")
        var store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 50)
        let seen = Seen()
        // The handler "crashes" (the run stops) in the middle of the batch at 20...29: that
        // batch is not committed.
        var consumer = try store.consumer(named: "mail", options: ConsumerOptions(retry: RetryPolicy(maxAttempts: 1), onFailure: .stop))
        await #expect(throws: ConsumerError.self) {
            try await consumer.run(batchSize: 10) { batch in
                if batch[0].position == 20 { throw Refused(position: 20) }
                seen.add(batch.map(\.position))
            }
        }
        #expect(consumer.committed == 20)
        try await store.close()

        store = try consumerTestStore(at: directory.url)
        consumer = try store.consumer(named: "mail")
        #expect(consumer.committed == 20)
        try await runUntil(consumer, batchSize: 10, seen: seen) { seen.positions.count >= 50 }
        #expect(seen.positions == Array(0..<50))
        try await store.close()
    }

    @Test func failingEventsRetryThenParkAndTheConsumerGoesOn() async throws {
        let directory = TemporaryDirectory("ek-consumers")
        var store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 20)
        let consumer = try store.consumer(named: "index", options: ConsumerOptions(retry: quickRetry))
        let seen = Seen()
        let calls = Seen()
        try await runUntil(consumer, batchSize: 8, seen: seen, { consumer.committed == 20 }) { batch in
            calls.add([batch[0].position])
            if let bad = batch.first(where: { $0.position == 5 || $0.position == 13 }) { throw Refused(position: bad.position) }
        }
        // Everything but the two refused events was handled; they are parked with their error.
        #expect(Set(seen.positions) == Set(0..<20).subtracting([5, 13]))
        let parked = try consumer.parked()
        #expect(parked.map(\.position) == [5, 13])
        #expect(parked.allSatisfy { $0.attempts == 3 && $0.eventType == "Counted" && $0.errorType.hasSuffix("Refused") })
        #expect(parked.map(\.error) == ["refused 5", "refused 13"])
        #expect(parked[0].stream == counted("c5").description)
        // Batch 0..<8: 3 attempts, then 8 singles, the one at 5 three times.
        #expect(calls.positions.filter { $0 == 5 }.count == 3)
        try await store.close()

        // Durable: a new process sees the parked list; retry handles one, the other stays.
        store = try consumerTestStore(at: directory.url)
        let again = try store.consumer(named: "index")
        #expect(try again.parked().map(\.position) == [5, 13])
        let remaining = try await again.retryParked { event in
            if event.position == 13 { throw Refused(position: 13) }
        }
        #expect(remaining.map(\.position) == [13])
        #expect(remaining[0].attempts == 4)
        try again.skipParked(at: 13)
        #expect(try again.parked().isEmpty)
        #expect(throws: ConsumerError.notParked(consumer: "index", position: 13)) { try again.skipParked(at: 13) }
        try await store.close()
    }

    /// Issue 29, item 3: a retry asked for (as the CLI's `--retry` does, with no handler at
    /// hand) is kept with the parked list and served by the consumer's next run, with the
    /// run's own handler and retry policy; one asked for while a run goes on is served before
    /// its next batch.
    @Test func aRequestedRetryIsServedByTheConsumersNextRun() async throws {
        let directory = TemporaryDirectory("ek-consumers")
        var store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 20)
        let first = try store.consumer(named: "index", options: ConsumerOptions(retry: quickRetry))
        try await runUntil(first, batchSize: 8, seen: Seen(), { first.committed == 20 }) { batch in
            if let bad = batch.first(where: { [5, 13, 17].contains($0.position) }) { throw Refused(position: bad.position) }
        }
        #expect(try first.parked().map(\.position) == [5, 13, 17])
        #expect(throws: ConsumerError.notParked(consumer: "index", position: 6)) { try first.requestRetry(ofParkedAt: 6) }
        try first.requestRetry(ofParkedAt: 5)
        try await store.close()

        // Durable: the request survives the process; the next run hands 5 (and nothing else
        // parked) to its handler first, which now takes it.
        store = try consumerTestStore(at: directory.url)
        let consumer = try store.consumer(named: "index", options: ConsumerOptions(retry: quickRetry))
        #expect(try consumer.parked().map(\.retryRequested) == [true, false, false])
        let seen = Seen()
        try await runUntil(consumer, seen: seen, { (try? consumer.parked().count) == 2 }) { batch in
            if batch.contains(where: { $0.position == 13 }) { throw Refused(position: 13) }
        }
        #expect(seen.positions == [5])
        #expect(try consumer.parked().map(\.position) == [13, 17])

        // All marked; the handler still refuses 13: after the policy's three attempts it stays
        // parked, its request served (cleared), its attempts counted; 17 is handled.
        #expect(try consumer.requestRetryOfAllParked() == 2)
        #expect(try consumer.requestRetryOfAllParked() == 0)
        let again = Seen()
        try await runUntil(consumer, seen: again, { (try? consumer.parked())?.allSatisfy { !$0.retryRequested } ?? false }) { batch in
            if batch.contains(where: { $0.position == 13 }) { throw Refused(position: 13) }
        }
        #expect(again.positions == [17])
        let left = try consumer.parked()
        #expect(left.map(\.position) == [13] && left[0].attempts == 6 && !left[0].retryRequested && left[0].error == "refused 13")

        // Asked for while a run waits for new events (caught up, nothing marked when it
        // started): the request wakes it, and it is served before the next batch.
        let live = Seen()
        let run = Task {
            try await consumer.run { batch in live.add(batch.map(\.position)) }
        }
        #expect(try await eventually { store.commitSignal.waiterCount == 1 })
        try consumer.requestRetry(ofParkedAt: 13)
        try await appendCounted(store, 1)
        #expect(try await eventually { live.positions.contains(20) })
        #expect(live.positions == [13, 20])
        #expect(try consumer.parked().isEmpty)
        run.cancel()
        try await run.value
        try await store.close()
    }

    /// A retry of an event the log no longer holds (past its end; another event at the
    /// position) finds nothing to handle: the entry stays (for a person to skip), says why, and
    /// its request is cleared; the handler never sees the other event.
    @Test func aRequestedRetryOfAReleasedEventSaysSoAndIsCleared() async throws {
        let store = try EventStore.inMemory()
        try await appendCounted(store, 3)
        let consumer = try store.consumer(named: "index")
        try consumer.park([1, 99].map {
            ParkedEvent(position: $0, stream: "Counted/elsewhere", eventType: "Counted", errorType: "E", error: "e", attempts: 1, parkedAt: .now())
        })
        try consumer.requestRetryOfAllParked()
        let seen = Seen()
        try await runUntil(consumer, seen: seen, { consumer.committed == 3 && (try? consumer.parked())?.allSatisfy { !$0.retryRequested } == true })
        #expect(seen.positions == [0, 1, 2])
        let entries = try consumer.parked()
        #expect(entries.map(\.position) == [1, 99] && entries.allSatisfy { $0.attempts == 1 })
        #expect(entries[0].error.contains("another event at this position (Counted of Counted/c1)"), "\(entries[0].error)")
        #expect(entries[1].error.contains("the log ends before this position (its next position is 3)"), "\(entries[1].error)")
        try await store.close()
    }

    @Test func stopOnFailureNamesThePositionAndCommitsWhatCameBefore() async throws {
        let store = try EventStore.inMemory()
        try await appendCounted(store, 10)
        let consumer = try store.consumer(named: "strict", options: ConsumerOptions(retry: quickRetry, onFailure: .stop))
        let seen = Seen()
        await #expect {
            try await consumer.run(batchSize: 4) { batch in
                if batch.contains(where: { $0.position == 6 }) { throw Refused(position: 6) }
                seen.add(batch.map(\.position))
            }
        } throws: { error in
            guard case ConsumerError.handlerFailed(let name, let position, let attempts, let type, let message) = error else { return false }
            return name == "strict" && position == 6 && attempts == 3 && type.hasSuffix("Refused") && message == "refused 6"
        }
        #expect(consumer.committed == 6)
        #expect(try consumer.parked().isEmpty)
        #expect(Set(seen.positions) == Set(0..<6))
    }

    @Test func aSlowConsumerWithAFastWriterCostsTheStoreOneWaiterAndNoBuffer() async throws {
        let store = try EventStore.inMemory()
        let consumer = try store.consumer(named: "slow", options: ConsumerOptions(readBatchSize: 8))
        let seen = Seen()
        let gate = Gate()
        // The consumer takes its first batch and then blocks, while the writer appends 2,000:
        // whatever the store held for it would grow with the writer.
        let task = Task {
            try await consumer.run { batch in
                seen.add(batch.map(\.position))
                await gate.wait()
            }
        }
        try await appendCounted(store, 1)
        #expect(try await eventually { seen.positions.count == 1 })
        try await appendCounted(store, 2_000)
        #expect(store.commit.withLock { $0.subscribers.isEmpty })
        #expect(store.commitSignal.waiterCount == 0)  // it is in its handler, not waiting
        await gate.open()
        #expect(try await eventually { seen.positions.count == 2_001 })
        // Caught up and waiting: one waiter, still no buffer.
        #expect(try await eventually { store.commitSignal.waiterCount == 1 })
        #expect(store.commit.withLock { $0.subscribers.isEmpty })
        task.cancel()
        try await task.value
        #expect(seen.positions == Array(0..<2_001))
        #expect(store.commitSignal.waiterCount == 0)
    }

    @Test func batchesNeverExceedTheReadBatchSize() async throws {
        let store = try EventStore.inMemory()
        try await appendCounted(store, 20)
        let consumer = try store.consumer(named: "clamped", options: ConsumerOptions(readBatchSize: 4))
        let sizes = Seen()
        try await runUntil(consumer, batchSize: 10, seen: Seen(), { consumer.committed == 20 }) { batch in
            sizes.add([UInt64(batch.count)])
        }
        #expect(sizes.positions.allSatisfy { $0 <= 4 })
        try consumer.reset(to: .beginning)
        var iterator = consumer.batches(maxCount: 100).makeAsyncIterator()
        #expect(try await iterator.next()?.count == 4)
    }

    @Test func aDamagedCheckpointIsATypedErrorNamingTheFile() async throws {
        let directory = TemporaryDirectory("ek-consumers")
        var store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 5)
        let consumer = try store.consumer(named: "damaged")
        try await consumer.commit(through: 2)
        try await store.close()
        let file = directory.file("consumers/damaged.checkpoint").path
        try flipBit(in: file, at: 8)
        store = try consumerTestStore(at: directory.url)
        #expect(throws: ConsumerError.damagedFile(path: file, reason: "its CRC-32C does not match its contents")) {
            try store.consumer(named: "damaged")
        }
        // A file of another consumer's name is damage too.
        try FileManager.default.copyItem(atPath: directory.file("consumers/damaged.checkpoint").path, toPath: directory.file("consumers/other.checkpoint").path)
        try FileManager.default.removeItem(atPath: file)
        _ = try store.consumer(named: "damaged")
        try FileManager.default.removeItem(atPath: directory.file("consumers/other.checkpoint").path)
        try FileManager.default.copyItem(atPath: file, toPath: directory.file("consumers/other.checkpoint").path)
        #expect(throws: ConsumerError.damagedFile(path: directory.file("consumers/other.checkpoint").path,
                                                   reason: "it records consumer \"damaged\", not \"other\"")) {
            try store.consumer(named: "other")
        }
        try await store.close()
    }

    @Test func consumerFilesRoundTripAndNameWhatIsWrong() throws {
        var checkpoint = ConsumerCheckpoint(name: "round-trip", committed: 1 << 40, committedAt: LogTimestamp(nanosecondsSince1970: 1_700_000_000_123_456_789))
        #expect(try ConsumerCheckpoint(decoding: checkpoint.encoded()) == checkpoint)
        checkpoint.historyEpoch = 7
        checkpoint.anchor = SnapshotAnchor(timestamp: LogTimestamp(nanosecondsSince1970: 99), payloadChecksum: 0xDEAD_BEEF)
        let bytes = checkpoint.encoded()
        #expect(try ConsumerCheckpoint(decoding: bytes) == checkpoint)
        func reason(_ bytes: [UInt8]) -> String? {
            do { _ = try ConsumerCheckpoint(decoding: bytes); return nil } catch { return error.reason }
        }
        #expect(reason(Array(bytes.prefix(9))) == "it is 9 bytes long, shorter than any record")
        #expect(reason([0x58] + bytes.dropFirst()) == "it does not start with \"EKCP\"")
        var newer = bytes
        newer[4] = 3
        #expect(reason(newer) == "format version 3, this build reads 2")
        var flipped = bytes
        flipped[bytes.count - 9] ^= 0x10
        #expect(reason(flipped) == "its CRC-32C does not match its contents")

        let parked = [ParkedEvent(position: 3, stream: "Counted/c3", eventType: "Counted", errorType: "Mail.Error", error: "smtp: 451 try later",
                                  attempts: 5, parkedAt: LogTimestamp(nanosecondsSince1970: 42))]
        let decoded = try ParkedEvent.decode(ParkedEvent.encode(parked, consumer: "mail"))
        #expect(decoded.consumer == "mail" && decoded.events == parked)
        var damaged = ParkedEvent.encode(parked, consumer: "mail")
        damaged[12] ^= 1
        #expect(throws: ConsumerFileDamage.self) { try ParkedEvent.decode(damaged) }

        // Format 2 keeps each entry's retry request; format 1 (no flags byte) still reads, as
        // lists with none; a flag this build does not know, or a newer format, is damage.
        var requested = parked
        requested[0].retryRequested = true
        requested.append(ParkedEvent(position: 9, stream: "Counted/c2", eventType: "Counted", errorType: "E", error: "",
                                     attempts: 1, parkedAt: LogTimestamp(nanosecondsSince1970: -5)))
        #expect(try ParkedEvent.decode(ParkedEvent.encode(requested, consumer: "mail")).events == requested)
        // A list with no request is written in format 1, which builds from before format 2 read.
        #expect(ParkedEvent.encode(parked, consumer: "mail")[4] == 1 && ParkedEvent.encode(requested, consumer: "mail")[4] == 2)
        func parkedFile(version: UInt16, flags: UInt8?) -> [UInt8] {
            var writer = BinaryWriter(capacity: 64)
            writer.writeRaw(Array("EKPK".utf8))
            writer.writeFixed(version)
            writer.writeString("mail")
            writer.writeVarint(1)
            writer.writeFixed(UInt64(3))
            writer.writeVarint(5)
            writer.writeFixed(Int64(42))
            if let flags { writer.writeFixed(flags) }
            for text in ["Counted/c3", "Counted", "Mail.Error", "smtp: 451 try later"] { writer.writeString(text) }
            var bytes = writer.bytes
            withUnsafeBytes(of: CRC32C.checksum(bytes).littleEndian) { bytes.append(contentsOf: $0) }
            return bytes
        }
        #expect(try ParkedEvent.decode(parkedFile(version: 1, flags: nil)).events == parked)
        #expect(try ParkedEvent.decode(parkedFile(version: 2, flags: 1)).events.map(\.retryRequested) == [true])
        func parkedReason(_ bytes: [UInt8]) -> String? {
            do { _ = try ParkedEvent.decode(bytes); return nil } catch { return error.reason }
        }
        #expect(parkedReason(parkedFile(version: 2, flags: 2)) == "the event at position 3 has flags 2; this build knows 1")
        #expect(parkedReason(parkedFile(version: 3, flags: 0)) == "format version 3, this build reads 1 to 2")
        #expect(parkedReason(parkedFile(version: 0, flags: nil)) == "format version 0, this build reads 1 to 2")
    }

    @Test func aDamagedParkedListIsATypedErrorNamingTheFile() async throws {
        let directory = TemporaryDirectory("ek-consumers")
        let store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 3)
        let consumer = try store.consumer(named: "p")
        try consumer.park([ParkedEvent(position: 1, stream: "Counted/c1", eventType: "Counted", errorType: "E", error: "e", attempts: 1, parkedAt: .now())])
        let file = directory.file("consumers/p.parked").path
        try flipBit(in: file, at: 7)
        #expect(throws: ConsumerError.damagedFile(path: file, reason: "its CRC-32C does not match its contents")) { try consumer.parked() }
        #expect(throws: ConsumerError.self) { try consumer.skipParked(at: 1) }
        try await store.close()
    }

    @Test func aCheckpointAheadOfTheLogIsReportedUntilReset() async throws {
        let directory = TemporaryDirectory("ek-consumers")
        var store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 5)
        try await store.close()
        // As after a truncation: the checkpoint says 9 were handled, the log holds 5.
        try ConsumerDirectory(storeDirectory: directory.url).write(ConsumerCheckpoint(name: "ahead", committed: 9, committedAt: .now()))
        store = try consumerTestStore(at: directory.url)
        let consumer = try store.consumer(named: "ahead")
        var iterator = consumer.events().makeAsyncIterator()
        await #expect(throws: ConsumerError.checkpointAheadOfLog(consumer: "ahead", committed: 9, logEnd: 5)) { try await iterator.next() }
        await #expect(throws: ConsumerError.checkpointAheadOfLog(consumer: "ahead", committed: 9, logEnd: 5)) { try await consumer.run { _ in } }
        try consumer.reset(to: .position(3))
        #expect(consumer.committed == 3)
        iterator = consumer.events().makeAsyncIterator()
        #expect(try await iterator.next()?.position == 3)
        try await store.close()
    }

    @Test func resetMovesBackwardsAndARunningConsumerFollows() async throws {
        let store = try EventStore.inMemory()
        try await appendCounted(store, 10)
        let consumer = try store.consumer(named: "rebuild")
        let seen = Seen()
        try await runUntil(consumer, seen: seen) { consumer.committed == 10 }
        try consumer.reset(to: .beginning)
        #expect(consumer.committed == 0)
        try await runUntil(consumer, seen: seen) { consumer.committed == 10 }
        #expect(seen.positions == Array(0..<10) + Array(0..<10))
    }

    @Test func aResetDuringARunIsNotCommittedOver() async throws {
        let store = try EventStore.inMemory()
        try await appendCounted(store, 10)
        let consumer = try store.consumer(named: "rebuild", options: ConsumerOptions(readBatchSize: 5))
        let seen = Seen()
        let resets = Seen()
        // The reset lands after the handler finished 5...9 and before that batch is committed.
        try await runUntil(consumer, seen: seen, { consumer.committed == 10 && seen.positions.count >= 15 }) { batch in
            if batch[0].position == 5 && resets.positions.isEmpty {
                resets.add([0])
                try consumer.reset(to: .beginning)
            }
        }
        #expect(seen.positions == Array(0..<10) + Array(0..<10))
    }

    @Test func aStopAfterAResetDoesNotCommitOverIt() async throws {
        let store = try EventStore.inMemory()
        try await appendCounted(store, 10)
        let consumer = try store.consumer(named: "strict", options: ConsumerOptions(retry: RetryPolicy(maxAttempts: 1), onFailure: .stop))
        try await consumer.commit(through: 5)
        // The handler fails on 8 after a reset to 2 (another task's, racing): stopping must not
        // commit through 7 over the reset, which would skip 2...7.
        await #expect(throws: ConsumerError.self) {
            try await consumer.run(batchSize: 1) { batch in
                if batch[0].position == 8 {
                    try consumer.reset(to: .position(2))
                    throw Refused(position: 8)
                }
            }
        }
        #expect(consumer.committed == 2)
    }

    @Test func aHandlerOwnedCheckpointStartsWhereTheHandlerSaysAndWritesNoFile() async throws {
        let directory = TemporaryDirectory("ek-consumers")
        let store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 6)
        let consumer = try store.consumer(named: "grdb", startingAt: .position(4), options: ConsumerOptions(checkpoint: .handler))
        let seen = Seen()
        try await runUntil(consumer, seen: seen) { consumer.committed == 6 }
        #expect(seen.positions == [4, 5])
        #expect(try store.consumerNames().isEmpty)
        try await store.close()
    }

    @Test func theStoreClosingEndsTheEvents() async throws {
        let store = try EventStore.inMemory()
        let consumer = try store.consumer(named: "live")
        let task = Task { () -> Int in
            var count = 0
            for try await _ in consumer.events() { count += 1 }
            return count
        }
        try await appendCounted(store, 3)
        #expect(try await eventually { consumer.lag == 3 && store.commitSignal.waiterCount == 1 })
        try await store.close()
        #expect(try await task.value == 3)
        #expect(store.commitSignal.waiterCount == 0)
    }

    @Test("a consumer on one instance follows commits made on another", arguments: SharedBackend.allCases)
    func followsASharedLog(backend: SharedBackend) async throws {
        try await backend.withInstances([true, true]) { stores in
            let consumer = try stores[1].consumer(named: "follower")
            let seen = Seen()
            let task = Task { try await consumer.run { batch in seen.add(batch.map(\.position)) } }
            try await appendCounted(stores[0], 5)
            #expect(try await eventually { seen.positions.count >= 5 })
            task.cancel()
            try await task.value
            #expect(seen.positions == Array(0..<5))
        }
    }

    @Test func removeStoreKnowsTheConsumersDirectory() async throws {
        let directory = TemporaryDirectory("ek-consumers")
        let store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 3)
        let consumer = try store.consumer(named: "gone")
        try consumer.park([ParkedEvent(position: 1, stream: "Counted/c1", eventType: "Counted", errorType: "E", error: "e", attempts: 1, parkedAt: .now())])
        try await store.close()
        // A stranger in consumers/ makes the directory not only a store's.
        _ = FileManager.default.createFile(atPath: directory.file("consumers/notes.txt").path, contents: Data())
        #expect(throws: LogError.self) { try SegmentedLog.removeStore(at: directory.url) }
        try FileManager.default.removeItem(atPath: directory.file("consumers/notes.txt").path)
        let removal = try SegmentedLog.removeStore(at: directory.url)
        #expect(removal.removed.contains("consumers/gone.checkpoint"))
        #expect(removal.removed.contains("consumers/gone.parked"))
        #expect(!FileManager.default.fileExists(atPath: directory.file("consumers").path))
    }

    /// A run commits every `commitInterval`, not after every batch: with a long interval
    /// nothing is committed while it handles, and what it handled is committed when it ends;
    /// with a short one, a consumer that caught up commits once the interval passes idle.
    @Test func aRunCommitsOnItsIntervalWhenIdleAndWhenItEnds() async throws {
        let directory = TemporaryDirectory("ek-consumers")
        let store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 50)
        let slow = try store.consumer(named: "slow", options: ConsumerOptions(readBatchSize: 4, commitInterval: .seconds(600)))
        let seen = Seen()
        let run = Task { try await slow.run { seen.add($0.map(\.position)) } }
        #expect(try await eventually { seen.positions.count == 50 })
        try await Task.sleep(for: .milliseconds(50))
        #expect(slow.committed == 0, "13 batches handled, none committed inside the interval")
        run.cancel()
        try await run.value
        #expect(slow.committed == 50, "what was handled is committed when the run ends")

        let quick = try store.consumer(named: "quick", options: ConsumerOptions(readBatchSize: 4, commitInterval: .milliseconds(20)))
        let quickRun = Task { try await quick.run { _ in } }
        #expect(try await eventually { quick.committed == 50 }, "caught up and idle: committed after the interval")
        try await appendCounted(store, 5)
        #expect(try await eventually { quick.committed == 55 })
        quickRun.cancel()
        try await quickRun.value
        // Never ahead of what the store holds, and nothing skipped on a restart.
        #expect(quick.committed == store.commit.withLock { $0.nextPosition })
        try await store.close()
    }

    /// A run idle with handled events not committed returns when the store closes (its commit
    /// racing the close is no error); cancelled while retrying a batch, it commits the batches
    /// it handled before it; after the store gave the consumer up, a commit writes nothing.
    @Test func aRunEndsCleanlyOnCloseAndOnCancellationMidRetry() async throws {
        let directory = TemporaryDirectory("ek-consumers")
        var store = try consumerTestStore(at: directory.url)
        try await appendCounted(store, 12)
        let idle = try store.consumer(named: "idle", options: ConsumerOptions(readBatchSize: 4, commitInterval: .seconds(600)))
        let seen = Seen()
        let run = Task { try await idle.run { seen.add($0.map(\.position)) } }
        #expect(try await eventually { seen.positions.count == 12 && store.commitSignal.waiterCount == 1 })
        try await store.close()
        try await run.value

        store = try consumerTestStore(at: directory.url)
        let retrying = try store.consumer(named: "retrying", options: ConsumerOptions(
            readBatchSize: 4, retry: RetryPolicy(maxAttempts: 50, initialDelay: .seconds(1)), commitInterval: .seconds(600)))
        let handled = Seen()
        let stuck = Task {
            try await retrying.run { batch in
                if batch.contains(where: { $0.position == 9 }) { throw Refused(position: 9) }
                handled.add(batch.map(\.position))
            }
        }
        #expect(try await eventually { handled.positions.count == 8 })
        try await Task.sleep(for: .milliseconds(50))
        stuck.cancel()
        await #expect(throws: CancellationError.self) { try await stuck.value }
        #expect(retrying.committed == 8, "the two batches handled before the one being retried")

        retrying.state.withLock { $0.closed = true }
        #expect(try await retrying.commit(through: 10, ifGeneration: nil) == false)
        #expect(retrying.committed == 8)
        try await store.close()
        #expect(try ConsumerDirectory(storeDirectory: directory.url).checkpoint(named: "retrying")?.committed == 8)
    }

    @Test func aTimedWaitEndsOnTheCommitOnItsTimeoutOnCancellationAndOnClose() async throws {
        let signal = CommitSignal()
        signal.advance(to: 3)
        // Already committed: at once, nothing left waiting.
        #expect(await signal.wait(forCommitOf: 2, timeout: .seconds(600)) == .committed)
        // Nothing comes: ended once the time passed, and the waiter is gone.
        let clock = ContinuousClock()
        var answer = CommitSignal.Outcome.committed
        let waited = await clock.measure { answer = await signal.wait(forCommitOf: 3, timeout: .milliseconds(30)) }
        #expect(answer == .ended && waited >= .milliseconds(30))
        #expect(signal.waiterCount == 0)
        // The commit comes long before the time is up.
        let committed = Task { await signal.wait(forCommitOf: 3, timeout: .seconds(600)) }
        #expect(try await eventually { signal.waiterCount == 1 })
        signal.advance(to: 4)
        #expect(await committed.value == .committed)
        // Cancelled, or the store closes: ended, long before the time is up.
        let cancelled = Task { await signal.wait(forCommitOf: 4, timeout: .seconds(600)) }
        #expect(try await eventually { signal.waiterCount == 1 })
        cancelled.cancel()
        #expect(await cancelled.value == .ended)
        let closed = Task { await signal.wait(forCommitOf: 4, timeout: .seconds(600)) }
        #expect(try await eventually { signal.waiterCount == 1 })
        signal.close()
        #expect(await closed.value == .ended)
        #expect(signal.waiterCount == 0)
    }

    // A consumer asks the log for `readBatchSize` positions at a time, not for everything to the
    // log's end (a segmented log reads all adjacent batches in range, up to 4 MiB, in one go, so
    // a catch-up read 4 MiB per batch of 512: Consumer.Throughput was 0.2x of the full replay),
    // nor a read per batch handed out when the batches are smaller.
    @Test func aConsumerReadsTheLogReadBatchSizeAtATime() async throws {
        let log = ReadWatchingLog()
        let store = try EventStore(log: log, snapshotPolicy: .never)
        try await appendCounted(store, 100)
        let consumer = try store.consumer(named: "narrow", options: ConsumerOptions(readBatchSize: 16, checkpoint: .handler))
        log.reads.withLock { $0.removeAll() }
        var batches = consumer.batches(maxCount: 10).makeAsyncIterator()
        #expect(try await batches.next()?.map(\.position) == Array(0..<10))
        #expect(try await batches.next()?.map(\.position) == Array(10..<16))
        #expect(try await batches.next()?.map(\.position) == Array(16..<26))
        #expect(log.reads.withLock { $0 } == [0...15, 16...31])
        // A run's batches of 4: one read per 16, to the log's end and not past it.
        log.reads.withLock { $0.removeAll() }
        let seen = Seen()
        try await runUntil(consumer, batchSize: 4, seen: seen) { seen.positions.count == 100 }
        #expect(seen.positions == Array(0..<100))
        #expect(log.reads.withLock { $0 } == stride(from: 0, to: 100, by: 16).map { $0...min($0 + 15, 99) })
        try await store.close()
    }

    // Reads end where log batches end (a read decodes every log batch it touches whole, so one
    // ending inside a batch had the next read decode it again: reads of 4,096 over batches of
    // 1,000 decoded a fifth more than one pass), and hand out exactly the events there are.
    @Test(arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func readsEndOnLogBatchBoundariesAndHandOutEveryEventOnce(seed: UInt64) async throws {
        var random = SplitMix64(seed: seed)
        let directory = TemporaryDirectory("ek-consumer-reads")
        let log = ReadWatchingLog(base: try SegmentedLog.open(at: directory.url, configuration: SegmentedLog.Configuration(segmentSize: 4096)))
        let store = try EventStore(log: log, snapshotPolicy: .never)
        // Log batches of random sizes (one append each: appends one at a time are not merged).
        var starts: [UInt64] = []
        var count: UInt64 = 0
        for _ in 0..<40 {
            let size = Int(random.next() % 40) + 1
            starts.append(count)
            _ = try await store.append((0..<size).map { i in
                PendingEvent(EncodedEvent(eventType: "Counted", schemaVersion: 1, stream: StreamID("Counted", .string("c\(i % 7)")), payload: [1]))
            })
            count += UInt64(size)
        }
        // The log's own answer first: every position's batch starts where its append began.
        for position in 0..<count {
            let start = starts.last { $0 <= position }
            #expect(log.batchStart(containing: position) == start, "seed \(seed), position \(position)")
        }
        #expect(log.batchStart(containing: count) == nil)
        let readBatchSize = Int(random.next() % 64) + 1
        let maxCount = Int(random.next() % UInt64(readBatchSize)) + 1
        let consumer = try store.consumer(named: "reads", options: ConsumerOptions(readBatchSize: readBatchSize, checkpoint: .handler))
        log.reads.withLock { $0.removeAll() }
        var batches = consumer.batches(maxCount: maxCount).makeAsyncIterator()
        var handed: [UInt64] = []
        while handed.count < Int(count), let batch = try await batches.next() {
            #expect(!batch.isEmpty && batch.count <= maxCount, "seed \(seed)")
            handed += batch.map(\.position)
        }
        #expect(handed == Array(0..<count), "seed \(seed), readBatchSize \(readBatchSize), maxCount \(maxCount)")
        let reads = log.reads.withLock { $0 }
        #expect(reads.first?.lowerBound == 0 && reads.last?.upperBound == count - 1, "seed \(seed)")
        for (read, following) in zip(reads, reads.dropFirst()) {
            #expect(following.lowerBound == read.upperBound + 1, "seed \(seed): reads \(read) then \(following)")
        }
        for read in reads {
            #expect(read.count <= readBatchSize, "seed \(seed): read \(read) of at most \(readBatchSize)")
            // Ends on a boundary unless one log batch holds both its first position and the one after it.
            let startOfFirst = starts.last { $0 <= read.lowerBound }!
            let startOfNext = starts.last { $0 <= read.upperBound + 1 }!
            #expect(starts.contains(read.upperBound + 1) || read.upperBound == count - 1 || startOfNext == startOfFirst,
                    "seed \(seed): read \(read) ends inside a log batch it could have stopped before")
        }
        try await store.close()
    }
}
