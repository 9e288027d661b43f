@testable import EventLog
import Foundation
import Synchronization
import Testing
import EventKernelTestSupport

@Suite("SegmentedLog: appends, reads, reopen")
struct SegmentedLogTests {
    static let smallSegments = SegmentedLog.Configuration(segmentSize: 64 << 10)

    @Test("appended records read back with gap-free positions, across reopen")
    func appendReadReopen() async throws {
        let dir = TemporaryDirectory()
        do {
            let log = try SegmentedLog.open(at: dir.url)
            #expect(log.bounds == .empty)
            let first = try await log.append([entry(0), entry(1), entry(2)])
            #expect(first == 0..<3)
            let single = try await log.append(entry(3))
            #expect(single == 3)
            #expect(log.bounds.nextPosition == 4)
            #expect(log.bounds.minTimestamp == LogTimestamp(nanosecondsSince1970: 0))
            #expect(log.bounds.maxTimestamp == LogTimestamp(nanosecondsSince1970: 3_000))
            try await log.close()
        }
        let log = try SegmentedLog.open(at: dir.url)
        #expect(log.recoveryReport.isClean)
        let records = try allRecords(log)
        #expect(records.map(\.position) == [0, 1, 2, 3])
        #expect(records.map(\.payload) == (0..<4).map { entry($0).payload })
        #expect(try await log.append(entry(4)) == 4)
        #expect(try log.read(from: 2, limit: 2).map(\.position) == [2, 3])
        #expect(try log.read(from: 10).isEmpty)
        try await log.close()
    }

    @Test("1M small records across several segments survive close and reopen")
    func millionRecords() async throws {
        let dir = TemporaryDirectory()
        let total = testScale.pick(1_000_000, small: 100_000), perBatch = 1_000
        var configuration = SegmentedLog.Configuration(segmentSize: testScale.pick(1 << 20, small: 128 << 10), durability: .buffered)
        configuration.preallocate = false
        do {
            let log = try SegmentedLog.open(at: dir.url, configuration: configuration)
            for b in 0..<(total / perBatch) {
                let range = try await log.append((0..<perBatch).map { entry(b * perBatch + $0) })
                #expect(range.count == perBatch)
            }
            try await log.close()
        }
        #expect(try segmentFiles(in: dir).count > 3)
        let log = try SegmentedLog.open(at: dir.url, configuration: configuration)
        #expect(log.bounds.nextPosition == UInt64(total))
        var expected: UInt64 = 0
        try log.forEachRecord(from: 0, through: nil) { record in
            guard record.position == expected, Array(record.payload) == entry(Int(expected)).payload else {
                Issue.record("record \(expected) is wrong: position \(record.position)")
                return false
            }
            expected += 1
            return true
        }
        #expect(expected == UInt64(total))
        #expect(try await log.append(entry(total)) == UInt64(total))
        try await log.close()
        #expect(try SegmentedLog.verify(at: dir.url).isIntact)
    }

    @Test("segments roll at the threshold, sealed ones get an index, and reads cross them")
    func segmentRoll() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentedLog.open(at: dir.url, configuration: Self.smallSegments)
        for i in 0..<300 { _ = try await log.append([entry(i, size: 900)]) }
        let files = try segmentFiles(in: dir)
        #expect(files.count >= 3)
        #expect(files.first == "00000000000000000000.log")
        for name in files.dropLast() {
            #expect(FileManager.default.fileExists(atPath: dir.file(String(name.dropLast(3)) + "idx").path))
            #expect(try fileSize(dir.file(name).path) <= 64 << 10)
        }
        // Names are the first position of each segment.
        let bases = files.compactMap { UInt64($0.prefix(20)) }
        #expect(bases == bases.sorted())
        #expect(try log.read(from: 0).map(\.position) == Array(0..<300))
        #expect(try log.read(from: bases[1]).first?.position == bases[1])
        try await log.close()
        let reopened = try SegmentedLog.open(at: dir.url, configuration: Self.smallSegments)
        #expect(reopened.segmentCount == files.count)
        #expect(try reopened.read(from: 0).count == 300)
        try await reopened.close()
    }

    // Whether they share syncs depends on how many of them the pool runs at once (a leader
    // blocks its thread); GroupCommitTests shows the sharing deterministically.
    @Test("64 tasks appending concurrently get unique gap-free positions")
    func concurrentAppends() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentedLog.open(at: dir.url)
        let perTask = 50
        let positions = try await withThrowingTaskGroup(of: [LogPosition].self) { group in
            for t in 0..<64 {
                group.addTask {
                    var mine: [LogPosition] = []
                    for i in 0..<perTask { mine.append(try await log.append(entry(t * 1000 + i))) }
                    return mine
                }
            }
            var all: [LogPosition] = []
            for try await part in group { all += part }
            return all
        }
        #expect(positions.count == 64 * perTask)
        #expect(positions.sorted() == Array(0..<UInt64(64 * perTask)))
        let stats = log.statistics
        #expect(stats.appendsAcknowledged == 64 * perTask)
        #expect(stats.dataSyncs <= stats.appendsAcknowledged, "\(stats)")
        // Each task's own appends are in the order it made them.
        let records = try allRecords(log)
        #expect(records.count == 64 * perTask)
        try await log.close()
    }

    @Test("records up to 16 MiB, and a batch larger than the segment size")
    func largeRecords() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentedLog.open(at: dir.url, configuration: Self.smallSegments)
        let big = [UInt8]((0..<(16 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 >> 3) })
        _ = try await log.append(entry(0))
        let position = try await log.append(LogEntry(timestamp: .init(nanosecondsSince1970: 5), payload: big))
        _ = try await log.append(entry(2))
        try await log.close()
        let reopened = try SegmentedLog.open(at: dir.url, configuration: Self.smallSegments)
        let records = try allRecords(reopened)
        #expect(records.count == 3)
        #expect(records[Int(position)].payload == big)
        try await reopened.close()
        #expect(try SegmentedLog.verify(at: dir.url).isIntact)
    }

    @Test("an empty store opens, reads nothing, reopens, and verifies")
    func emptyStore() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentedLog.open(at: dir.url.appending(path: "nested/store"))
        #expect(log.bounds.isEmpty)
        #expect(try allRecords(log).isEmpty)
        #expect(try log.read(timestampsIn: .min ... .max).isEmpty)
        try await log.close()
        let reopened = try SegmentedLog.open(at: dir.url.appending(path: "nested/store"))
        #expect(reopened.bounds.isEmpty)
        try await reopened.close()
        let readOnly = try SegmentedLog.openReadOnly(at: dir.url.appending(path: "nested/store"))
        #expect(readOnly.bounds.isEmpty)
        #expect(try SegmentedLog.verify(at: dir.url.appending(path: "nested/store")).isIntact)
    }

    @Test("bad arguments get typed errors")
    func badArguments() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentedLog.open(at: dir.url)
        await #expect(throws: LogError.self) { _ = try await log.append([]) }
        try await log.close()
        await #expect(throws: LogError.self) { _ = try await log.append(entry(0)) }
        #expect(throws: LogError.self) { _ = try SegmentedLog.open(at: dir.url, configuration: .init(segmentSize: 10)) }
        // A store directory that is a file.
        let file = dir.file("not-a-dir")
        try Data("x".utf8).write(to: file)
        #expect { _ = try SegmentedLog.open(at: file) } throws: { ($0 as? LogError)?.code == .notAStore }
        #expect { _ = try SegmentedLog.openReadOnly(at: dir.file("missing")) } throws: { ($0 as? LogError)?.code == .notAStore }
    }

    @Test("a read-only reader during writes sees a consistent, growing prefix")
    func readOnlyDuringWrites() async throws {
        let dir = TemporaryDirectory()
        let writer = try SegmentedLog.open(at: dir.url, configuration: Self.smallSegments)
        _ = try await writer.append(entry(0))
        let reader = try SegmentedLog.openReadOnly(at: dir.url)
        #expect(reader.isReadOnly)
        await #expect(throws: LogError.self) { _ = try await reader.append(entry(99)) }
        let writes = Task {
            for i in 1..<400 { _ = try await writer.append([entry(i, size: 500)]) }
        }
        var lastSeen: UInt64 = 0
        while true {
            let bounds = try reader.refresh()
            #expect(bounds.nextPosition >= lastSeen)
            let records = try allRecords(reader)
            #expect(records.map(\.position) == Array(0..<UInt64(records.count)), "a prefix without gaps")
            #expect(records.count >= Int(bounds.nextPosition))
            lastSeen = bounds.nextPosition
            if lastSeen == 400 { break }
            if writes.isCancelled { break }
            try await Task.sleep(for: .milliseconds(2))
        }
        try await writes.value
        #expect(try reader.refresh().nextPosition == 400)
        try await writer.close()
    }

    @Test("time-range reads return exactly the records in range, skipping batches")
    func timeRange() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentedLog.open(at: dir.url, configuration: Self.smallSegments)
        // Timestamps go up by batch, with some disorder inside each batch.
        var all: [LogEntry] = []
        for b in 0..<200 {
            let batch = (0..<10).map { entry(b * 10 + $0, size: 100, at: Int64(b * 10 + (9 - $0)) * 1_000) }
            all += batch
            _ = try await log.append(batch)
        }
        for (lo, hi) in [(0, 0), (5_000, 5_000), (12_345, 200_000), (1_990_000, 3_000_000), (-5, -1)] {
            let range = LogTimestamp(nanosecondsSince1970: Int64(lo))...LogTimestamp(nanosecondsSince1970: Int64(hi))
            let got = try log.read(timestampsIn: range)
            let expected = all.enumerated().filter { range.contains($0.element.timestamp) }.map { UInt64($0.offset) }
            #expect(got.map(\.position) == expected, "range \(lo)...\(hi)")
        }
        try await log.close()
    }

    @Test("buffered policy acknowledges after write and syncs on close", arguments: [CompressionCodec.lz4, .none])
    func bufferedPolicy(codec: CompressionCodec) async throws {
        let dir = TemporaryDirectory()
        // An interval no run can reach: under sanitizers, with other tests holding the
        // cooperative pool, these appends have taken over a minute.
        let configuration = SegmentedLog.Configuration(durability: .buffered(syncInterval: .seconds(86_400)), compression: codec)
        let log = try SegmentedLog.open(at: dir.url, configuration: configuration)
        for i in 0..<100 { _ = try await log.append(entry(i)) }
        #expect(log.statistics.dataSyncs == 0)
        try await log.synchronize()
        #expect(log.statistics.dataSyncs == 1)
        for i in 100..<200 { _ = try await log.append(entry(i)) }
        try await log.close()
        let reopened = try SegmentedLog.open(at: dir.url)
        #expect(try allRecords(reopened).map(\.payload) == (0..<200).map { entry($0).payload })
        try await reopened.close()
    }

    @Test("the buffered policy syncs on its interval")
    func bufferedInterval() async throws {
        let dir = TemporaryDirectory()
        let log = try SegmentedLog.open(at: dir.url, configuration: .init(durability: .buffered(syncInterval: .milliseconds(20))))
        _ = try await log.append(entry(0))
        var waited = 0
        while log.statistics.dataSyncs == 0 && waited < 200 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        #expect(log.statistics.dataSyncs >= 1)
        try await log.close()
    }
}

@Suite("InMemoryLog has the same semantics")
struct InMemoryLogTests {
    @Test("positions, reads, time ranges, close")
    func semantics() async throws {
        let log = InMemoryLog()
        #expect(try await log.append([entry(0), entry(1)]) == 0..<2)
        #expect(try await log.append(entry(2, at: 50)) == 2)
        #expect(log.bounds.nextPosition == 3)
        #expect(try log.read(from: 1).map(\.position) == [1, 2])
        #expect(try log.read(from: 0, limit: 1).count == 1)
        #expect(try log.read(timestampsIn: LogTimestamp(nanosecondsSince1970: 0)...LogTimestamp(nanosecondsSince1970: 60)).map(\.position) == [0, 2])
        await #expect(throws: LogError.self) { _ = try await log.append([]) }
        try await log.close()
        await #expect(throws: LogError.self) { _ = try await log.append(entry(3)) }
    }
}
