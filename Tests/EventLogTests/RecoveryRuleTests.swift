@testable import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// The recovery rule (Docs/Durability.md, "What counts as torn"): a tail is torn only when
/// nothing the store recorded as durable says otherwise; the store file; exact repair reports.
@Suite("Recovery rule, store file, repair figures")
struct RecoveryRuleTests {
    /// A cleanly closed store of `batches` batches of 3 records: its checkpoint lists them all.
    static func closedStore(_ dir: TemporaryDirectory, batches: Int = 6) async throws -> (segment: String, batches: [BatchLocation]) {
        let log = try SegmentedLog.open(at: dir.url)
        for b in 0..<batches { _ = try await log.append((0..<3).map { entry(b * 3 + $0, size: 40) }) }
        let segment = log.core.state.withLock { $0.segments.last! }
        try await log.close()
        return (segment.file.path, segment.batches)
    }

    /// Whether the log holds exactly the first `count` records `closedStore` acknowledged:
    /// every one, at its position, with its bytes; nothing else.
    static func holdsExactly(_ log: SegmentedLog, _ count: Int) throws -> Bool {
        let records = try allRecords(log)
        return records.map(\.position) == (0..<UInt64(count)).map { $0 }
            && records.map(\.payload) == (0..<count).map { entry($0, size: 40).payload }
    }

    static func isCorruption(_ error: any Error, file: String, offset: Int64? = nil, position: UInt64? = nil) -> Bool {
        guard let error = error as? LogError, error.code == .corruption, error.file == file else { return false }
        return (offset == nil || error.offset == offset) && (position == nil || error.position == position)
    }

    @Test("damage to the last batch of a cleanly closed segment is damage, not a torn tail", arguments: Array(0..<64))
    func lastBatchHeaderByte(byte: Int) async throws {
        let dir = TemporaryDirectory("rule-header")
        let (segment, batches) = try await Self.closedStore(dir)
        let last = batches.last!
        try flipBit(in: segment, at: last.offset + Int64(byte))
        #expect(performing: { _ = try SegmentedLog.open(at: dir.url) }, throws: {
            Self.isCorruption($0, file: segment, offset: last.offset, position: last.firstPosition)
        })
        // Nothing was truncated, and verify calls it damage.
        #expect(try fileSize(segment) >= last.endOffset)
        let report = try SegmentedLog.verify(at: dir.url)
        #expect(!report.isIntact, "byte \(byte): \(report)")
        // Repair drops exactly that batch and says so.
        let repair = try SegmentedLog.repair(at: dir.url)
        #expect(repair.firstDroppedPosition == last.firstPosition)
        #expect(repair.droppedRecords == 3 && repair.droppedRecordsAreExact, "byte \(byte): \(repair)")
        let reopened = try SegmentedLog.open(at: dir.url)
        #expect(try Self.holdsExactly(reopened, Int(last.firstPosition)), "byte \(byte)")
        #expect(reopened.historyEpoch == 1, "repair advanced the epoch")
        try await reopened.close()
    }

    @Test("damage in the last batch's payload of a checkpointed segment is damage to verify and to reads")
    func lastBatchPayload() async throws {
        let dir = TemporaryDirectory("rule-payload")
        let (segment, batches) = try await Self.closedStore(dir)
        let last = batches.last!
        try flipBit(in: segment, at: last.offset + Int64(BatchHeader.size) + 5)
        let report = try SegmentedLog.verify(at: dir.url)
        #expect(report.problems.contains { $0.severity == .damage && $0.error.file == segment && $0.error.offset == last.offset }, "\(report)")
        let log = try SegmentedLog.open(at: dir.url)
        #expect(performing: { _ = try log.read(from: last.firstPosition) }, throws: { Self.isCorruption($0, file: segment, offset: last.offset) })
        try await log.close()
    }

    @Test("a checkpointed segment cut at a batch boundary, zeroed at its tail, or deleted is damage")
    func structuralLoss() async throws {
        // Cut at the boundary before the last batch.
        do {
            let dir = TemporaryDirectory("rule-cut")
            let (segment, batches) = try await Self.closedStore(dir)
            let handle = try FileHandle(forUpdating: URL(filePath: segment))
            try handle.truncate(atOffset: UInt64(batches.last!.offset))
            try handle.close()
            #expect(performing: { _ = try SegmentedLog.open(at: dir.url) }, throws: { Self.isCorruption($0, file: segment) })
            #expect(performing: { _ = try SegmentedLog.openReadOnly(at: dir.url) }, throws: { Self.isCorruption($0, file: segment) })
            #expect(try !SegmentedLog.verify(at: dir.url).isIntact)
        }
        // Cut inside the third batch (a newcomer's `truncate -s 2000`): the damage is located at
        // that batch's start, and repair cuts there, keeping its bytes, so the store is clean
        // after it (it cut at the file's end before: nothing saved, a torn batch left behind).
        do {
            let dir = TemporaryDirectory("rule-cut-inside")
            let (segment, batches) = try await Self.closedStore(dir)
            let cut = batches[2].offset + 20
            let handle = try FileHandle(forUpdating: URL(filePath: segment))
            try handle.truncate(atOffset: UInt64(cut))
            try handle.close()
            #expect(performing: { _ = try SegmentedLog.open(at: dir.url) }, throws: {
                Self.isCorruption($0, file: segment, offset: batches[2].offset, position: batches[2].firstPosition)
            })
            let repair = try SegmentedLog.repair(at: dir.url)
            #expect(repair.firstDroppedPosition == batches[2].firstPosition && repair.droppedBytes == 20, "\(repair)")
            let after = try SegmentedLog.verify(at: dir.url)
            #expect(after.isIntact && after.problems.isEmpty, "\(after)")
            let reopened = try SegmentedLog.open(at: dir.url)
            #expect(try Self.holdsExactly(reopened, Int(batches[2].firstPosition)))
            try await reopened.close()
        }
        // The last two batches zeroed (as a lost write-back would leave them).
        do {
            let dir = TemporaryDirectory("rule-zero")
            let (segment, batches) = try await Self.closedStore(dir)
            let handle = try FileHandle(forUpdating: URL(filePath: segment))
            try handle.seek(toOffset: UInt64(batches[batches.count - 2].offset))
            try handle.write(contentsOf: Data(count: Int(batches.last!.endOffset - batches[batches.count - 2].offset)))
            try handle.close()
            #expect(performing: { _ = try SegmentedLog.open(at: dir.url) }, throws: { Self.isCorruption($0, file: segment) })
            #expect(try !SegmentedLog.verify(at: dir.url).isIntact)
        }
        // The active segment cut to nothing, or wholly zeroed (header included): it looks like a
        // segment whose creation a crash cut short, but its checkpoint lists batches.
        for zeroed in [false, true] {
            let dir = TemporaryDirectory(zeroed ? "rule-zeroed-whole" : "rule-emptied")
            let (segment, batches) = try await Self.closedStore(dir)
            let handle = try FileHandle(forUpdating: URL(filePath: segment))
            if zeroed { try handle.write(contentsOf: Data(count: Int(batches.last!.endOffset))) } else { try handle.truncate(atOffset: 0) }
            try handle.close()
            let size = try fileSize(segment)
            #expect(performing: { _ = try SegmentedLog.open(at: dir.url) }, throws: { Self.isCorruption($0, file: segment, position: 0) })
            #expect(performing: { _ = try SegmentedLog.openReadOnly(at: dir.url) }, throws: { Self.isCorruption($0, file: segment, position: 0) })
            let report = try SegmentedLog.verify(at: dir.url)
            #expect(!report.isIntact && report.problems.contains { $0.severity == .damage && $0.error.file == segment }, "\(report)")
            // The failed opens changed nothing: the file is as it was and the checkpoint is kept.
            #expect(try fileSize(segment) == size)
            #expect(StoreDirectory.exists(dir.file(SegmentName.checkpoint(0)).path))
            // Repair accepts the loss, saying how much.
            let repair = try SegmentedLog.repair(at: dir.url)
            #expect(repair.droppedRecords == 18, "\(repair)")
            let reopened = try SegmentedLog.open(at: dir.url)
            #expect(reopened.bounds.nextPosition == 0 && reopened.historyEpoch == 1)
            try await reopened.close()
        }
        // The active segment deleted: its checkpoint remembers it.
        do {
            let dir = TemporaryDirectory("rule-deleted")
            let (segment, _) = try await Self.closedStore(dir)
            try FileManager.default.removeItem(atPath: segment)
            let checkpoint = dir.file(SegmentName.checkpoint(0)).path
            #expect(performing: { _ = try SegmentedLog.open(at: dir.url) }, throws: { Self.isCorruption($0, file: checkpoint, position: 0) })
            let report = try SegmentedLog.verify(at: dir.url)
            #expect(report.problems.contains { $0.severity == .damage && $0.error.file == checkpoint })
            let repair = try SegmentedLog.repair(at: dir.url)
            #expect(repair.droppedRecords == 18 && repair.removedSideFiles == [checkpoint])
            let reopened = try SegmentedLog.open(at: dir.url)
            #expect(reopened.bounds.nextPosition == 0 && reopened.historyEpoch == 1)
            try await reopened.close()
        }
    }

    @Test("a torn tail after the checkpointed batches is still truncated, and the epoch advances")
    func tornAfterCheckpoint() async throws {
        let dir = TemporaryDirectory("rule-torn")
        let (segment, batches) = try await Self.closedStore(dir)
        // A later writer appended one more batch and was killed mid-write: half a batch.
        let handle = try FileHandle(forUpdating: URL(filePath: segment))
        try handle.seek(toOffset: UInt64(batches.last!.endOffset))
        try handle.write(contentsOf: Data(repeating: 0xAB, count: 80))
        try handle.close()
        let log = try SegmentedLog.open(at: dir.url)
        #expect(try Self.holdsExactly(log, 18))
        #expect(log.recoveryReport.truncatedTail?.offset == batches.last!.endOffset)
        #expect(log.historyEpoch == 1)
        try await log.close()
    }

    @Test("a record outside the log (a snapshot) of this history binds the torn-tail rule; one of an earlier history does not")
    func acknowledgedElsewhere() async throws {
        func damaged(_ label: String) async throws -> (TemporaryDirectory, String, BatchLocation) {
            let dir = TemporaryDirectory(label)
            let (segment, batches) = try await Self.closedStore(dir)
            try FileManager.default.removeItem(at: dir.file(SegmentName.checkpoint(0)))
            try flipBit(in: segment, at: batches.last!.offset + Int64(BatchHeader.size) + 5)
            return (dir, segment, batches.last!)
        }
        func configuration(_ claims: [AcknowledgedPosition]) -> SegmentedLog.Configuration {
            var configuration = SegmentedLog.Configuration()
            configuration.acknowledgedElsewhere = claims
            return configuration
        }
        // Covering the bad batch, in this epoch: damage, at the batch, and nothing changes.
        do {
            let (dir, segment, last) = try await damaged("rule-ack")
            let size = try fileSize(segment)
            let claim = AcknowledgedPosition(nextPosition: 18, historyEpoch: 0, file: "/S.snap")
            #expect(performing: { _ = try SegmentedLog.open(at: dir.url, configuration: configuration([claim])) }, throws: {
                Self.isCorruption($0, file: segment, offset: last.offset, position: last.firstPosition)
                    && ($0 as? LogError)?.message.contains("/S.snap records positions up to 18") == true
            })
            #expect(try fileSize(segment) == size)
            #expect(!FileManager.default.fileExists(atPath: dir.file("recovered").path))
            #expect(try StoreManifest.read(in: dir.path)?.historyEpoch == 0, "the epoch did not advance")
        }
        // Of an earlier history (the log was cut since), or ending where the bad batch starts:
        // it binds nothing, and the tail is cut as torn, as before.
        for claim in [AcknowledgedPosition(nextPosition: 18, historyEpoch: 7, file: "old"),
                      AcknowledgedPosition(nextPosition: 15, historyEpoch: 0, file: "short")] {
            let (dir, _, last) = try await damaged("rule-ack-\(claim.file)")
            let log = try SegmentedLog.open(at: dir.url, configuration: configuration([claim]))
            #expect(log.recoveryReport.truncatedTail?.offset == last.offset, "\(claim)")
            #expect(try Self.holdsExactly(log, 15))
            try await log.close()
        }
    }

    @Test("a damaged checkpoint is a warning: ignored, the segment scanned whole")
    func damagedCheckpoint() async throws {
        let dir = TemporaryDirectory("rule-ckpt")
        _ = try await Self.closedStore(dir)
        let checkpoint = dir.file(SegmentName.checkpoint(0)).path
        try flipBit(in: checkpoint, at: 44)
        let report = try SegmentedLog.verify(at: dir.url)
        #expect(report.isIntact)
        #expect(report.problems.contains { $0.severity == .warning && $0.error.file == checkpoint })
        let log = try SegmentedLog.open(at: dir.url)
        #expect(try Self.holdsExactly(log, 18))
        try await log.close()
    }

    @Test("a directory is a store by its store file; server.log alone is not a store")
    func storeFile() async throws {
        let foreign = TemporaryDirectory("rule-foreign")
        try Data("GET /\n".utf8).write(to: foreign.file("server.log"))
        #expect(!SegmentedLog.isStore(at: foreign.url))
        #expect(performing: { _ = try SegmentedLog.open(at: foreign.url) }, throws: { ($0 as? LogError)?.code == .notAStore })
        #expect(performing: { _ = try SegmentedLog.openReadOnly(at: foreign.url) }, throws: { ($0 as? LogError)?.code == .notAStore })
        #expect(performing: { _ = try SegmentedLog.verify(at: foreign.url) }, throws: { ($0 as? LogError)?.code == .notAStore })
        #expect(try Data(contentsOf: foreign.file("server.log")) == Data("GET /\n".utf8), "untouched")

        // A new store gets its file; a store from before store files gets one from its writer.
        let store = TemporaryDirectory("rule-store")
        let (segment, _) = try await Self.closedStore(store)
        #expect(FileManager.default.fileExists(atPath: store.file("eventkernel.store").path))
        #expect(SegmentedLog.isStore(at: store.url))
        try FileManager.default.removeItem(at: store.file("eventkernel.store"))
        let legacy = try SegmentedLog.openReadOnly(at: store.url)
        #expect(legacy.historyEpoch == 0 && legacy.bounds.nextPosition == 18)
        try await legacy.close()
        #expect(try SegmentedLog.verify(at: store.url).problems.contains { $0.severity == .warning && $0.error.code == .notAStore })
        try await SegmentedLog.open(at: store.url).close()
        #expect(FileManager.default.fileExists(atPath: store.file("eventkernel.store").path))

        // A damaged store file is damage, with its file and offset; repair rewrites it.
        try flipBit(in: store.file("eventkernel.store").path, at: 17)
        #expect(performing: { _ = try SegmentedLog.open(at: store.url) }, throws: {
            Self.isCorruption($0, file: store.file("eventkernel.store").path, offset: 24)
        })
        #expect(try !SegmentedLog.verify(at: store.url).isIntact)
        let repair = try SegmentedLog.repair(at: store.url)
        #expect(repair.rewrittenFiles == [store.file("eventkernel.store").path] && repair.droppedRecords == 0)
        let reopened = try SegmentedLog.open(at: store.url)
        #expect(try Self.holdsExactly(reopened, 18))
        #expect(reopened.historyEpoch != 0)
        try await reopened.close()
        _ = segment
    }
}
