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
    /// - Parameters:
    ///   - directory: The store directory.
    ///   - acknowledgedElsewhere: What records outside the log say was acknowledged (a store's
    ///     snapshot headers: `SnapshotDirectory.acknowledgedPositions()` in EventKernel). An
    ///     unfinished tail of the active segment that starts below one of the current history
    ///     epoch is damage, not a torn write, by the rule a writer's open applies
    ///     (`AcknowledgedPosition.furthest(in:epoch:beyond:)`).
    ///   - decodingRecords: Also decompress every batch and check its records' framing (the
    ///     default); `false` checks headers, payload checksums and the structure only, which
    ///     finds every flipped bit at a fraction of the cost.
    /// - Returns: What was found; ``VerificationReport/isIntact`` is false on damage.
    /// - Throws: ``LogError`` only when the directory cannot be read at all, or is not a store
    ///   (``LogError/Code/notAStore``, among it a backup in progress or cut short).
    /// - Complexity: Reads every byte of the log (and decompresses it when `decodingRecords`).
    public static func verify(
        at directory: URL, acknowledgedElsewhere: [AcknowledgedPosition] = [], decodingRecords: Bool = true
    ) throws -> VerificationReport {
        let path = directory.standardizedFileURL.path
        try StoreDirectory.requireExisting(path)
        try StoreManifest.refuseIncompleteBackup(in: path)
        var report = VerificationReport(directory: path)
        var historyEpoch: UInt64? = nil
        do {
            let manifest = try StoreManifest.read(in: path)
            historyEpoch = manifest?.historyEpoch
            if manifest == nil {
                _ = try StoreManifest.requireForReading(in: path)
                report.problems.append(.init(severity: .warning, error: LogError(.notAStore,
                    "the store has no \(StoreManifest.fileName) file (written before store files existed; the next writer open adds it)",
                    file: path + "/" + StoreManifest.fileName)))
            }
        } catch let error where error.code == .notAStore || error.code == .unsupportedVersion {
            // A store file of a newer format is no damage: this build cannot judge the store
            // (and `repair` must not rewrite what it cannot read).
            throw error
        } catch {
            report.problems.append(.init(severity: .damage, error: error))
        }
        let bases = try Segment.bases(in: path)
        do {
            try Segment.checkForOrphanedCheckpoints(in: path, segmentBases: bases)
        } catch {
            report.problems.append(.init(severity: .damage, error: error))
        }
        var expected: LogPosition? = nil
        for (k, base) in bases.enumerated() {
            let isLast = k == bases.count - 1
            let segmentPath = path + "/" + Segment.Name.segment(base)
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
                scanner.decodeRecords = decodingRecords
                scanner.concurrentWriterPossible = isLast
                scan = try scanner.scan()
            } catch {
                // The last segment's creation cut short by a crash (a partial header, then
                // zeros, and no checkpoint listing batches): no data, rewritten by the next
                // writer open, as recovery does.
                if isLast, let file = try? OpenFile.open(segmentPath, flags: O_RDONLY) {
                    do throws(LogError) {
                        if try Segment.isUnfinishedCreation(of: file, base: base, directory: path) {
                            var note = error
                            note.message = "segment whose creation was never finished (a crash while rolling; it holds no data and the next writer open rewrites it): " + error.message
                            report.problems.append(.init(severity: .warning, error: note))
                            continue
                        }
                    } catch let claimed {
                        report.problems.append(.init(severity: .damage, error: claimed))
                        expected = nil
                        continue
                    }
                }
                report.problems.append(.init(severity: .damage, error: error))
                expected = nil
                continue
            }
            let indexPath = path + "/" + Segment.Name.index(base)
            // The active segment's checkpoint, when it has a valid one, records what was
            // acknowledged at the last clean close: nothing it lists can be a torn tail.
            var checkpointEnd: Int64 = 0
            if isLast, !StoreDirectory.exists(indexPath) {
                let checkpointPath = path + "/" + Segment.Name.checkpoint(base)
                do throws(LogError) {
                    if let checkpoint = try Segment.readCheckpoint(at: checkpointPath) {
                        try Segment.checkAgainstCheckpoint(checkpoint, base: base, file: file, path: checkpointPath)
                        checkpointEnd = checkpoint.dataLength
                        if !scan.batches.starts(with: checkpoint.batches) && scan.end.isClean {
                            throw LogError(.corruption, "the segment's batches differ from those its checkpoint lists",
                                           file: segmentPath, offset: checkpoint.batches.first?.offset ?? 0, position: base)
                        }
                    } else if StoreDirectory.exists(checkpointPath) {
                        report.problems.append(.init(severity: .warning, error: LogError(.corruption,
                            "the checkpoint fails its checks (ignored: the next open scans the whole segment)", file: checkpointPath)))
                    }
                } catch {
                    report.problems.append(.init(severity: .damage, error: error))
                }
            }
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
                if let claim = AcknowledgedPosition.furthest(in: acknowledgedElsewhere, epoch: historyEpoch, beyond: scan.nextPosition) {
                    var damage = error
                    damage.message = "a batch looks torn, but \(claim.file) records positions below \(claim.nextPosition) as acknowledged: damage, not an unfinished write (a writer's open refuses it): " + error.message
                    report.problems.append(.init(severity: .damage, error: damage))
                } else if isLast && !sealed && scan.dataEnd >= checkpointEnd {
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
            // Past damage the segment's end is unknown: the next segment's base cannot be checked
            // against it (that would report the same damage twice).
            expected = scan.end.isClean ? scan.nextPosition : nil
        }
        return report
    }

    private static func checkIndex(at indexPath: String, against scan: SegmentScan) -> LogError? {
        do {
            switch try Segment.readSideFile(at: indexPath) {
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

    /// Starts a new history epoch without changing the log: accepts that state derived from the
    /// current history (EventKernel's snapshots) may describe events the log no longer holds.
    ///
    /// For the damage only derived state can reveal: events lost without a trace in the log
    /// itself (a segment cut at a batch boundary by a failed disk, say), which a snapshot
    /// covering them reports at open. After this, such snapshots are stale, never used, and the
    /// log alone is the truth. ``repair(at:)`` does the same whenever it cuts.
    /// - Parameter directory: The store directory.
    /// - Returns: The new epoch.
    /// - Throws: ``LogError/Code/locked`` if a writer has the store open,
    ///   ``LogError/Code/notAStore``, ``LogError/Code/io``.
    @discardableResult
    public static func startNewHistoryEpoch(at directory: URL) throws -> UInt64 {
        let path = directory.standardizedFileURL.path
        try StoreDirectory.requireExisting(path)
        guard isStore(at: directory) else {
            throw LogError(.notAStore, "\(path) is not a store", file: path)
        }
        let lock = try DirectoryLock(directory: path)
        defer { lock.unlock() }
        try LogLoader.advanceHistoryEpoch(in: path, io: PosixFileIO())
        return try StoreManifest.requireForReading(in: path).historyEpoch
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
        let damages = verification.problems.filter { $0.severity == .damage }.map(\.error)
        guard !damages.isEmpty else { return report }
        let bases = try Segment.bases(in: path)
        let segmentPaths = bases.map { path + "/" + Segment.Name.segment($0) }
        // Damage outside the segments first: a damaged store file is rewritten (in a new
        // epoch), the checkpoint of a missing segment removed (its loss accepted).
        for damage in damages {
            guard let file = damage.file, !segmentPaths.contains(file) else { continue }
            if file == path + "/" + StoreManifest.fileName {
                try LogLoader.advanceHistoryEpoch(in: path, io: io)
                report.rewrittenFiles.append(file)
            } else if file.hasSuffix("." + Segment.Name.checkpointExtension) {
                try LogLoader.advanceHistoryEpoch(in: path, io: io)
                if let checkpoint = try? Segment.readCheckpoint(at: file) {
                    report.firstDroppedPosition = checkpoint.basePosition
                    report.droppedRecords += checkpoint.nextPosition - checkpoint.basePosition
                }
                try StoreDirectory.remove(file)
                report.removedSideFiles.append(file)
            } else {
                throw LogError(.io, "damage reported in \(file), which repair does not know how to fix", file: file)
            }
            report.cut = report.cut ?? damage
        }
        guard let damage = damages.first(where: { $0.file.map(segmentPaths.contains) == true }),
              let damagedFile = damage.file, let damagedIndex = segmentPaths.firstIndex(of: damagedFile) else {
            try StoreDirectory.synchronize(path, io: io)
            return report
        }
        report.cut = damage
        let cutOffset = damage.offset ?? 0
        let firstDropped = damage.position ?? verification.segments.first(where: { $0.file == damagedFile })?.nextPosition ?? bases[damagedIndex]
        report.firstDroppedPosition = firstDropped
        let end = try droppedEnd(path: path, bases: bases, segmentPaths: segmentPaths, damagedIndex: damagedIndex,
                                 cutOffset: cutOffset, firstDropped: firstDropped, verification: verification)
        report.droppedRecords = end.position > firstDropped ? end.position - firstDropped : 0
        report.droppedRecordsAreExact = end.exact
        // The cut is a new history: the epoch advances first, so that state derived from the
        // old one (snapshots past the cut) is recognised as such, even after a crash midway.
        try LogLoader.advanceHistoryEpoch(in: path, io: io)
        // Everything from the cut in the damaged segment, and all later segments, go to recovered/.
        for (k, base) in bases.enumerated() where k >= damagedIndex {
            let segmentPath = segmentPaths[k]
            let file = try OpenFile.open(segmentPath, flags: O_RDWR)
            let size = try file.size()
            let from = k == damagedIndex ? (cutOffset < Int64(SegmentHeader.size) ? 0 : cutOffset) : 0
            let bytes = try file.read(fromAbsoluteOffset: from, count: Int(size - from))
            let name = Segment.Name.segment(base) + ".\(from).dropped"
            try RecoveredFiles.save(bytes, directory: path, name: name, io: io)
            report.savedFiles.append(RecoveredFiles.path(directory: path, name: name))
            report.droppedBytes += Int64(bytes.count)
            for side in [Segment.Name.index(base), Segment.Name.checkpoint(base)] where StoreDirectory.exists(path + "/" + side) {
                try StoreDirectory.remove(path + "/" + side)
                report.removedSideFiles.append(path + "/" + side)
            }
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

    /// One past the last position the cut drops, and whether every dropped batch could be
    /// counted. A damaged segment followed by another ends where the next begins; the last
    /// segment is walked header by header past the damage (a header is self-checked), then its
    /// checkpoint, when valid, vouches for what it lists.
    private static func droppedEnd(
        path: String, bases: [LogPosition], segmentPaths: [String], damagedIndex: Int, cutOffset: Int64,
        firstDropped: LogPosition, verification: VerificationReport
    ) throws -> (position: LogPosition, exact: Bool) {
        if damagedIndex + 1 < bases.count {
            // Later segments: their valid records; a damaged one among them is counted to its
            // damage only.
            var end = bases[damagedIndex + 1]
            var exact = true
            for (k, base) in bases.enumerated() where k > damagedIndex {
                guard let summary = verification.segments.first(where: { $0.basePosition == base }) else { exact = false; continue }
                end = max(end, summary.nextPosition)
                if k + 1 < bases.count, summary.nextPosition != bases[k + 1] { exact = false }
            }
            let laterDamage = verification.problems.contains {
                $0.severity == .damage && $0.error.file.map(segmentPaths[(damagedIndex + 1)...].contains) == true
            }
            return (end, exact && !laterDamage)
        }
        let file = try OpenFile.open(segmentPaths[damagedIndex], flags: O_RDONLY)
        let size = try file.size()
        // Batch headers check themselves: walk them from `offset`, expecting `position`.
        func walk(from start: Int64, expecting first: LogPosition) throws -> (offset: Int64, position: LogPosition, exact: Bool) {
            var offset = start, position = first
            while offset + Int64(BatchHeader.size) <= size {
                let bytes = try file.read(fromAbsoluteOffset: offset, count: BatchHeader.size)
                if bytes.allSatisfy({ $0 == 0 }) { break }
                guard case .success(let header) = bytes.withUnsafeBytes({ BatchHeader.decode($0) }), header.firstPosition == position else {
                    return (offset, position, false)
                }
                position = header.endPosition
                offset += Int64(header.batchLength)
            }
            return (offset, position, true)
        }
        var end = try walk(from: max(cutOffset, Int64(SegmentHeader.size)), expecting: firstDropped)
        // The checkpoint vouches for the batches it lists, damaged or not; the walk goes on
        // after them.
        if let checkpoint = try? Segment.readCheckpoint(at: path + "/" + Segment.Name.checkpoint(bases[damagedIndex])),
           checkpoint.nextPosition > end.position, checkpoint.dataLength >= end.offset {
            end = try walk(from: checkpoint.dataLength, expecting: checkpoint.nextPosition)
        }
        return (end.position, end.exact)
    }
}
