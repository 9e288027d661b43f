@testable import EventKernel
@testable import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// A snapshot is a record of what the log acknowledged (Docs/Durability.md, "What counts as
/// torn"): a writer's open never truncates, as a torn write, a batch a snapshot of the current
/// history covers. It refuses, as a reader does, with the file, offset and position, and leaves
/// every file as it was. A tail beyond every snapshot is still a torn write, repaired silently.
@Suite struct SnapshotBoundsRecoveryTests {
    struct Note: Identifiable, Codable, Sendable, Equatable {
        var id: UUID
        var text: String
    }

    /// A closed store: `batches` saves, one batch each, then a close that writes the snapshot.
    static func closedStore(_ dir: TemporaryDirectory, batches: Int = 5, snapshots: SnapshotPolicy = .default) async throws -> [Note] {
        let store = try EventStore.open(at: dir.url, snapshotPolicy: snapshots)
        let notes = try EventSourcedRepository<Note>(store: store, typeName: "Note")
        var saved: [Note] = []
        for i in 0..<batches {
            let note = Note(id: UUID(), text: "note \(i) " + String(repeating: "x", count: 40))
            try await notes.add(note)
            saved.append(note)
        }
        try await store.close()
        return saved
    }

    /// The active segment's path and batches, as a reader sees them.
    static func lastSegment(_ dir: TemporaryDirectory) throws -> (path: String, batches: [BatchLocation]) {
        let log = try SegmentedLog.openReadOnly(at: dir.url)
        let segment = log.core.state.withLock { $0.segments.last! }
        return (segment.file.path, segment.batches)
    }

    static func removeCheckpoints(_ dir: TemporaryDirectory) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) where name.hasSuffix(".ckpt") {
            try FileManager.default.removeItem(at: dir.file(name))
        }
    }

    /// Every file under the store, by relative path.
    static func contents(_ dir: TemporaryDirectory) throws -> [String: Data] {
        var all: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: dir.path)!
        while let name = enumerator.nextObject() as? String {
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: dir.file(name).path, isDirectory: &isDirectory)
            all[name] = isDirectory.boolValue ? Data() : try Data(contentsOf: dir.file(name))
        }
        return all
    }

    static func open(_ dir: TemporaryDirectory) throws -> (EventStore, EventSourcedRepository<Note>) {
        let store = try EventStore.open(at: dir.url)
        return (store, try EventSourcedRepository<Note>(store: store, typeName: "Note"))
    }

    @Test func aWriterRefusesToCutABatchASnapshotCovers() async throws {
        let dir = TemporaryDirectory("ek-ack-tail")
        _ = try await Self.closedStore(dir)
        let snapshots = SnapshotDirectory(storeDirectory: dir.url).acknowledgedPositions()
        #expect(snapshots.map(\.nextPosition).contains(5), "the close wrote a snapshot covering every event: \(snapshots)")
        let (segment, batches) = try Self.lastSegment(dir)
        let last = batches.last!
        // The damage sweep's two cases: no checkpoint, one bit flipped in the last batch's payload.
        try Self.removeCheckpoints(dir)
        try flipBit(in: segment, at: last.offset + Int64(BatchHeader.size) + 3)
        let before = try Self.contents(dir)

        let error = #expect(throws: RepositoryError.self) { _ = try Self.open(dir) }
        let logError = try #require(error?.logError, "\(String(describing: error))")
        #expect(logError.code == .corruption)
        #expect(logError.file == segment && logError.offset == last.offset && logError.position == last.firstPosition, "\(logError)")
        #expect(logError.message.contains("snapshot"), "\(logError)")
        #expect(try Self.contents(dir) == before, "nothing written, nothing truncated, nothing moved")
        // A reader refuses too (through the snapshot's anchor), and writes nothing either.
        #expect(throws: RepositoryError.self) {
            let reader = try EventStore(log: try SegmentedLog.openReadOnly(at: dir.url), directory: dir.url, snapshotPolicy: .never)
            _ = try EventSourcedRepository<Note>(store: reader, typeName: "Note")
        }
        #expect(try Self.contents(dir) == before)
    }

    @Test func aWriterRefusesALogThatEndsBeforeASnapshot() async throws {
        let dir = TemporaryDirectory("ek-ack-short")
        _ = try await Self.closedStore(dir)
        let (segment, batches) = try Self.lastSegment(dir)
        // The last batch gone whole (cut at its boundary), and no checkpoint to tell.
        try Self.removeCheckpoints(dir)
        let handle = try FileHandle(forUpdating: URL(filePath: segment))
        try handle.truncate(atOffset: UInt64(batches.last!.offset))
        try handle.close()
        // Nothing looks torn here: the snapshot's anchor is what finds the loss (SnapshotBindingTests).
        let error = #expect(throws: RepositoryError.self) { _ = try Self.open(dir) }
        #expect(error?.logError?.code == .corruption, "\(String(describing: error))")
        #expect(error?.logError?.file?.hasPrefix(dir.file("snapshots").path) == true, "names the snapshot: \(String(describing: error))")
    }

    @Test func aTornTailBeyondTheSnapshotIsStillRepairedSilently() async throws {
        // Half a batch after everything the snapshot covers, no checkpoint: a crash mid-write.
        let dir = TemporaryDirectory("ek-ack-torn")
        let saved = try await Self.closedStore(dir)
        let (segment, batches) = try Self.lastSegment(dir)
        try Self.removeCheckpoints(dir)
        let handle = try FileHandle(forUpdating: URL(filePath: segment))
        try handle.seek(toOffset: UInt64(batches.last!.endOffset))
        try handle.write(contentsOf: Data(repeating: 0xAB, count: 80))
        try handle.close()
        let (store, notes) = try Self.open(dir)
        #expect((store.log as? SegmentedLog)?.recoveryReport.truncatedTail?.offset == batches.last!.endOffset)
        #expect(notes.fetchAll() == saved)
        try await store.close()
    }

    @Test func aDamagedBatchNoSnapshotCoversIsStillATornWrite() async throws {
        // Events 0..<5 snapshotted; a second session without snapshots adds one more batch,
        // which only its checkpoint records. Without the checkpoint, a bad last batch is beyond
        // everything the store recorded: a torn write, cut as before.
        let dir = TemporaryDirectory("ek-ack-beyond")
        let saved = try await Self.closedStore(dir)
        do {
            let store = try EventStore.open(at: dir.url, snapshotPolicy: .never)
            let notes = try EventSourcedRepository<Note>(store: store, typeName: "Note")
            try await notes.add(Note(id: UUID(), text: "after the snapshot"))
            try await store.close()
        }
        let (segment, batches) = try Self.lastSegment(dir)
        let last = batches.last!
        #expect(last.firstPosition == 5)
        try Self.removeCheckpoints(dir)
        try flipBit(in: segment, at: last.offset + Int64(BatchHeader.size) + 3)
        let (store, notes) = try Self.open(dir)
        #expect((store.log as? SegmentedLog)?.recoveryReport.truncatedTail?.offset == last.offset)
        #expect(notes.fetchAll() == saved)
        try await store.close()
    }
}
