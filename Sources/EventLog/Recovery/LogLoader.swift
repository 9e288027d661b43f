#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Opens a store's segments: sealed ones from their index side files (reading no payload),
/// the active one by a scan, applying the recovery rules of Docs/Durability.md: segment
/// continuity, the torn-tail rule, truncation into `recovered/`. What is a segment's own (its
/// names, header, checkpoint, creation) is ``Segment``'s.
struct LogLoader {
    let directory: String
    let writable: Bool
    let configuration: SegmentedLog.Configuration
    /// The store's history epoch before this open (a writer's): which of
    /// `configuration.acknowledgedElsewhere` bind the log. `nil`: none do.
    var historyEpoch: UInt64? = nil
    var io: any LogFileIO { configuration.fileIO }

    struct Loaded {
        var segments: [Segment]
        /// The writer's handle on the last segment (a new one when the last was sealed); nil
        /// when read-only.
        var active: Segment.Active?
    }

    func path(_ name: String) -> String { directory + "/" + name }

    func load(report: inout RecoveryReport, reusingSealed known: [Segment] = []) throws(LogError) -> Loaded {
        let bases = try Segment.bases(in: directory)
        try Segment.checkForOrphanedCheckpoints(in: directory, segmentBases: bases)
        var segments: [Segment] = []
        var expected: LogPosition? = nil
        var lastIsSealed = false
        for (k, base) in bases.enumerated() {
            let isLast = k == bases.count - 1
            let segmentPath = path(Segment.Name.segment(base))
            if let expected, base != expected {
                throw LogError(.corruption,
                    "segments are not contiguous: the previous segment ends before position \(expected) but the next file starts at \(base) (a segment file is missing or extra)",
                    file: segmentPath, offset: 0, position: expected)
            }
            // A sealed segment already loaded is reused only while its file is still the one
            // at this name, whole: a compaction renames a rewritten segment over it, and a
            // read-only log holding the old descriptor would read the old batches forever.
            if let reused = known.first(where: { $0.basePosition == base && $0.sealed }),
               try reused.file.isStill(at: segmentPath, size: reused.dataEnd) {
                segments.append(reused)
                expected = reused.nextPosition
                lastIsSealed = true
                continue
            }
            let file = try OpenFile.open(segmentPath, flags: writable ? O_RDWR : O_RDONLY)
            if let sealed = try loadSealed(file: file, base: base, isLast: isLast, report: &report) {
                segments.append(sealed)
                expected = sealed.nextPosition
                lastIsSealed = true
                continue
            }
            // The active segment: the last one, without a valid index.
            lastIsSealed = false
            let active = try scanActive(file: file, base: base, report: &report)
            segments.append(active)
            expected = active.nextPosition
        }

        guard writable else {
            return Loaded(segments: segments, active: nil)
        }
        if segments.isEmpty || lastIsSealed {
            let created = try Segment.create(base: expected ?? 0, directory: directory, configuration: configuration)
            segments.append(created.segment)
            return Loaded(segments: segments, active: created.active)
        }
        let active = try Segment.Active(resuming: segments[segments.count - 1], directory: directory, configuration: configuration)
        return Loaded(segments: segments, active: active)
    }

    /// Loads a segment through its index; returns nil for the active segment (the last one
    /// without a valid index). A sealed segment whose index is missing or damaged is rebuilt
    /// by a strict scan: any invalid batch in it is damage.
    private func loadSealed(file: OpenFile, base: LogPosition, isLast: Bool, report: inout RecoveryReport) throws(LogError) -> Segment? {
        let indexPath = path(Segment.Name.index(base))
        let fileSize = try file.size()
        if StoreDirectory.exists(indexPath) {
            if case .success(let index) = try Segment.readSideFile(at: indexPath), index.basePosition == base, index.dataLength == fileSize {
                return Segment(file: file, index: index)
            }
        } else if isLast {
            return nil
        }
        // A sealed segment (not the last, or the last with an index) whose index is absent or
        // does not match it. The index is derived data; the segment decides.
        let scan = try SegmentScanner(file: file, basePosition: base).scan()
        switch scan.end {
        case .clean:
            break
        case .damage(let error), .tornTail(let error):
            if isLast {
                // The index of the last segment is damaged and the segment has a bad tail:
                // treat it as active so the normal tail rules apply.
                if writable { try StoreDirectory.remove(indexPath) }
                return nil
            }
            throw error
        }
        if scan.dataEnd != fileSize && !isLast {
            throw LogError(.corruption, "sealed segment has \(fileSize - scan.dataEnd) bytes after its last batch",
                           file: file.path, offset: scan.dataEnd, position: scan.nextPosition)
        }
        if isLast && scan.dataEnd != fileSize {
            if writable { try StoreDirectory.remove(indexPath) }
            return nil
        }
        let segment = Segment(file: file, scan: scan, sealed: true)
        if writable { try Segment.writeIndex(segment.index, directory: directory, io: io) }
        report.rebuiltIndexes.append(indexPath)
        return segment
    }

    /// Scans the active segment; truncates a torn tail (writable) or stops before it (read-only).
    private func scanActive(file: OpenFile, base: LogPosition, report: inout RecoveryReport) throws(LogError) -> Segment {
        if case .failure(let error) = try Segment.readHeader(of: file, base: base) {
            // A segment header that is not valid: harmless if the file holds nothing else and
            // the header is a prefix of the right one (a crash while the segment was being
            // created), damage otherwise.
            guard try Segment.isUnfinishedCreation(of: file, base: base, directory: directory) else { throw error }
            if writable {
                try Segment.finishCreation(of: file, base: base, io: io)
                report.reinitializedSegments.append(file.path)
            }
            return Segment(file: file, basePosition: base)
        }
        var scanner = SegmentScanner(file: file, basePosition: base)
        scanner.concurrentWriterPossible = !writable
        if let checkpoint = try Segment.loadCheckpoint(of: file, base: base, directory: directory, removingInvalid: writable) {
            scanner.resume = (checkpoint.batches, checkpoint.dataLength, checkpoint.nextPosition)
        }
        let scan = try scanner.scan()
        switch scan.end {
        case .clean:
            break
        case .damage(let error):
            throw error
        case .tornTail(let error):
            if let claim = acknowledged(beyond: scan.nextPosition) {
                throw LogError(.corruption,
                    "the batch at this offset is invalid (\(error.message)) and would be cut as a torn write, but \(claim.file) records positions up to \(claim.nextPosition) as acknowledged: an acknowledged batch is damaged (`eventkernel verify` shows the damage; `eventkernel repair --yes` accepts the loss)",
                    file: file.path, offset: scan.dataEnd, position: scan.nextPosition)
            }
            if writable {
                report.truncatedTail = try truncateTornTail(file: file, base: base, at: scan.dataEnd, fileSize: scan.fileSize, reason: error.message)
            } else {
                report.incompleteTail = "\(file.path) at offset \(scan.dataEnd): \(error.message)"
            }
        }
        return Segment(file: file, scan: scan, sealed: false)
    }

    /// The torn-tail rule's third source (Docs/Durability.md, "What counts as torn"), beside a
    /// sealed segment's index and the active segment's checkpoint: the furthest record of the
    /// current history that says positions at or after `position` were acknowledged, if any.
    /// A tail that starts below it is damage, never torn.
    private func acknowledged(beyond position: LogPosition) -> AcknowledgedPosition? {
        AcknowledgedPosition.furthest(in: configuration.acknowledgedElsewhere, epoch: historyEpoch, beyond: position)
    }

    /// Keeps the torn bytes in `recovered/`, advances the history epoch, then cuts the segment
    /// at `offset`. The epoch goes first: a crash in between leaves a new epoch and an uncut
    /// tail (cut again at the next open), never a cut history in the old epoch.
    private func truncateTornTail(file: OpenFile, base: LogPosition, at offset: Int64, fileSize: Int64, reason: String) throws(LogError) -> RecoveryReport.TruncatedTail {
        var tail = try file.read(fromAbsoluteOffset: offset, count: Int(fileSize - offset))
        while let last = tail.last, last == 0 { tail.removeLast() }
        if !tail.isEmpty { try Self.advanceHistoryEpoch(in: directory, io: io) }
        var savedTo: String? = nil
        if !tail.isEmpty {
            let name = Segment.Name.segment(base) + ".\(offset).torn"
            try RecoveredFiles.save(tail, directory: directory, name: name, io: io)
            savedTo = RecoveredFiles.path(directory: directory, name: name)
        }
        try io.truncate(descriptor: file.descriptor, path: file.path, length: offset)
        try io.synchronize(descriptor: file.descriptor, path: file.path)
        return RecoveryReport.TruncatedTail(file: file.path, offset: offset, droppedBytes: Int64(tail.count), savedTo: savedTo, reason: reason)
    }

    /// Records that the history was cut (Docs/Durability.md): every cut goes through here.
    static func advanceHistoryEpoch(in directory: String, io: any LogFileIO) throws(LogError) {
        var manifest: StoreManifest
        do {
            manifest = try StoreManifest.read(in: directory) ?? StoreManifest(historyEpoch: 0)
            manifest.historyEpoch += 1
        } catch {
            // The old epoch is unreadable: any value it cannot have been will do (epochs are
            // only compared for equality). Counts stay small; this is far above any. The
            // features cannot be read either: keep every one this build knows set, so that a
            // store that may hold sparse batches never loses its marker (setting a bit the
            // files do not use only makes older builds refuse the store).
            manifest = StoreManifest(historyEpoch: (1 << 62) | UInt64(truncatingIfNeeded: time(nil)), features: .known)
        }
        try manifest.write(in: directory, io: io)
    }
}

/// `recovered/`: where recovery and repair keep every byte they remove from the log.
enum RecoveredFiles {
    static let directoryName = "recovered"

    static func path(directory: String, name: String) -> String {
        directory + "/" + directoryName + "/" + name
    }

    static func save(_ bytes: [UInt8], directory: String, name: String, io: any LogFileIO) throws(LogError) {
        let folder = directory + "/" + directoryName
        try StoreDirectory.create(folder)
        try StoreDirectory.writeAtomically(bytes, directory: folder, name: name, io: io)
    }
}
