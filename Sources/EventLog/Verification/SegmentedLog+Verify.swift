#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import Foundation

extension SegmentedLog {
    /// Checks every segment header, batch header, payload checksum and record framing, and
    /// every sealed segment's index against its segment, without changing anything.
    ///
    /// Safe to run while a writer has the store open: the active segment's unfinished tail is
    /// then a warning, not damage.
    ///
    /// - Parameter directory: The store directory.
    /// - Returns: What was found; ``VerificationReport/isIntact`` is false on damage.
    /// - Throws: ``LogError`` only when the directory cannot be read at all.
    /// - Complexity: Reads and decompresses every byte of the log.
    public static func verify(at directory: URL) throws -> VerificationReport {
        let path = directory.standardizedFileURL.path
        try StoreDirectory.requireExisting(path)
        var report = VerificationReport(directory: path)
        let bases = try LogLoader.segmentBases(in: path)
        var expected: LogPosition? = nil
        for (k, base) in bases.enumerated() {
            let isLast = k == bases.count - 1
            let segmentPath = path + "/" + SegmentName.segment(base)
            if let expected, base != expected {
                report.problems.append(.init(severity: .damage, error: LogError(.corruption,
                    "segments are not contiguous: expected a segment starting at position \(expected), found \(base)",
                    file: segmentPath, offset: 0, position: expected)))
            }
            let file: OpenFile
            let scan: SegmentScan
            do {
                file = try OpenFile.open(segmentPath, flags: O_RDONLY)
                var scanner = SegmentScanner(file: file, basePosition: base)
                scanner.decodeRecords = true
                scanner.concurrentWriterPossible = isLast
                scan = try scanner.scan()
            } catch {
                // The last segment's creation cut short by a crash (a partial header, then
                // zeros): no data, rewritten by the next writer open, as recovery does.
                if isLast, let file = try? OpenFile.open(segmentPath, flags: O_RDONLY), let size = try? file.size(),
                   let bytes = try? file.read(fromAbsoluteOffset: 0, count: Int(size)),
                   LogLoader.isUnfinishedSegmentCreation(bytes, base: base) {
                    var note = error
                    note.message = "segment whose creation was never finished (a crash while rolling; it holds no data and the next writer open rewrites it): " + error.message
                    report.problems.append(.init(severity: .warning, error: note))
                    continue
                }
                report.problems.append(.init(severity: .damage, error: error))
                expected = nil
                continue
            }
            let indexPath = path + "/" + SegmentName.index(base)
            var sealed = false
            if StoreDirectory.exists(indexPath) {
                sealed = true
                let problem = checkIndex(at: indexPath, against: scan)
                if let problem { report.problems.append(.init(severity: .warning, error: problem)) }
            } else if !isLast {
                report.problems.append(.init(severity: .warning, error: LogError(.corruption,
                    "sealed segment has no index side file (the next writer open rebuilds it)", file: indexPath)))
            }
            switch scan.end {
            case .clean:
                if sealed && scan.dataEnd != scan.fileSize {
                    report.problems.append(.init(severity: .damage, error: LogError(.corruption,
                        "sealed segment has \(scan.fileSize - scan.dataEnd) unexpected bytes after its last batch",
                        file: segmentPath, offset: scan.dataEnd, position: scan.nextPosition)))
                }
            case .damage(let error):
                report.problems.append(.init(severity: .damage, error: error))
            case .tornTail(let error):
                if isLast && !sealed {
                    var note = error
                    note.message = "unfinished or torn write at the end of the active segment (never acknowledged; truncated by the next writer open): " + error.message
                    report.problems.append(.init(severity: .warning, error: note))
                } else {
                    report.problems.append(.init(severity: .damage, error: error))
                }
            }
            report.segments.append(.init(
                file: segmentPath, basePosition: base, nextPosition: scan.nextPosition, batches: scan.batches.count,
                records: scan.records, fileBytes: scan.fileSize, dataBytes: scan.dataEnd - Int64(SegmentHeader.size),
                storedPayloadBytes: scan.storedPayloadBytes, uncompressedPayloadBytes: scan.uncompressedPayloadBytes,
                sealed: sealed,
                minTimestamp: scan.minTimestamp.map(LogTimestamp.init(nanosecondsSince1970:)),
                maxTimestamp: scan.maxTimestamp.map(LogTimestamp.init(nanosecondsSince1970:))))
            expected = scan.nextPosition
        }
        return report
    }

    private static func checkIndex(at indexPath: String, against scan: SegmentScan) -> LogError? {
        do {
            let file = try OpenFile.open(indexPath, flags: O_RDONLY)
            let bytes = try file.read(fromAbsoluteOffset: 0, count: Int(try file.size()))
            switch bytes.withUnsafeBytes({ SegmentIndexFile.decode($0) }) {
            case .failure(var error):
                error.file = indexPath
                error.message += " (the index is rebuilt from its segment on the next writer open)"
                return error
            case .success(let index):
                guard index.basePosition == scan.basePosition, index.batches == scan.batches,
                      index.dataLength == scan.dataEnd, index.nextPosition == scan.nextPosition else {
                    return LogError(.corruption, "index does not match its segment (the index is rebuilt on the next writer open)", file: indexPath)
                }
                return nil
            }
        } catch {
            return error
        }
    }

    /// Cuts the log at its first damage so that it opens again, keeping every removed byte.
    ///
    /// Takes the writer lock. Everything from the first damaged batch on is removed: the rest
    /// of that segment and all later segments. The removed bytes are kept in `recovered/` and
    /// listed in the report, with the first dropped position.
    ///
    /// - Parameter directory: The store directory.
    /// - Returns: What was cut; ``RepairReport/cut`` is nil if there was no damage.
    /// - Throws: ``LogError/Code/locked`` if a writer has the store open; ``LogError/Code/io``.
    public static func repair(at directory: URL) throws -> RepairReport {
        let path = directory.standardizedFileURL.path
        try StoreDirectory.requireExisting(path)
        let lock = try DirectoryLock(directory: path)
        defer { lock.unlock() }
        let io = PosixFileIO()
        let verification = try verify(at: directory)
        var report = RepairReport()
        guard let damage = verification.firstDamage, let damagedFile = damage.file else { return report }
        report.cut = damage
        report.firstDroppedPosition = damage.position

        let bases = try LogLoader.segmentBases(in: path)
        guard let damagedIndex = bases.firstIndex(where: { path + "/" + SegmentName.segment($0) == damagedFile }) else {
            throw LogError(.io, "damage reported in \(damagedFile), which is not a segment of this store", file: damagedFile)
        }
        let cutOffset = damage.offset ?? 0
        // Records counted as dropped: those of later segments, and of the damaged one past the cut.
        for summary in verification.segments where summary.basePosition > bases[damagedIndex] {
            report.droppedRecords += summary.records
        }
        // Everything from the cut in the damaged segment, and all later segments, go to recovered/.
        for (k, base) in bases.enumerated() where k >= damagedIndex {
            let segmentPath = path + "/" + SegmentName.segment(base)
            let file = try OpenFile.open(segmentPath, flags: O_RDWR)
            let size = try file.size()
            let from = k == damagedIndex ? (cutOffset < Int64(SegmentHeader.size) ? 0 : cutOffset) : 0
            let bytes = try file.read(fromAbsoluteOffset: from, count: Int(size - from))
            let name = SegmentName.segment(base) + ".\(from).dropped"
            try RecoveredFiles.save(bytes, directory: path, name: name, io: io)
            report.savedFiles.append(RecoveredFiles.path(directory: path, name: name))
            report.droppedBytes += Int64(bytes.count)
            try StoreDirectory.remove(path + "/" + SegmentName.index(base))
            try StoreDirectory.remove(path + "/" + SegmentName.checkpoint(base))
            if from == 0 {
                try StoreDirectory.remove(segmentPath)
            } else {
                try io.truncate(descriptor: file.descriptor, path: segmentPath, length: from)
                try io.synchronize(descriptor: file.descriptor, path: segmentPath)
            }
        }
        try StoreDirectory.synchronize(path, io: io)
        return report
    }
}
