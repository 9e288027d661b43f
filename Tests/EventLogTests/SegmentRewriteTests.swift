@testable import EventLog
import Foundation
import Synchronization
import Testing
import KernelPrimitives
#if canImport(Glibc)
import Glibc
#endif
import EventKernelTestSupport

/// Rewriting sealed segments (what compaction is built on): sparse batches keep every position,
/// the rewrite is atomic at every step, readers walking meanwhile miss nothing, and a build
/// that cannot read sparse batches is told so by the store file.
@Suite("Segment rewrite: sparse batches, atomic replacement, online readers")
struct SegmentRewriteTests {
    /// A log of `count` records in batches of `perBatch`, in segments of 4 KiB (uncompressed,
    /// so that sizes are predictable), with a few sealed segments.
    static func filledLog(_ dir: TemporaryDirectory, count: Int = 600, perBatch: Int = 7,
                          io: (any LogFileIO)? = nil) async throws -> SegmentedLog {
        var configuration = SegmentedLog.Configuration(segmentSize: 4096, compression: .lz4, preallocate: false)
        if let io { configuration.fileIO = io }
        let log = try SegmentedLog.open(at: dir.url, configuration: configuration)
        var i = 0
        while i < count {
            let n = min(perBatch, count - i)
            _ = try await log.append((i..<(i + n)).map { entry($0, size: 40) })
            i += n
        }
        return log
    }

    /// What a decision leaves of `records`.
    static func applying(_ decide: (LogRecordView) -> RecordRewrite, to records: [LogRecord], in ranges: [Range<LogPosition>]) -> [LogRecord] {
        records.compactMap { record in
            guard ranges.contains(where: { $0.contains(record.position) }) else { return record }
            let view = record.payload.withUnsafeBytes { LogRecordView(position: record.position, timestamp: record.timestamp, payload: $0) }
            switch decide(view) {
            case .keep: return record
            case .remove: return nil
            case .replace(let payload): return LogRecord(position: record.position, timestamp: record.timestamp, payload: payload)
            }
        }
    }

    /// Removes every third record, replaces every fifth one that stays.
    static func thinning(_ record: LogRecordView) -> RecordRewrite {
        if record.position % 3 == 0 { return .remove }
        if record.position % 5 == 0 { return .replace(Array("replaced-\(record.position)".utf8)) }
        return .keep
    }

    @Test func rewrittenSegmentsKeepPositionsTimestampsAndTheRecordsKept() async throws {
        let dir = TemporaryDirectory("rewrite")
        let log = try await Self.filledLog(dir)
        let before = try allRecords(log)
        let bounds = log.bounds
        let sealed = log.sealedSegments
        #expect(sealed.count >= 3)
        var removed = 0, replaced = 0
        for segment in sealed {
            let report = try log.rewriteSealedSegment(startingAt: segment.lowerBound, Self.thinning)
            #expect(report.rewritten)
            #expect(report.positions == segment)
            #expect(report.recordsBefore == segment.count)
            #expect(report.bytesAfter < report.bytesBefore)
            #expect(try fileSize(dir.path + "/" + Segment.Name.segment(segment.lowerBound)) == report.bytesAfter)
            removed += report.recordsRemoved
            replaced += report.recordsReplaced
        }
        let expected = Self.applying(Self.thinning, to: before, in: sealed)
        #expect(removed == before.count - expected.count)
        #expect(replaced > 0)
        #expect(try allRecords(log) == expected)
        #expect(log.bounds.firstPosition == bounds.firstPosition && log.bounds.nextPosition == bounds.nextPosition, "positions stay")
        #expect(log.bounds.minTimestamp! >= bounds.minTimestamp! && log.bounds.maxTimestamp! <= bounds.maxTimestamp!,
                "a batch's timestamps are those of the records it holds")
        #expect(log.sealedSegments == sealed)
        // Reads from inside a gap start at the next record kept.
        let gap = sealed[1].lowerBound + 3 - sealed[1].lowerBound % 3
        #expect(try log.read(from: gap, limit: 1).first?.position == gap + 1)
        // Appends go on at the next position.
        let appended = try await log.append([entry(9_999, size: 10)])
        #expect(appended.lowerBound == bounds.nextPosition)
        let after = try allRecords(log)
        try await log.close()

        #expect(try StoreManifest.read(in: dir.path)?.features == [.sparseBatches])
        let report = try SegmentedLog.verify(at: dir.url)
        #expect(report.isIntact && report.problems.isEmpty, "\(report.problems)")
        let reopened = try SegmentedLog.open(at: dir.url)
        #expect(try allRecords(reopened) == after)
        #expect(reopened.recoveryReport.rebuiltIndexes.isEmpty, "the new indexes were written")
        try await reopened.close()
        // Without the indexes, the segments themselves say the same.
        for segment in sealed { try FileManager.default.removeItem(atPath: dir.path + "/" + Segment.Name.index(segment.lowerBound)) }
        let rescanned = try SegmentedLog.openReadOnly(at: dir.url)
        #expect(try allRecords(rescanned) == after)
        #expect(try rescanned.read(timestampsIn: LogTimestamp(nanosecondsSince1970: 0)...LogTimestamp(nanosecondsSince1970: 100_000)).map(\.position)
                == after.filter { $0.timestamp.nanosecondsSince1970 <= 100_000 }.map(\.position))
    }

    @Test func aSegmentEmptiedWholeKeepsItsPositionRangeAndASecondRewriteWorksOnSparseBatches() async throws {
        let dir = TemporaryDirectory("rewrite-empty")
        let log = try await Self.filledLog(dir)
        let before = try allRecords(log)
        let sealed = log.sealedSegments
        _ = try log.rewriteSealedSegment(startingAt: sealed[0].lowerBound) { _ in .remove }
        _ = try log.rewriteSealedSegment(startingAt: sealed[1].lowerBound, Self.thinning)
        // Again, over sparse batches: odd positions go too.
        let second = try log.rewriteSealedSegment(startingAt: sealed[1].lowerBound) { $0.position % 2 == 1 ? .remove : .keep }
        #expect(second.rewritten)
        let expected = before.filter { record in
            if sealed[0].contains(record.position) { return false }
            if sealed[1].contains(record.position) { return record.position % 3 != 0 && record.position % 2 == 0 }
            return true
        }.map { record in
            sealed[1].contains(record.position) && record.position % 5 == 0
                ? LogRecord(position: record.position, timestamp: record.timestamp, payload: Array("replaced-\(record.position)".utf8))
                : record
        }
        #expect(try allRecords(log) == expected)
        #expect(try log.read(from: 0, limit: 1).first?.position == expected.first?.position)
        #expect(log.bounds.firstPosition == 0)
        let emptied = try fileSize(dir.path + "/" + Segment.Name.segment(sealed[0].lowerBound))
        #expect(emptied == Int64(SegmentHeader.size + BatchHeader.size), "one empty sparse batch holds the range")
        try await log.close()
        #expect(try SegmentedLog.verify(at: dir.url).problems.isEmpty)
        let reopened = try SegmentedLog.openReadOnly(at: dir.url)
        #expect(try allRecords(reopened) == expected)
    }

    @Test func aRewriteThatChangesNothingLeavesTheFileAndTheStoreFileAlone() async throws {
        let dir = TemporaryDirectory("rewrite-noop")
        let log = try await Self.filledLog(dir)
        let base = log.sealedSegments[0].lowerBound
        let path = dir.path + "/" + Segment.Name.segment(base)
        var before = stat(), after = stat()
        stat(path, &before)
        let report = try log.rewriteSealedSegment(startingAt: base) { _ in .keep }
        stat(path, &after)
        #expect(!report.rewritten && report.bytesAfter == report.bytesBefore && report.recordsRemoved == 0)
        #expect(before.st_ino == after.st_ino)
        #expect(try StoreManifest.read(in: dir.path)?.features == [])
        #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
        try await log.close()
    }

    @Test func misuseAndFailuresOfTheDecisionChangeNothing() async throws {
        let dir = TemporaryDirectory("rewrite-misuse")
        let log = try await Self.filledLog(dir)
        let before = try allRecords(log)
        let active = log.bounds.nextPosition - 1
        #expect { try log.rewriteSealedSegment(startingAt: 1) { _ in .remove } } throws: {
            ($0 as? LogError)?.code == .invalidArgument
        }
        let activeBase = try #require(log.sealedSegments.last).upperBound
        #expect(activeBase <= active)
        #expect { try log.rewriteSealedSegment(startingAt: activeBase) { _ in .remove } } throws: {
            ($0 as? LogError)?.code == .invalidArgument && ($0 as? LogError)?.message.contains("no sealed segment") == true
        }
        struct Refused: Error {}
        let base = log.sealedSegments[0].lowerBound
        #expect(throws: Refused.self) {
            try log.rewriteSealedSegment(startingAt: base) { record in
                if record.position == base + 5 { throw Refused() }
                return .remove
            }
        }
        #expect(try allRecords(log) == before)
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/" + Segment.Name.segment(base) + ".tmp"))
        try await log.close()
        let reader = try SegmentedLog.openReadOnly(at: dir.url)
        #expect { try reader.rewriteSealedSegment(startingAt: base) { _ in .remove } } throws: { ($0 as? LogError)?.code == .readOnly }
    }

    /// A failure at each durable step (every `fsync` of a rewrite, in order) leaves, after a
    /// reopen, exactly the old segment or exactly the new one, verified intact.
    @Test func aFailureAtEveryStepLeavesTheOldSegmentOrTheNewOneWhole() async throws {
        var outcomes: [String] = []
        for step in 0..<8 {
            let dir = TemporaryDirectory("rewrite-fault")
            let io = FaultInjectingFileIO()
            let log = try await Self.filledLog(dir, io: io)
            let before = try allRecords(log)
            let segment = log.sealedSegments[1]
            let rewritten = Self.applying(Self.thinning, to: before, in: [segment])
            io.inject(.error(EIO), on: .sync, after: step)
            let failed: Bool
            do {
                _ = try log.rewriteSealedSegment(startingAt: segment.lowerBound, Self.thinning)
                failed = false
            } catch let error as LogError {
                #expect(error.code == .io, "step \(step): \(error)")
                failed = true
            }
            let seen = try allRecords(log)
            #expect(seen == before || seen == rewritten, "step \(step): the open log reads one version")
            try? await log.close()
            let reopened = try SegmentedLog.open(at: dir.url)
            let after = try allRecords(reopened)
            let which = after == before ? "old" : after == rewritten ? "new" : "neither"
            #expect(which != "neither", "step \(step)")
            #expect(failed || which == "new", "step \(step): a rewrite that returned is durable")
            #expect(after == seen, "step \(step): what the open log read is what a reopen reads")
            try await reopened.close()
            let report = try SegmentedLog.verify(at: dir.url)
            #expect(report.isIntact, "step \(step): \(report.problems)")
            #expect(!FileManager.default.fileExists(atPath: dir.path + "/" + Segment.Name.segment(segment.lowerBound) + ".tmp"))
            outcomes.append("\(step):\(failed ? "failed" : "ok")/\(which)")
        }
        // The steps: new file synced, store file (file, directory), index removal, rename,
        // index (file, directory); the last two fail after the segment is replaced.
        #expect(outcomes.contains { $0.hasSuffix("failed/old") } && outcomes.contains { $0.hasSuffix("failed/new") }
                && outcomes.contains { $0.hasSuffix("ok/new") }, "\(outcomes)")
    }

    /// Readers walking the log while segments are rewritten, again and again, under appends:
    /// every walk sees positions in order, each once, and every record no rewrite removes.
    @Test func readersWalkingDuringRewritesMissNothingTheRewritesKeep() async throws {
        let dir = TemporaryDirectory("rewrite-online")
        let log = try await Self.filledLog(dir, count: 1_200, perBatch: 5)
        let original = Dictionary(uniqueKeysWithValues: try allRecords(log).map { ($0.position, $0.payload) })
        let firstActive = log.bounds.nextPosition
        let done = Atomic<Bool>(false)
        let rounds = testScale.pick(100, small: 30)
        async let reader: Int = Task.detached {
            var walks = 0
            while !done.load(ordering: .acquiring) || walks < 3 {
                var last: LogPosition? = nil
                var seen = Set<LogPosition>()
                try log.forEachRecord(from: 0, through: nil) { record in
                    if let last { #expect(record.position > last) }
                    last = record.position
                    seen.insert(record.position)
                    if let payload = original[record.position] {
                        #expect(Array(record.payload) == payload || record.position % 2 == 0)
                    }
                    return true
                }
                // Odd positions are never removed.
                for position in original.keys where position % 2 == 1 {
                    #expect(seen.contains(position), "walk \(walks) missed \(position)")
                }
                walks += 1
            }
            return walks
        }.value
        async let writer: Void = Task.detached {
            for i in 0..<200 { _ = try await log.append([entry(5_000 + i, size: 30)]) }
        }.value
        for round in 0..<rounds {
            for segment in log.sealedSegments where segment.upperBound <= firstActive {
                _ = try log.rewriteSealedSegment(startingAt: segment.lowerBound) { record in
                    // Even positions thin out round by round; some are replaced.
                    if record.position % 2 == 1 { return .keep }
                    if Int(record.position / 2) % (rounds + 1) < round + 1 { return .remove }
                    return record.position % 10 == 0 ? .replace(Array("r\(round)".utf8)) : .keep
                }
            }
        }
        done.store(true, ordering: .releasing)
        let walks = try await reader
        try await writer
        #expect(walks >= 3)
        try await log.close()
        #expect(try SegmentedLog.verify(at: dir.url).isIntact)
    }

    /// A walk paused inside a segment that is rewritten before it goes on (the batches it was
    /// walking are gone: the rewrite merged them into one sparse batch) resumes at its
    /// position: nothing handed out twice, nothing the rewrite kept left out.
    @Test func aWalkPausedInsideARewrittenSegmentResumesAtItsPosition() async throws {
        for pause in 1...4 {
            let dir = TemporaryDirectory("rewrite-cursor")
            let log = try await Self.filledLog(dir, perBatch: 3)
            let before = try allRecords(log)
            let segment = log.sealedSegments[1]
            var cursor = try #require(log.core.cursor(containing: segment.lowerBound))
            var reader = BatchReader()
            var seen: [LogRecord] = []
            func visit(_ found: (file: OpenFile, batches: [BatchLocation], resumeAt: LogPosition)) throws {
                _ = try reader.visit(found.batches, in: found.file, from: max(segment.lowerBound, found.resumeAt),
                                     through: segment.upperBound - 1) { record in
                    seen.append(LogRecord(position: record.position, timestamp: record.timestamp, payload: Array(record.payload)))
                    return true
                }
            }
            try visit(try #require(log.core.locations(from: &cursor, limit: pause)))
            let pausedAt = cursor.position
            #expect(pausedAt < segment.upperBound)
            // One record of every batch of three goes: every batch changes, and the rewrite
            // gathers them into one sparse batch.
            let report = try log.rewriteSealedSegment(startingAt: segment.lowerBound) {
                $0.position % 3 == LogPosition(pause % 3) ? .remove : .keep
            }
            #expect(report.rewritten)
            while cursor.segment == 1, let found = log.core.locations(from: &cursor, limit: pause) {
                guard found.batches[0].firstPosition < segment.upperBound else { break }
                try visit(found)
            }
            let now = try allRecords(log).filter { segment.contains($0.position) }
            let expected = before.filter { segment.contains($0.position) && $0.position < pausedAt }
                + now.filter { $0.position >= pausedAt }
            #expect(seen.map(\.position) == expected.map(\.position), "pause after \(pause) batches")
            #expect(seen == expected, "pause after \(pause) batches")
            try await log.close()
        }
    }

    @Test func sparseBatchHeadersAreCheckedAndTheStoreFileNamesTheFeature() throws {
        var bytes: [UInt8] = [], scratch: [UInt8] = []
        let records = [BatchPayload.PositionedRecord(position: 12, timestamp: LogTimestamp(nanosecondsSince1970: 5), payload: [1, 2]),
                       BatchPayload.PositionedRecord(position: 15, timestamp: LogTimestamp(nanosecondsSince1970: 3), payload: [])]
        let header = try BatchPayload.encodeSparseBatch(records, covering: 10..<20, emptyTimestamps: (0, 0), codec: .none,
                                                        into: &bytes, scratch: &scratch)
        #expect(header.isSparse && header.recordCount == 2 && header.positionCount == 10 && header.endPosition == 20)
        #expect(header.minTimestamp == 3 && header.maxTimestamp == 5)
        let decoded = try bytes.withUnsafeBytes { try BatchHeader.decode($0).get() }
        #expect(decoded == header)
        var seen: [(LogPosition, Int64, [UInt8])] = []
        _ = try bytes.withUnsafeBytes { raw in
            try BatchPayload.forEachRecord(in: UnsafeRawBufferPointer(rebasing: raw[BatchHeader.size...]), header: decoded, scratch: &scratch) {
                seen.append(($0.position, $0.timestamp.nanosecondsSince1970, Array($0.payload)))
                return true
            }
        }
        #expect(seen.map(\.0) == [12, 15] && seen.map(\.1) == [5, 3] && seen.map(\.2) == [[1, 2], []])
        // Records outside the range, or out of order, are refused on write.
        #expect(throws: LogError.self) {
            try BatchPayload.encodeSparseBatch([records[0]], covering: 13..<20, emptyTimestamps: (0, 0), codec: .none, into: &bytes, scratch: &scratch)
        }
        #expect(throws: LogError.self) {
            try BatchPayload.encodeSparseBatch(records.reversed(), covering: 10..<20, emptyTimestamps: (0, 0), codec: .none, into: &bytes, scratch: &scratch)
        }

        func reencoded(_ change: (inout [UInt8]) -> Void) -> Result<BatchHeader, BatchHeader.DecodeFailure> {
            var header = Array(bytes.prefix(BatchHeader.size))
            change(&header)
            let crc = header.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<60])) }
            withUnsafeBytes(of: crc.littleEndian) { header.replaceSubrange(60..<64, with: $0) }
            return header.withUnsafeBytes { BatchHeader.decode($0) }
        }
        // More records than positions, no position, unknown flags: refused.
        #expect(throws: BatchHeader.DecodeFailure.self) { try reencoded { $0[48] = 1; $0[49] = 0 }.get() }
        #expect(throws: BatchHeader.DecodeFailure.self) { try reencoded { $0[48] = 0; $0[49] = 0 }.get() }
        #expect(throws: BatchHeader.DecodeFailure.self) { try reencoded { $0[7] = 3 }.get() }
        // A gap that leaves the range is damage, found when the records are read.
        var damaged = bytes
        damaged[BatchHeader.size] = 10
        let damagedHeader = try damaged.withUnsafeBytes { try BatchHeader.decode($0).get() }
        #expect { _ = try damaged.withUnsafeBytes { raw in
            try BatchPayload.forEachRecord(in: UnsafeRawBufferPointer(rebasing: raw[BatchHeader.size...]), header: damagedHeader, scratch: &scratch) { _ in true }
        } } throws: { ($0 as? LogError)?.code == .corruption }

        // The store file: the sparse-batch feature round-trips; a feature this build does not
        // know is refused as an unsupported version, naming it.
        let manifest = StoreManifest(historyEpoch: 7, features: .sparseBatches)
        #expect(try StoreManifest.decode(manifest.encoded()).get() == manifest)
        var unknown = manifest.encoded()
        unknown[12] = 0x05
        let crc = unknown.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<24])) }
        withUnsafeBytes(of: crc.littleEndian) { unknown.replaceSubrange(24..<28, with: $0) }
        #expect { try StoreManifest.decode(unknown).get() } throws: {
            ($0 as? LogError)?.code == .unsupportedVersion && ($0 as? LogError)?.message.contains("0x4") == true
        }
    }

    @Test func aReadOnlyLogRefreshedAfterARewriteReadsTheNewSegment() async throws {
        let dir = TemporaryDirectory("rewrite-follow")
        let log = try await Self.filledLog(dir)
        let before = try allRecords(log)
        let reader = try SegmentedLog.openReadOnly(at: dir.url)
        #expect(try allRecords(reader) == before)
        // A refresh that finds nothing replaced (the active segment is opened again at each)
        // counts no replacement.
        try reader.refresh()
        #expect(reader.segmentReplacements == 0)
        let sealed = log.sealedSegments
        _ = try log.rewriteSealedSegment(startingAt: sealed[1].lowerBound, Self.thinning)
        let expected = Self.applying(Self.thinning, to: before, in: [sealed[1]])
        #expect(try allRecords(log) == expected)
        let untouched = reader.core.state.withLock { $0.segments[0].file }
        // The reader still holds the old file's descriptor: a refresh must notice the name
        // now names another file and load it, not keep the old batches.
        try reader.refresh()
        #expect(reader.segmentReplacements == 1, "the rewritten segment is counted (the viewer reads its catalog again)")
        try reader.refresh()
        #expect(reader.segmentReplacements == 1, "once")
        #expect(reader.core.state.withLock { $0.segments[0].file } === untouched, "a segment not rewritten is reused, not opened again")
        #expect(try allRecords(reader) == expected)
        let gap = sealed[1].lowerBound + 3 - sealed[1].lowerBound % 3
        #expect(try reader.read(from: gap, limit: 1).first?.position == gap + 1, "a removed record is a gap now")
        // Segments that were not rewritten stay readable through the refresh.
        #expect(try reader.read(from: sealed[0].lowerBound, limit: 1).first == before.first)
    }

    @Test func aHistoryCutKeepsTheSparseBatchMarker() async throws {
        let dir = TemporaryDirectory("rewrite-epoch")
        let log = try await Self.filledLog(dir)
        _ = try log.rewriteSealedSegment(startingAt: 0) { _ in .remove }
        try await log.close()
        try LogLoader.advanceHistoryEpoch(in: dir.path, io: PosixFileIO())
        let manifest = try #require(try StoreManifest.read(in: dir.path))
        #expect(manifest.features == [.sparseBatches])
        #expect(manifest.historyEpoch == 1)
    }
}
