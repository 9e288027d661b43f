@testable import EventLog
import Foundation
import Testing
import EventKernelTestSupport

@Suite("Recovery, damage, repair, locking")
struct RecoveryTests {
    /// Writes `batches` batches of 3 records into a fresh store and closes it.
    /// Returns the active segment's path and the offset of its last batch.
    static func makeStore(_ dir: TemporaryDirectory, batches: Int = 5, configuration: SegmentedLog.Configuration = .init()) async throws -> (segment: String, lastBatchOffset: Int64, size: Int64) {
        let log = try SegmentedLog.open(at: dir.url, configuration: configuration)
        for b in 0..<batches { _ = try await log.append((0..<3).map { entry(b * 3 + $0, size: 40) }) }
        let segment = log.core.state.withLock { $0.segments.last! }
        let lastOffset = segment.batches.last!.offset
        let size = segment.dataEnd
        try await log.close()
        return (segment.file.path, lastOffset, size)
    }

    @Test("the active segment cut at every byte offset of its last batch recovers every earlier record and nothing else")
    func truncateEveryOffset() async throws {
        let template = TemporaryDirectory("template")
        let (segment, lastOffset, size) = try await Self.makeStore(template)
        let name = URL(filePath: segment).lastPathComponent
        let original = try Data(contentsOf: URL(filePath: segment))
        for cut in lastOffset..<size {
            let dir = TemporaryDirectory("cut")
            try original.prefix(Int(cut)).write(to: dir.file(name))
            let log = try SegmentedLog.open(at: dir.url)
            let records = try allRecords(log)
            #expect(records.map(\.position) == Array(0..<12), "cut at \(cut)")
            #expect(records.map(\.payload) == (0..<12).map { entry($0, size: 40).payload })
            if cut > lastOffset {
                let tail = try #require(log.recoveryReport.truncatedTail, "cut at \(cut)")
                #expect(tail.offset == lastOffset)
                #expect(tail.droppedBytes > 0)
                #expect(tail.savedTo.map { FileManager.default.fileExists(atPath: $0) } == true)
            }
            // The log continues at the recovered end.
            #expect(try await log.append(entry(99)) == 12)
            try await log.close()
            #expect(try SegmentedLog.verify(at: dir.url).isIntact)
        }
    }

    @Test("a torn write inside preallocated space (bytes after the tear are zeros) is truncated, not taken for data")
    func tornInsidePreallocation() async throws {
        let template = TemporaryDirectory("template")
        let (segment, lastOffset, size) = try await Self.makeStore(template)
        let name = URL(filePath: segment).lastPathComponent
        let original = try Data(contentsOf: URL(filePath: segment))
        for cut in stride(from: lastOffset, to: size, by: 7) {
            let dir = TemporaryDirectory("torn")
            var bytes = original.prefix(Int(cut))
            bytes.append(Data(count: 1 << 20))  // preallocated zeros after the tear
            try bytes.write(to: dir.file(name))
            let log = try SegmentedLog.open(at: dir.url)
            #expect(try allRecords(log).count == 12, "tear at \(cut)")
            try await log.close()
        }
    }

    @Test("damage inside the active segment followed by valid batches is an error naming file, offset and position")
    func activeSegmentMidDamage() async throws {
        let dir = TemporaryDirectory()
        let (segment, _, _) = try await Self.makeStore(dir)
        let second = try SegmentScanner(file: try OpenFile.open(segment, flags: O_RDONLY), basePosition: 0).scan().batches[1]
        try flipBit(in: segment, at: second.offset + Int64(BatchHeader.size) + 3)
        func isTheDamage(_ error: any Error) -> Bool {
            guard let error = error as? LogError else { return false }
            return error.code == .corruption && error.file == segment && error.offset == second.offset && error.position == 3
        }
        // After a clean close the checkpoint vouches for the batches it lists, as a sealed
        // segment's index does: open succeeds, and the damage is named when read and by verify.
        #expect(FileManager.default.fileExists(atPath: dir.file(SegmentName.checkpoint(0)).path))
        let log = try SegmentedLog.open(at: dir.url)
        #expect(throws: LogError.self, performing: { _ = try log.read(from: 0) })
        #expect { _ = try log.read(from: 0) } throws: { isTheDamage($0) }
        try await log.close()
        let report = try SegmentedLog.verify(at: dir.url)
        #expect(!report.isIntact)
        #expect(report.firstDamage?.offset == second.offset)
        // After a crash (no checkpoint) the whole active segment is scanned: open refuses.
        try FileManager.default.removeItem(at: dir.file(SegmentName.checkpoint(0)))
        #expect { _ = try SegmentedLog.open(at: dir.url) } throws: { isTheDamage($0) }
    }

    @Test("an older checkpoint covers a prefix (the tail after it is scanned); a checkpoint failing its own checksum is ignored")
    func checkpointValidation() async throws {
        let dir = TemporaryDirectory()
        let (segment, _, _) = try await Self.makeStore(dir)
        let checkpoint = dir.file(SegmentName.checkpoint(0)).path
        #expect(FileManager.default.fileExists(atPath: checkpoint))
        // An older checkpoint (as after a crash that followed later appends) covers a prefix:
        // what follows it is found by scanning past it.
        let stale = try Data(contentsOf: URL(filePath: checkpoint))
        do {
            let log = try SegmentedLog.open(at: dir.url)
            _ = try await log.append(entry(100))
            try await log.close()
        }
        try stale.write(to: URL(filePath: checkpoint))
        let reopened = try SegmentedLog.open(at: dir.url)
        #expect(try allRecords(reopened).map(\.position) == Array(0..<16))
        #expect(try reopened.read(from: 15).first?.payload == entry(100).payload)
        try await reopened.close()
        _ = segment
        // A damaged checkpoint is ignored (and the segment scanned), never trusted.
        try flipBit(in: checkpoint, at: 20)
        let again = try SegmentedLog.open(at: dir.url)
        #expect(try allRecords(again).count == 16)
        try await again.close()
    }

    @Test("a bit flip in a sealed segment's payload or header is named by verify and by reads", arguments: [false, true])
    func sealedSegmentBitFlip(inHeader: Bool) async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentedLog.open(at: dir.url, configuration: .init(segmentSize: 8 << 10))
        for i in 0..<200 { _ = try await log.append([entry(i, size: 200)]) }
        try await log.close()
        let sealed = dir.file(try segmentFiles(in: dir)[0]).path
        let scan = try SegmentScanner(file: try OpenFile.open(sealed, flags: O_RDONLY), basePosition: 0).scan()
        let victim = scan.batches[2]
        let flipAt = inHeader ? victim.offset + 20 : victim.offset + Int64(BatchHeader.size) + 5
        try flipBit(in: sealed, at: flipAt)

        let report = try SegmentedLog.verify(at: dir.url)
        let damage = try #require(report.firstDamage)
        #expect(damage.file == sealed)
        #expect(damage.offset == victim.offset)
        #expect(damage.position == victim.firstPosition)
        #expect(damage.description.contains(sealed))

        // Opening reads only the index of a sealed segment; the damage shows when read.
        let reopened = try SegmentedLog.open(at: dir.url, configuration: .init(segmentSize: 8 << 10))
        #expect(try reopened.read(from: 0, limit: Int(victim.firstPosition)).count == Int(victim.firstPosition))
        #expect {
            _ = try reopened.read(from: 0)
        } throws: { error in
            (error as? LogError).map { $0.code == .corruption && $0.file == sealed && $0.offset == victim.offset } ?? false
        }
        try await reopened.close()
    }

    @Test("repair cuts at the first damage, keeps the dropped bytes, and the store opens again")
    func repairCutsAtDamage() async throws {
        let dir = TemporaryDirectory()
        let configuration = SegmentedLog.Configuration(segmentSize: 8 << 10)
        let log = try SegmentedLog.open(at: dir.url, configuration: configuration)
        for i in 0..<200 { _ = try await log.append([entry(i, size: 200)]) }
        try await log.close()
        let files = try segmentFiles(in: dir)
        let damaged = dir.file(files[1]).path
        let scan = try SegmentScanner(file: try OpenFile.open(damaged, flags: O_RDONLY), basePosition: UInt64(files[1].prefix(20))!).scan()
        let victim = scan.batches[1]
        try flipBit(in: damaged, at: victim.offset + Int64(BatchHeader.size) + 1)

        let repair = try SegmentedLog.repair(at: dir.url)
        let cut = try #require(repair.cut)
        #expect(cut.file == damaged)
        #expect(cut.offset == victim.offset)
        #expect(repair.firstDroppedPosition == victim.firstPosition)
        #expect(repair.droppedRecords == 200 - victim.firstPosition && repair.droppedRecordsAreExact,
                "every dropped record is counted: \(repair.droppedRecords)")
        #expect(repair.removedSideFiles.contains { $0.hasSuffix(".idx") })
        #expect(repair.droppedBytes > 0)
        #expect(!repair.savedFiles.isEmpty)
        for file in repair.savedFiles { #expect(FileManager.default.fileExists(atPath: file)) }
        #expect(try SegmentedLog.verify(at: dir.url).isIntact)

        let reopened = try SegmentedLog.open(at: dir.url, configuration: configuration)
        let records = try allRecords(reopened)
        #expect(records.count == Int(victim.firstPosition))
        #expect(records.map(\.payload) == (0..<Int(victim.firstPosition)).map { entry($0, size: 200).payload })
        #expect(try await reopened.append(entry(1000)) == victim.firstPosition)
        try await reopened.close()
        // Nothing to repair now.
        #expect(try SegmentedLog.repair(at: dir.url).cut == nil)
    }

    @Test("a missing or damaged segment index is rebuilt from its segment")
    func indexRebuilt() async throws {
        let dir = TemporaryDirectory()
        let configuration = SegmentedLog.Configuration(segmentSize: 8 << 10)
        let log = try SegmentedLog.open(at: dir.url, configuration: configuration)
        for i in 0..<100 { _ = try await log.append([entry(i, size: 200)]) }
        try await log.close()
        let indexes = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".idx") }.sorted()
        try FileManager.default.removeItem(at: dir.file(indexes[0]))
        try flipBit(in: dir.file(indexes[1]).path, at: 50)
        let verify = try SegmentedLog.verify(at: dir.url)
        #expect(verify.isIntact)
        #expect(verify.problems.count == 2)
        let reopened = try SegmentedLog.open(at: dir.url, configuration: configuration)
        #expect(reopened.recoveryReport.rebuiltIndexes.count == 2)
        #expect(try allRecords(reopened).count == 100)
        try await reopened.close()
        #expect(try SegmentedLog.verify(at: dir.url).problems.isEmpty)
    }

    @Test("a missing segment in the middle is reported, not skipped")
    func missingSegment() async throws {
        let dir = TemporaryDirectory()
        let configuration = SegmentedLog.Configuration(segmentSize: 8 << 10)
        let log = try SegmentedLog.open(at: dir.url, configuration: configuration)
        for i in 0..<150 { _ = try await log.append([entry(i, size: 200)]) }
        try await log.close()
        let files = try segmentFiles(in: dir)
        try FileManager.default.removeItem(at: dir.file(files[1]))
        #expect { _ = try SegmentedLog.open(at: dir.url, configuration: configuration) } throws: {
            ($0 as? LogError)?.code == .corruption && ($0 as? LogError)?.message.contains("not contiguous") == true
        }
        #expect(!(try SegmentedLog.verify(at: dir.url).isIntact))
    }

    @Test("a crash while creating a segment (empty or partial header) is recovered")
    func partialSegmentCreation() async throws {
        let dir = TemporaryDirectory()
        let (_, _, _) = try await Self.makeStore(dir, configuration: .init(segmentSize: 4096))
        let files = try segmentFiles(in: dir)
        let log = try SegmentedLog.open(at: dir.url, configuration: .init(segmentSize: 4096))
        let next = log.bounds.nextPosition
        try await log.close()
        // Simulate: the next segment file exists with half a header and zeros.
        let name = SegmentName.segment(next)
        if !files.contains(name) {
            // The last segment was sealed on roll; fabricate the partially created next one.
            var header = SegmentHeader(basePosition: next).encoded()
            header.removeLast(10)
            try Data(header + [UInt8](repeating: 0, count: 100)).write(to: dir.file(name))
        } else {
            try Data(SegmentHeader(basePosition: next).encoded().prefix(12)).write(to: dir.file(name))
        }
        let reopened = try SegmentedLog.open(at: dir.url, configuration: .init(segmentSize: 4096))
        #expect(try allRecords(reopened).count == Int(next))
        #expect(try await reopened.append(entry(7)) == next)
        try await reopened.close()
    }

    @Test("a second writer is refused in this process, and in another process")
    func secondWriterRefused() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentedLog.open(at: dir.url)
        #expect { _ = try SegmentedLog.open(at: dir.url) } throws: { error in
            guard let error = error as? LogError else { return false }
            return error.code == .locked && error.description.contains("LOCK")
        }
        let contended = try runHelper(["try-lock", dir.path])
        #expect(contended.status == 3, "helper output: \(contended.output)")
        #expect(contended.output.contains("locked"))
        // Read-only opens work alongside the writer.
        _ = try await log.append(entry(0))
        #expect(try SegmentedLog.openReadOnly(at: dir.url).bounds.nextPosition == 1)
        try await log.close()
        let free = try runHelper(["try-lock", dir.path])
        #expect(free.status == 0, "helper output: \(free.output)")
    }
}
