@testable import EventLog
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
import EventKernelTestSupport

/// The rules of one segment file, each with its one home in `Segment`: creation, appends and
/// the growth of the reserved space, sealing, trimming at close, the checkpoint and the
/// recovery rule it holds the segment to, an unfinished creation, names.
@Suite("Segment: creation, appends, sealing, checkpoint")
struct SegmentTests {
    /// A store directory with a new segment in it, written through a recording file layer.
    struct Fixture {
        let dir = TemporaryDirectory("segment")
        let io: RecordingFileIO
        let configuration: SegmentedLog.Configuration
        /// The readers' view of the segment.
        var segment: Segment
        /// The writer's handle on it.
        var active: Segment.Active

        init(base: LogPosition = 0, segmentSize: Int = 4096, preallocationStep: Int = 4 << 20) throws {
            io = RecordingFileIO(directory: dir.path)
            var configuration = Self.configuration(io, segmentSize: segmentSize)
            configuration.preallocationStep = preallocationStep
            self.configuration = configuration
            (segment, active) = try Segment.create(base: base, directory: dir.path, configuration: configuration)
        }

        /// Preallocated segments of `segmentSize`, uncompressed, written through `io`.
        static func configuration(_ io: RecordingFileIO, segmentSize: Int, preallocate: Bool = true) -> SegmentedLog.Configuration {
            var configuration = SegmentedLog.Configuration(segmentSize: segmentSize, compression: .none, preallocate: preallocate)
            configuration.fileIO = io
            return configuration
        }

        func path(_ name: String) -> String { dir.path + "/" + name }

        /// Creates another segment in the same directory.
        func create(base: LogPosition) throws -> (segment: Segment, active: Segment.Active) {
            try Segment.create(base: base, directory: dir.path, configuration: configuration)
        }

        /// Appends a batch of `count` records (of `size` bytes) and publishes it to the
        /// readers' view, as the writer does.
        mutating func append(_ count: Int, size: Int = 100) throws {
            let first = Int(active.nextPosition)
            var bytes: [UInt8] = [], scratch: [UInt8] = []
            let header = try BatchPayload.encodeBatch((first..<(first + count)).map { entry($0, size: size) },
                                                      firstPosition: active.nextPosition, codec: .none, into: &bytes, scratch: &scratch)
            let location = BatchLocation(firstPosition: active.nextPosition, positionCount: header.positionCount,
                                         batchLength: UInt32(header.batchLength), offset: active.dataEnd,
                                         minTimestamp: header.minTimestamp, maxTimestamp: header.maxTimestamp)
            try active.append(bytes, batches: [location], synchronize: true)
            segment.add(location)
        }
    }

    static func isCorruption(_ error: any Error, file: String, offset: Int64, position: LogPosition) -> Bool {
        guard let error = error as? LogError else { return false }
        return error.code == .corruption && error.file == file && error.offset == offset && error.position == position
    }

    @Test("a new segment has a valid header and reserved space, synced with its directory; it never replaces a file")
    func creation() throws {
        let f = try Fixture(base: 1000, segmentSize: 8192)
        let (segment, active) = (f.segment, f.active)
        let name = Segment.Name.segment(1000)
        #expect(f.io.calls == ["write \(name) @0 32", "preallocate \(name) 8192", "sync \(name)", "sync ."])
        #expect(segment.basePosition == 1000 && segment.nextPosition == 1000 && segment.batches.isEmpty)
        #expect(segment.dataEnd == Int64(SegmentHeader.size) && !segment.sealed)
        #expect(active.basePosition == 1000 && active.nextPosition == 1000 && active.batchCount == 0)
        #expect(active.dataEnd == Int64(SegmentHeader.size))
        #if os(Linux)
        #expect(active.preallocatedTo == 8192)
        #expect(try segment.file.size() == 8192)
        #endif
        try Segment.checkHeader(of: segment.file, base: 1000)
        #expect(performing: { try Segment.checkHeader(of: segment.file, base: 999) }, throws: {
            Self.isCorruption($0, file: segment.file.path, offset: 16, position: 999)
        })
        #expect(performing: { _ = try f.create(base: 1000) }, throws: { error in
            (error as? LogError).map { $0.file == f.path(name) && $0.systemErrorNumber == EEXIST } ?? false
        })
    }

    @Test("appends land after the last batch; one that runs past the reserved space first grows it to the write's end at a segment's size")
    func appendsAndGrowth() throws {
        var f = try Fixture()
        let name = Segment.Name.segment(0)
        let reserved = f.active.preallocatedTo
        f.io.reset()
        try f.append(3)
        let first = f.segment.batches[0]
        #if os(Linux)  // elsewhere nothing is reserved: every append grows the file
        #expect(f.io.calls == ["write \(name) @32 \(first.batchLength)", "dataSync \(name)"])
        #expect(f.active.preallocatedTo == reserved)
        #endif
        #expect(f.active.dataEnd == first.endOffset && f.active.nextPosition == 3 && f.active.batchCount == 1)

        // A segment with a batch is sealed before one that would take it past its size; an
        // empty one takes any batch (a batch larger than a segment gets a segment of its own).
        let room = Int(4096 - f.active.dataEnd)
        #expect(!f.active.mustSeal(beforeAdding: room, pendingBytes: 0, pendingBatches: 0))
        #expect(f.active.mustSeal(beforeAdding: room + 1, pendingBytes: 0, pendingBatches: 0))
        #expect(f.active.mustSeal(beforeAdding: 1, pendingBytes: room, pendingBatches: 1))
        let empty = try f.create(base: 3).active
        #expect(!empty.mustSeal(beforeAdding: 1 << 20, pendingBytes: 0, pendingBatches: 0))
        #expect(empty.mustSeal(beforeAdding: 1 << 20, pendingBytes: 100, pendingBatches: 1))

        f.io.reset()
        try f.append(3, size: 2000)
        let second = f.segment.batches[1]
        #if os(Linux)
        // The batch takes the segment past its size: it is sealed before another batch, so
        // nothing is reserved past the write.
        #expect(f.io.calls == ["preallocate \(name) \(second.endOffset)", "write \(name) @\(first.endOffset) \(second.batchLength)", "dataSync \(name)"])
        #expect(f.active.preallocatedTo == second.endOffset)
        #expect(try f.segment.file.size() == second.endOffset)
        #endif
        #expect(f.active.dataEnd == second.endOffset && f.active.nextPosition == 6 && f.active.batchCount == 2)
        let scan = try SegmentScanner(file: f.segment.file, basePosition: 0).scan()
        #expect(scan.batches == f.segment.batches && scan.end.isClean && scan.nextPosition == 6)
    }

    @Test("space is reserved a step ahead of the data: at creation, when a write runs past it, on resuming, never past the segment size")
    func reservationGrowsInSteps() throws {
        var f = try Fixture(segmentSize: 16384, preallocationStep: 4096)
        let name = Segment.Name.segment(0)
        let header = Int64(SegmentHeader.size)
        #expect(f.io.calls == ["write \(name) @0 \(header)", "preallocate \(name) \(header + 4096)", "sync \(name)", "sync ."])
        #if os(Linux)
        #expect(try f.active.preallocatedTo == header + 4096 && f.segment.file.size() == header + 4096)
        #endif
        f.io.reset()
        try f.append(3)  // inside the reserved space: no growth
        #if os(Linux)
        #expect(f.io.calls.allSatisfy { !$0.hasPrefix("preallocate") })
        #endif
        f.io.reset()
        try f.append(3, size: 1500)  // past it: a step past this write
        let second = f.segment.batches[1]
        #if os(Linux)
        #expect(f.io.calls.first == "preallocate \(name) \(second.endOffset + 4096)")
        #expect(try f.active.preallocatedTo == second.endOffset + 4096 && f.segment.file.size() == second.endOffset + 4096)
        #endif

        // Closed (trimmed) here and resumed: a step past its data, well inside the segment.
        var closed = f.active
        try closed.trimPreallocation()
        f.io.reset()
        let resumedEarly = try Segment.Active(resuming: f.segment, directory: f.dir.path, configuration: f.configuration)
        #if os(Linux)
        #expect(f.io.calls == ["preallocate \(name) \(second.endOffset + 4096)", "sync \(name)"])
        #expect(resumedEarly.preallocatedTo == second.endOffset + 4096)
        #endif
        f.io.reset()
        try f.append(6, size: 1500)  // past it again, within a step of the segment's size: up to it
        #if os(Linux)
        #expect(f.io.calls.first == "preallocate \(name) 16384")
        #expect(try f.active.preallocatedTo == 16384 && f.segment.file.size() == 16384)
        #endif

        // A resumed segment (trimmed at close) reserves a step past its data again.
        try f.active.trimPreallocation()
        f.io.reset()
        let resumed = try Segment.Active(resuming: f.segment, directory: f.dir.path, configuration: f.configuration)
        #if os(Linux)
        #expect(f.io.calls == ["preallocate \(name) 16384", "sync \(name)"])
        #expect(resumed.preallocatedTo == 16384)
        #endif
        #expect(resumed.dataEnd == f.segment.dataEnd)
        #expect(Segment.Active.reservation(after: 100, step: 4096, segmentSize: 16384) == 4196)
        #expect(Segment.Active.reservation(after: 15000, step: 4096, segmentSize: 16384) == 16384)
        #expect(Segment.Active.reservation(after: 20000, step: 4096, segmentSize: 16384) == 20000)
        // A step of Int.max asks for the whole segment and does not overflow.
        #expect(Segment.Active.reservation(after: 100, step: .max, segmentSize: 16384) == 16384)
        #expect(Segment.Active.reservation(after: 20000, step: .max, segmentSize: 16384) == 20000)
    }

    @Test("a preallocation step below 4 KiB is refused with the value")
    func aTinyPreallocationStepIsRefused() throws {
        let dir = TemporaryDirectory("segment-step")
        var configuration = SegmentedLog.Configuration()
        configuration.preallocationStep = 100
        #expect(performing: { _ = try SegmentedLog.open(at: dir.url, configuration: configuration) }, throws: {
            ($0 as? LogError).map { $0.code == .invalidArgument && $0.message.contains("100") } ?? false
        })
    }

    @Test("sealing trims, syncs, writes the index and drops the checkpoint; the segment reopens through its index alone")
    func sealAndReopen() throws {
        var f = try Fixture()
        for _ in 0..<3 { try f.append(2) }
        // A checkpoint left by an earlier clean close: the index supersedes it.
        f.active.writeCheckpoint(batches: f.segment.batches)
        let checkpoint = f.path(Segment.Name.checkpoint(0))
        #expect(StoreDirectory.exists(checkpoint))
        f.io.reset()
        try f.active.seal(batches: f.segment.batches)
        let segment = f.segment
        let name = Segment.Name.segment(0), index = Segment.Name.index(0)
        let indexBytes = SegmentIndexFile.headerSize + 3 * SegmentIndexFile.entrySize + 4
        #expect(f.io.calls == ["truncate \(name) \(segment.dataEnd)", "sync \(name)",
                               "write \(index).tmp @0 \(indexBytes)", "sync \(index).tmp", "sync ."])
        #expect(try segment.file.size() == segment.dataEnd)
        #expect(!StoreDirectory.exists(checkpoint))
        guard case .success(let written) = try Segment.readSideFile(at: f.path(index)) else {
            Issue.record("no valid index after sealing")
            return
        }
        #expect(written == segment.index)
        #expect(written.nextPosition == 6 && written.dataLength == segment.dataEnd)

        // Reopened through its index: no payload is read (a damaged one goes unnoticed until
        // read), nothing is rebuilt, and a writer starts the next segment where it ends.
        try flipBit(in: segment.file.path, at: segment.batches[0].offset + Int64(BatchHeader.size) + 3)
        var report = RecoveryReport()
        let loaded = try LogLoader(directory: f.dir.path, writable: true, configuration: f.configuration).load(report: &report)
        #expect(report.rebuiltIndexes.isEmpty && report.truncatedTail == nil)
        #expect(loaded.segments.count == 2)
        #expect(loaded.segments[0].sealed && loaded.segments[0].batches == segment.batches)
        #expect(loaded.segments[0].nextPosition == 6 && loaded.segments[0].dataEnd == segment.dataEnd)
        #expect(loaded.segments[0].minTimestamp == segment.minTimestamp && loaded.segments[0].maxTimestamp == segment.maxTimestamp)
        let next = try #require(loaded.active)
        #expect(next.basePosition == 6 && next.nextPosition == 6 && next.batchCount == 0)
        #expect(loaded.segments[1].basePosition == 6 && !loaded.segments[1].sealed)
        #expect(try Segment.bases(in: f.dir.path) == [0, 6])
    }

    @Test("at close the reserved tail is trimmed; a resumed segment continues where its data ends, its space reserved again")
    func trimAndResume() throws {
        var f = try Fixture(segmentSize: 8192)
        try f.append(4)
        let name = Segment.Name.segment(0)
        f.io.reset()
        try f.active.trimPreallocation()
        #expect(f.io.calls == ["truncate \(name) \(f.segment.dataEnd)", "sync \(name)"])
        #expect(try f.segment.file.size() == f.segment.dataEnd)
        f.io.reset()
        try f.active.trimPreallocation()
        #expect(f.io.calls.isEmpty, "a trimmed segment is trimmed again")

        f.io.reset()
        let resumed = try Segment.Active(resuming: f.segment, directory: f.dir.path, configuration: f.configuration)
        #expect(f.io.calls == ["preallocate \(name) 8192", "sync \(name)"])
        #expect(resumed.dataEnd == f.segment.dataEnd && resumed.nextPosition == 4 && resumed.batchCount == 1)
        #expect(resumed.preallocatedTo == 8192)
        f.io.reset()
        let unreserved = try Segment.Active(resuming: f.segment, directory: f.dir.path,
                                            configuration: Fixture.configuration(f.io, segmentSize: 8192, preallocate: false))
        #expect(f.io.calls.isEmpty)
        #expect(try unreserved.preallocatedTo == f.segment.file.size())
    }

    enum Mismatch: String, CaseIterable, Sendable {
        /// The segment cut inside its last listed batch.
        case shorter
        /// The last listed batch's header damaged.
        case lastBatchHeader
        /// The checkpoint of another segment.
        case otherSegment
        /// The segment deleted, its checkpoint left.
        case orphaned
    }

    @Test("a checkpoint that no longer matches its segment is damage, with file, offset and position", arguments: Mismatch.allCases)
    func checkpointMismatch(_ mismatch: Mismatch) throws {
        var f = try Fixture(segmentSize: 8192)
        for _ in 0..<4 { try f.append(3) }
        try f.active.trimPreallocation()
        f.active.writeCheckpoint(batches: f.segment.batches)
        let segment = f.segment
        let checkpointPath = f.path(Segment.Name.checkpoint(0))
        let matching = try #require(try Segment.loadCheckpoint(of: segment.file, base: 0, directory: f.dir.path, removingInvalid: false))
        #expect(matching == f.active.index(of: segment.batches))

        let last = segment.batches[3]
        let (file, base, damage): (OpenFile, LogPosition, (any Error) -> Bool)
        switch mismatch {
        case .shorter:
            let cut = last.offset + 10
            try PosixFileIO().truncate(descriptor: segment.file.descriptor, path: segment.file.path, length: cut)
            // Located where the loss begins, the start of the batch cut short (where repair cuts).
            (file, base, damage) = (segment.file, 0, { Self.isCorruption($0, file: segment.file.path, offset: last.offset, position: last.firstPosition) })
        case .lastBatchHeader:
            try flipBit(in: segment.file.path, at: last.offset + 9)
            (file, base, damage) = (segment.file, 0, { Self.isCorruption($0, file: segment.file.path, offset: last.offset, position: last.firstPosition) })
        case .otherSegment:
            let other = try f.create(base: 12).segment
            let otherCheckpoint = f.path(Segment.Name.checkpoint(12))
            try FileManager.default.copyItem(atPath: checkpointPath, toPath: otherCheckpoint)
            (file, base, damage) = (other.file, 12, { Self.isCorruption($0, file: otherCheckpoint, offset: 16, position: 12) })
        case .orphaned:
            try FileManager.default.removeItem(atPath: segment.file.path)
            #expect(performing: { try Segment.checkForOrphanedCheckpoints(in: f.dir.path, segmentBases: []) }, throws: {
                Self.isCorruption($0, file: checkpointPath, offset: 0, position: 0)
            })
            // A checkpoint listing nothing vouches for nothing: no damage when it is orphaned.
            try Data(SegmentIndexFile(basePosition: 0, nextPosition: 0, dataLength: Int64(SegmentHeader.size), batches: []).encoded())
                .write(to: URL(filePath: checkpointPath))
            try Segment.checkForOrphanedCheckpoints(in: f.dir.path, segmentBases: [])
            return
        }
        #expect(performing: { _ = try Segment.loadCheckpoint(of: file, base: base, directory: f.dir.path, removingInvalid: true) }, throws: damage)
        // verify holds the segment to the same rule, through the same check.
        let report = try SegmentedLog.verify(at: f.dir.url)
        let first = try #require(report.firstDamage)
        #expect(damage(first))
    }

    @Test("a checkpoint failing its own checksum is ignored, and a writer removes it")
    func invalidCheckpoint() throws {
        var f = try Fixture()
        try f.append(3)
        f.active.writeCheckpoint(batches: f.segment.batches)
        let checkpointPath = f.path(Segment.Name.checkpoint(0))
        try flipBit(in: checkpointPath, at: 30)
        #expect(try Segment.readCheckpoint(at: checkpointPath) == nil)
        #expect(try Segment.loadCheckpoint(of: f.segment.file, base: 0, directory: f.dir.path, removingInvalid: false) == nil)
        #expect(StoreDirectory.exists(checkpointPath))
        #expect(try Segment.loadCheckpoint(of: f.segment.file, base: 0, directory: f.dir.path, removingInvalid: true) == nil)
        #expect(!StoreDirectory.exists(checkpointPath))
        // An empty segment's checkpoint is removed rather than written.
        f.active.writeCheckpoint(batches: f.segment.batches)
        let emptyCheckpoint = f.path(Segment.Name.checkpoint(3))
        try FileManager.default.copyItem(atPath: checkpointPath, toPath: emptyCheckpoint)
        try f.create(base: 3).active.writeCheckpoint(batches: [])
        #expect(!StoreDirectory.exists(emptyCheckpoint))
    }

    @Test("a header cut short and then only zeros is an unfinished creation, finished on request; anything else is not")
    func unfinishedCreation() throws {
        let header = SegmentHeader(basePosition: 7).encoded()
        #expect(Segment.isUnfinishedCreation([], base: 7))
        #expect(Segment.isUnfinishedCreation(Array(header.prefix(12)), base: 7))
        #expect(Segment.isUnfinishedCreation(Array(header.prefix(12)) + [UInt8](repeating: 0, count: 4096), base: 7))
        var holes = header
        holes[20...] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]  // unwritten bytes read as zeros
        #expect(Segment.isUnfinishedCreation(holes, base: 7))
        #expect(!Segment.isUnfinishedCreation(header + [0, 0, 1], base: 7), "data after the header")
        #expect(!Segment.isUnfinishedCreation(SegmentHeader(basePosition: 6).encoded(), base: 7), "another segment's header")

        let dir = TemporaryDirectory("segment")
        let path = dir.path + "/" + Segment.Name.segment(7)
        try Data(header.prefix(12) + [UInt8](repeating: 0, count: 100)).write(to: URL(filePath: path))
        let file = try OpenFile.open(path, flags: O_RDWR)
        guard case .failure(let error) = try Segment.readHeader(of: file, base: 7) else {
            Issue.record("a partial header decoded")
            return
        }
        #expect(error.file == path && error.position == 7 && error.offset == 0)
        #expect(try Segment.isUnfinishedCreation(of: file, base: 7, directory: dir.path))
        try Segment.finishCreation(of: file, base: 7, io: PosixFileIO())
        try Segment.checkHeader(of: file, base: 7)
    }

    @Test("segment files are found by name, in position order; side files and strangers are not segments")
    func bases() throws {
        let dir = TemporaryDirectory("segment")
        for name in [Segment.Name.segment(100), Segment.Name.segment(0), Segment.Name.index(0), Segment.Name.checkpoint(100),
                     "100.log", "00000000000000000100.log.0.torn", "server.log"] {
            _ = FileManager.default.createFile(atPath: dir.path + "/" + name, contents: nil)
        }
        #expect(try Segment.bases(in: dir.path) == [0, 100])
        #expect(Segment.Name.basePosition(ofCheckpointNamed: Segment.Name.checkpoint(100)) == 100)
        #expect(Segment.Name.basePosition(ofCheckpointNamed: Segment.Name.index(100)) == nil)
        #expect(!Segment.Name.containsSegment(["server.log", "eventkernel.store"]))
    }
}

/// Forwards to the real system calls and records each as `<call> <file> <arguments>`, with
/// paths relative to `directory` (the directory itself is `.`).
final class RecordingFileIO: LogFileIO {
    let directory: String
    private let recorded = Mutex<[String]>([])
    private let real = PosixFileIO()

    init(directory: String) { self.directory = directory }

    var calls: [String] { recorded.withLock { $0 } }
    func reset() { recorded.withLock { $0.removeAll() } }

    private func note(_ call: String, _ path: String, _ arguments: String = "") {
        let name = path == directory ? "." : path.hasPrefix(directory + "/") ? String(path.dropFirst(directory.count + 1)) : path
        recorded.withLock { $0.append(arguments.isEmpty ? "\(call) \(name)" : "\(call) \(name) \(arguments)") }
    }

    func write(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) -> Int {
        note("write", path, "@\(offset) \(bytes.count)")
        return try real.write(bytes, toAbsoluteOffset: offset, descriptor: descriptor, path: path)
    }

    func synchronizeData(descriptor: Int32, path: String) throws(LogError) {
        note("dataSync", path)
        try real.synchronizeData(descriptor: descriptor, path: path)
    }

    func synchronize(descriptor: Int32, path: String) throws(LogError) {
        note("sync", path)
        try real.synchronize(descriptor: descriptor, path: path)
    }

    func preallocate(descriptor: Int32, path: String, length: Int64) throws(LogError) {
        note("preallocate", path, "\(length)")
        try real.preallocate(descriptor: descriptor, path: path, length: length)
    }

    func truncate(descriptor: Int32, path: String, length: Int64) throws(LogError) {
        note("truncate", path, "\(length)")
        try real.truncate(descriptor: descriptor, path: path, length: length)
    }
}
