@testable import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// Damages every byte of every file of a small, cleanly closed store (two sealed segments with
/// their `.idx`, the active segment with its `.ckpt`, the `eventkernel.store` file), one at a
/// time in a fresh copy, and holds the log to this rule:
///
/// - `verify` notices every damaged byte (a problem naming the damaged file), because every
///   byte of a store is covered by a checksum;
/// - opening (read-only and writer) and reading everything either fails with a `corruption` or
///   `unsupported-version` error that names a file of the store (and an offset for segments),
///   or returns *exactly* the original records: every record was acknowledged (the store was
///   closed cleanly, its checkpoint lists them all), so a shorter result would be a silent
///   wrong answer, not a torn tail (Docs/Durability.md, "What counts as torn");
/// - never a crash, never a record that differs from the original.
///
/// Debug: all structural bytes (segment and batch headers, the edges of each payload, whole
/// index files) and every `EVENTKERNEL_CORRUPTION_STRIDE`-th other payload byte (default 8; 1 = every
/// byte). Under `EVENTKERNEL_TEST_SCALE=small` (the sanitizers) every stride-th byte of every
/// file (default 16) and all of the fixed headers: the store file, each segment's header, the
/// checkpoint.
@Suite("Reliability: corruption sweep")
struct CorruptionSweepTests {
    struct Tally: CustomStringConvertible {
        var cases = 0, verifyDetected = 0, openErrors = 0, readErrors = 0, fullData = 0, truncatedPrefix = 0
        var readOnlyErrors = 0, readOnlyPrefix = 0, wrongRecords = 0
        /// Per file kind (`log`, `idx`, `ckpt`, `store`): the standing table of Docs/Reliability.md.
        var byKind: [String: (cases: Int, located: Int, exact: Int, silent: Int)] = [:]
        var description: String {
            "\(cases) cases: verify detected \(verifyDetected); writer open: \(openErrors) open errors, \(readErrors) read errors, \(fullData) all records, \(truncatedPrefix) truncated prefix; read-only: \(readOnlyErrors) errors, \(readOnlyPrefix) prefix; WRONG RECORDS: \(wrongRecords)"
        }
    }

    /// A scratch directory on tmpfs when there is one: the sweep opens thousands of stores.
    static func scratchRoot() -> URL {
        let shm = URL(filePath: "/dev/shm", directoryHint: .isDirectory)
        if FileManager.default.isWritableFile(atPath: shm.path) { return shm }
        return FileManager.default.temporaryDirectory
    }

    static func buildStore(at url: URL) async throws -> [LogRecord] {
        var configuration = SegmentedLog.Configuration(segmentSize: 4096)
        configuration.preallocate = false
        let log = try SegmentedLog.open(at: url, configuration: configuration)
        var i = 0
        var round = 0
        while log.segmentCount < 3 || log.core.state.withLock({ $0.segments.last!.batches.count }) < 4 {
            if round % 3 == 2 {
                // A compressible batch of several records: exercises LZ4 decoding.
                let batch = (0..<6).map { k in
                    LogEntry(timestamp: .init(nanosecondsSince1970: Int64(i + k) * 1_000),
                             payload: Array("record-\(i + k) ".utf8) + Array(repeating: UInt8(ascii: "x"), count: 40))
                }
                _ = try await log.append(batch)
                i += batch.count
            } else {
                _ = try await log.append(entry(i, size: 60 + round % 50))
                i += 1
            }
            round += 1
        }
        try await log.close()
        let reopened = try SegmentedLog.openReadOnly(at: url)
        return try reopened.read(from: 0)
    }

    @Test("every damaged byte is detected or recovered to a correct prefix; no wrong record is ever returned")
    func sweep() async throws {
        let root = Self.scratchRoot().appending(path: "sweep-\(UUID().uuidString.prefix(8))", directoryHint: .isDirectory)
        defer { try? FileManager.default.removeItem(at: root) }
        let pristine = root.appending(path: "pristine", directoryHint: .isDirectory)
        let original = try await Self.buildStore(at: pristine)
        let names = try FileManager.default.contentsOfDirectory(atPath: pristine.path)
            .filter { $0.hasSuffix(".log") || $0.hasSuffix(".idx") || $0.hasSuffix(".ckpt") || $0 == "eventkernel.store" }.sorted()
        #expect(names.filter { $0.hasSuffix(".log") }.count == 3)
        #expect(names.filter { $0.hasSuffix(".idx") }.count == 2)
        #expect(names.filter { $0.hasSuffix(".ckpt") }.count == 1)
        #expect(names.contains("eventkernel.store"))
        let files = try Dictionary(uniqueKeysWithValues: names.map { ($0, [UInt8](try Data(contentsOf: pristine.appending(path: $0)))) })

        // Structural offsets of each segment: its header, every batch header, the first and
        // last 8 bytes of every payload.
        var structural: [String: Set<Int>] = [:]
        let log = try SegmentedLog.openReadOnly(at: pristine)
        for segment in log.core.state.withLock({ $0.segments }) {
            var set = Set(0..<SegmentHeader.size)
            for batch in segment.batches {
                let o = Int(batch.offset), end = Int(batch.endOffset)
                set.formUnion(o..<(o + BatchHeader.size + 8))
                set.formUnion(max(o, end - 8)..<end)
            }
            structural[SegmentName.segment(segment.basePosition)] = set
        }
        let stride = environmentInt("EVENTKERNEL_CORRUPTION_STRIDE", default: testScale.pick(8, small: 16))

        let work = root.appending(path: "case", directoryHint: .isDirectory)
        var tally = Tally()
        let started = ContinuousClock.now
        for name in names {
            let bytes = files[name]!
            for offset in bytes.indices {
                // Under EVENTKERNEL_TEST_SCALE=small (sanitizers) the stride applies to every byte
                // but the fixed headers': their fields are a few bytes each, which a stride would
                // step over.
                let isStructural = testScale.isSmall
                    ? name == "eventkernel.store" || name.hasSuffix(".ckpt") || (name.hasSuffix(".log") && offset < SegmentHeader.size)
                    : !name.hasSuffix(".log") || structural[name]?.contains(offset) == true
                guard isStructural || offset % stride == 0 else { continue }
                for mask: UInt8 in [0xFF, 1 << UInt8(offset % 8)] {
                    try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
                    for (other, content) in files {
                        var data = content
                        if other == name { data[offset] ^= mask }
                        try Data(data).write(to: work.appending(path: other))
                    }
                    await Self.check(work, name: name, offset: offset, mask: mask, original: original, tally: &tally)
                    try FileManager.default.removeItem(at: work)
                }
            }
        }
        print("corruption sweep (stride \(stride)): \(tally) in \(ContinuousClock.now - started)")
        for (kind, counts) in tally.byKind.sorted(by: { $0.key < $1.key }) {
            print("  \(kind): \(counts.cases) cases, \(counts.located) located damage, \(counts.exact) exactly the acknowledged data, \(counts.silent) silent wrong answers")
        }
        #expect(tally.wrongRecords == 0)
        #expect(tally.truncatedPrefix == 0)
        #expect(tally.verifyDetected == tally.cases)
    }

    static func check(_ dir: URL, name: String, offset: Int, mask: UInt8, original: [LogRecord], tally: inout Tally) async {
        let context = "\(name) offset \(offset) ^ 0x\(String(mask, radix: 16))"
        let damagedPath = dir.standardizedFileURL.path + "/" + name
        tally.cases += 1
        let kind = name == "eventkernel.store" ? "store" : String(name.split(separator: ".").last!)
        let before = (tally.wrongRecords, tally.openErrors + tally.readErrors + tally.readOnlyErrors)
        defer {
            var counts = tally.byKind[kind] ?? (0, 0, 0, 0)
            counts.cases += 1
            if tally.wrongRecords > before.0 { counts.silent += 1 }
            else if tally.openErrors + tally.readErrors + tally.readOnlyErrors > before.1 { counts.located += 1 }
            else { counts.exact += 1 }
            tally.byKind[kind] = counts
        }

        // 1. verify sees it, and says where.
        do {
            let report = try SegmentedLog.verify(at: dir)
            if report.problems.contains(where: { $0.error.file == damagedPath || ($0.error.file?.hasPrefix(dir.standardizedFileURL.path) == true) }) {
                tally.verifyDetected += 1
            } else {
                Issue.record("\(context): verify found nothing: \(report)")
            }
        } catch {
            Issue.record("\(context): verify threw \(error)")
        }

        // 2. Read-only open and full read.
        do {
            let log = try SegmentedLog.openReadOnly(at: dir)
            let records = try log.read(from: 0)
            checkPrefix(records, original, context: context + " (read-only)", tally: &tally)
            if records.count < original.count {
                tally.wrongRecords += 1
                Issue.record("\(context) (read-only): \(records.count) of \(original.count) acknowledged records, and no error")
            }
            tally.readOnlyPrefix += 1
        } catch {
            checkError(error, in: dir, context: context + " (read-only)")
            tally.readOnlyErrors += 1
        }

        // 3. Writer open (runs recovery) and full read.
        var configuration = SegmentedLog.Configuration(segmentSize: 4096)
        configuration.preallocate = false
        let log: SegmentedLog
        do {
            log = try SegmentedLog.open(at: dir, configuration: configuration)
        } catch {
            checkError(error, in: dir, context: context + " (open)")
            tally.openErrors += 1
            return
        }
        do {
            let records = try log.read(from: 0)
            checkPrefix(records, original, context: context, tally: &tally)
            if records.count == original.count {
                tally.fullData += 1
            } else {
                // Every record was acknowledged: cutting any is a wrong answer, report or not.
                tally.truncatedPrefix += 1
                tally.wrongRecords += 1
                Issue.record("\(context): \(records.count) of \(original.count) acknowledged records after recovery: \(log.recoveryReport)")
            }
        } catch {
            checkError(error, in: dir, context: context + " (read)")
            tally.readErrors += 1
        }
        try? await log.close()
    }

    static func checkPrefix(_ records: [LogRecord], _ original: [LogRecord], context: String, tally: inout Tally) {
        guard records.count <= original.count, records == Array(original.prefix(records.count)) else {
            tally.wrongRecords += 1
            Issue.record("\(context): returned records that are not a prefix of the original (\(records.count) records)")
            return
        }
    }

    static func checkError(_ error: any Error, in dir: URL, context: String) {
        guard let error = error as? LogError else {
            Issue.record("\(context): not a LogError: \(error)")
            return
        }
        #expect(error.code == .corruption || error.code == .unsupportedVersion, "\(context): \(error)")
        #expect(error.file?.hasPrefix(dir.standardizedFileURL.path) == true, "\(context): error names no store file: \(error)")
        if error.file?.hasSuffix(".log") == true {
            #expect(error.offset != nil, "\(context): error names no offset: \(error)")
        }
    }
}
