@testable import EventLog
import EventKernel
import Foundation
import Testing
import EventKernelTestSupport

/// Snapshots are bound to the history they describe (Docs/Durability.md, "Derived state").
@Suite struct SnapshotBindingTests {
    struct Item: Identifiable, Codable, Sendable, Hashable { var id: Int; var round: Int }

    static func open(_ dir: URL, snapshots: SnapshotPolicy = .default) throws -> (EventStore, EventSourcedRepository<Item>) {
        let log = try SegmentedLog.open(at: dir, configuration: .init(segmentSize: 8 << 10))
        let store = try EventStore(log: log, directory: dir, snapshotPolicy: snapshots)
        return (store, try EventSourcedRepository<Item>(store: store, typeName: "Item"))
    }

    /// The ids a replay of the log alone gives.
    static func replayedIDs(_ dir: URL) async throws -> Set<Int> {
        let copy = TemporaryDirectory("ek-replay")
        try FileManager.default.removeItem(at: copy.url)
        try FileManager.default.copyItem(at: dir, to: copy.url)
        try? FileManager.default.removeItem(at: copy.file("snapshots"))
        try? FileManager.default.removeItem(at: copy.file("LOCK"))
        let (store, items) = try open(copy.url, snapshots: .never)
        let ids = Set(items.fetchAll().map(\.id))
        try await store.close()
        return ids
    }

    @Test func aRepairedLogThatGrowsAgainNeverBringsBackTheDiscardedHistory() async throws {
        let dir = TemporaryDirectory("ek-regrow")
        do {
            let (store, items) = try Self.open(dir.url)
            for i in 0..<300 { try await items.add(Item(id: i, round: 0)) }
            try await store.close()   // snapshots at 300
        }
        let oldSnapshots = dir.file("snapshots-kept")
        try FileManager.default.copyItem(at: dir.file("snapshots"), to: oldSnapshots)

        // Damage the payload of batch 10, then repair: the log ends at 10.
        let first = dir.file(SegmentName.segment(0)).path
        let scan = try SegmentScanner(file: try OpenFile.open(first, flags: O_RDONLY), basePosition: 0).scan()
        try flipBit(in: first, at: scan.batches[10].offset + Int64(BatchHeader.size) + 2)
        let repair = try SegmentedLog.repair(at: dir.url)
        #expect(repair.firstDroppedPosition == 10 && repair.droppedRecords == 290 && repair.droppedRecordsAreExact)

        // The writer after repair: the snapshots of the old history are stale and removed.
        do {
            let (store, items) = try Self.open(dir.url, snapshots: .never)
            #expect(items.count == 10)
            #expect(SnapshotDirectory(storeDirectory: dir.url).files(for: "repository:Item").isEmpty)
            // The log grows past the old snapshots' position (a writer killed before it snapshots).
            for i in 1000..<1400 { try await items.add(Item(id: i, round: 1)) }
            try await store.close()
        }
        // Even if the old snapshots had survived, they describe another history.
        try? FileManager.default.removeItem(at: dir.file("snapshots"))
        try FileManager.default.moveItem(at: oldSnapshots, to: dir.file("snapshots"))
        let (store, items) = try Self.open(dir.url)
        let expected = Set(0..<10).union(1000..<1400)
        #expect(Set(items.fetchAll().map(\.id)) == expected)
        #expect(items.projection.eventsApplied == 410, "replayed, not restored from the old snapshot")
        #expect(try await Self.replayedIDs(dir.url) == expected)
        try await store.close()
    }

    @Test func aSnapshotOfEventsTheLogLostWithoutACutIsDamage() async throws {
        let dir = TemporaryDirectory("ek-lost")
        do {
            let (store, items) = try Self.open(dir.url)
            for i in 0..<50 { try await items.add(Item(id: i, round: 0)) }
            try await store.close()   // snapshots at 50
        }
        // The last five batches vanish without a trace in the log (no checkpoint says otherwise).
        let segments = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".log") }.sorted()
        let last = dir.file(segments.last!).path
        let base = UInt64(segments.last!.prefix(20))!
        let scan = try SegmentScanner(file: try OpenFile.open(last, flags: O_RDONLY), basePosition: base).scan()
        try #require(scan.batches.count > 5)
        try FileManager.default.removeItem(at: dir.file(SegmentName.checkpoint(base)))
        let handle = try FileHandle(forUpdating: URL(filePath: last))
        try handle.truncate(atOffset: UInt64(scan.batches[scan.batches.count - 5].offset))
        try handle.close()
        #expect(try SegmentedLog.verify(at: dir.url).isIntact, "the log alone cannot tell")

        #expect(performing: { _ = try Self.open(dir.url) }, throws: { error in
            guard let log = (error as? RepositoryError)?.logError else { return false }
            return log.code == .corruption && log.file?.contains("/snapshots/") == true && log.position == 49
        })
        // Accepting the loss starts a new epoch; the log alone is then the truth.
        try SegmentedLog.startNewHistoryEpoch(at: dir.url)
        let (store, items) = try Self.open(dir.url)
        #expect(items.count == 45)
        try await store.close()
    }

    @Test func aFollowerAndTimeTravelJudgeSnapshotsTheSameWay() async throws {
        let dir = TemporaryDirectory("ek-judge")
        let (store, items) = try Self.open(dir.url)
        for i in 0..<30 { try await items.add(Item(id: i, round: 0)) }
        try await store.writeSnapshots()
        for i in 30..<40 { try await items.add(Item(id: i, round: 0)) }
        #expect(try items.entities(throughPosition: 34).count == 35)
        let follower = try EventStore(log: SegmentedLog.openReadOnly(at: dir.url), directory: dir.url, snapshotPolicy: .never)
        let followed = try EventSourcedRepository<Item>(store: follower, typeName: "Item")
        #expect(followed.count == 40 && followed.projection.eventsApplied == 10, "restored from the snapshot at 30")
        try await follower.close()
        try await store.close()
    }
}
