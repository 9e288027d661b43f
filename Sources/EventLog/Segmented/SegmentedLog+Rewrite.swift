#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KernelPrimitives

/// What a rewrite does with one record of a sealed segment (``SegmentedLog/rewriteSealedSegment(startingAt:_:)``).
package enum RecordRewrite: Sendable, Equatable {
    /// The record stays as it is.
    case keep
    /// The record goes: its position becomes a gap.
    case remove
    /// The record stays at its position and recording time with another payload (a state
    /// record in place of the events it sums up, a payload whose personal data is erased).
    case replace([UInt8])
}

/// What rewriting one sealed segment did.
package struct SegmentRewrite: Sendable, Equatable {
    /// The segment's base position.
    package var basePosition: LogPosition
    /// The positions it covers (unchanged by the rewrite).
    package var positions: Range<LogPosition>
    /// Its file's length before and after.
    package var bytesBefore: Int64
    package var bytesAfter: Int64
    /// Records it held before, removed, and replaced.
    package var recordsBefore: Int
    package var recordsRemoved: Int
    package var recordsReplaced: Int
    /// Whether the file was replaced (false when every record was kept as it was).
    package var rewritten: Bool
}

extension SegmentedLog {
    /// The position ranges of the sealed segments, in order: what a compaction can rewrite.
    package var sealedSegments: [Range<LogPosition>] {
        core.state.withLock { state in
            state.segments.filter(\.sealed).map { $0.basePosition..<$0.nextPosition }
        }
    }

    /// Rewrites the sealed segment starting at `base`, record by record as `decide` says,
    /// online: appends, reads and other segments go on, and the new file replaces the old one
    /// atomically.
    ///
    /// Positions do not move: batches the rewrite changes become *sparse* batches covering the
    /// same range of positions (Docs/FileFormat.md, "Sparse batches"), batches it does not
    /// change are copied as they are, and the segment keeps its base and its end. The store
    /// file is marked as holding sparse batches before the first one is written, so that a
    /// build that cannot read them refuses the store instead of calling it damaged.
    ///
    /// Crash safety, step by step: the new segment is written to `<base>.log.tmp` and synced;
    /// the segment's index is removed and the directory synced (a crash from here on finds the
    /// segment without an index and rebuilds it from whichever segment file is there); the
    /// temporary file is renamed over the segment and the directory synced; the new index is
    /// written atomically. A crash at any instant leaves the old segment or the new one, whole,
    /// never both, never neither, and never an index describing the other one. Readers walking
    /// the segment meanwhile finish on the file they started on (its descriptor keeps it) and
    /// later walks read the new one; a walk in progress resumes by position
    /// (``BatchCursor``).
    ///
    /// One rewrite at a time per log (a lock that backups take too, so that a backup copies
    /// each segment and its index as one version). `decide` runs under that lock only, never
    /// under the log's state lock.
    ///
    /// - Parameters:
    ///   - base: The base position of a sealed segment (``sealedSegments``).
    ///   - decide: Called once per record in position order; the record's payload is valid
    ///     only during the call.
    /// - Returns: What changed.
    /// - Throws: ``LogError``: ``LogError/Code/readOnly`` on a read-only log,
    ///   ``LogError/Code/invalidArgument`` when no sealed segment starts at `base`,
    ///   ``LogError/Code/corruption`` (file, offset, position) when a batch of the segment fails
    ///   its checks (nothing is changed), ``LogError/Code/io``; or what `decide` throws (nothing
    ///   is changed).
    /// - Complexity: Reads the segment once and writes what it keeps; memory bounded by one
    ///   batch of input and about ``rewriteBatchBytes`` of output.
    package func rewriteSealedSegment(
        startingAt base: LogPosition, _ decide: (LogRecordView) throws -> RecordRewrite
    ) throws -> SegmentRewrite {
        guard writer != nil else {
            throw LogError(.readOnly, "the log was opened read-only: it cannot rewrite segments", file: core.directory)
        }
        return try core.maintenance.withLock { _ in try rewrite(base: base, decide) }
    }

    /// Seals the active segment now (after the appends acknowledged before the call) and
    /// starts a new one, unless it holds nothing: what it holds can then be rewritten. Appends
    /// go on meanwhile.
    /// - Throws: ``LogError``: ``LogError/Code/readOnly`` on a read-only log, ``LogError/Code/closed``,
    ///   or the failed write or sync (which poisons the log, as any failed write does).
    package func sealActiveSegment() async throws {
        guard let writer else {
            throw LogError(.readOnly, "the log was opened read-only: it cannot seal its segment", file: core.directory)
        }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            writer.submit(.seal({ continuation.resume(with: $0.mapError { $0 as any Error }) }))
        }
    }

    /// Kept records are gathered into sparse batches of about this many payload bytes.
    package static let rewriteBatchBytes = 1 << 20

    private func rewrite(base: LogPosition, _ decide: (LogRecordView) throws -> RecordRewrite) throws -> SegmentRewrite {
        let io = core.configuration.fileIO
        guard let old = core.state.withLock({ state in state.segments.first { $0.basePosition == base && $0.sealed } }) else {
            throw LogError(.invalidArgument, "no sealed segment starts at position \(base)", file: core.directory, position: base)
        }
        var result = SegmentRewrite(basePosition: base, positions: old.basePosition..<old.nextPosition,
                                    bytesBefore: old.dataEnd, bytesAfter: old.dataEnd, recordsBefore: 0,
                                    recordsRemoved: 0, recordsReplaced: 0, rewritten: false)
        let finalPath = core.directory + "/" + Segment.Name.segment(base)
        let temporaryPath = finalPath + ".tmp"
        // A rewrite cut short by a crash (or an error) left this: garbage, never read.
        try StoreDirectory.remove(temporaryPath)

        var output = SegmentOutput(path: temporaryPath, base: base, io: io, codec: core.configuration.compression)
        var scratch: [UInt8] = []
        var changedAny = false
        let index: SegmentIndexFile
        do {
            for batch in old.batches {
                let raw = try old.file.read(fromAbsoluteOffset: batch.offset, count: Int(batch.batchLength))
                guard raw.count == Int(batch.batchLength) else {
                    throw LogError(.corruption, "segment ends at \(batch.offset + Int64(raw.count)) inside a batch that ends at \(batch.endOffset)",
                                   file: old.file.path, offset: batch.offset + Int64(raw.count), position: batch.firstPosition)
                }
                var kept: [BatchPayload.PositionedRecord] = []
                var changed = false
                try raw.withUnsafeBytes { bytes in
                    _ = try BatchReader.visitBatch(bytes, location: batch, file: old.file, scratch: &scratch,
                                                   from: 0, through: .max, filter: nil) { record in
                        result.recordsBefore += 1
                        switch try decide(record) {
                        case .keep:
                            kept.append(.init(position: record.position, timestamp: record.timestamp, payload: Array(record.payload)))
                        case .remove:
                            result.recordsRemoved += 1
                            changed = true
                        case .replace(let payload):
                            result.recordsReplaced += 1
                            changed = true
                            kept.append(.init(position: record.position, timestamp: record.timestamp, payload: payload))
                        }
                        return true
                    }
                }
                if changed {
                    changedAny = true
                    try output.addSparse(kept, covering: batch.firstPosition..<batch.endPosition,
                                         timestamps: (batch.minTimestamp, batch.maxTimestamp))
                } else {
                    try output.addVerbatim(raw, location: batch)
                }
            }
            guard changedAny else {
                output.discard()
                return result
            }
            index = try output.finish()
            guard index.nextPosition == old.nextPosition else {
                throw LogError(.corruption, "the rewritten segment ends at \(index.nextPosition), the segment at \(old.nextPosition)",
                               file: finalPath, position: base)
            }
            try markSparseBatches(io: io)
            // The old index goes first, durably: no crash may pair it with the new segment.
            try StoreDirectory.remove(core.directory + "/" + Segment.Name.index(base))
            try StoreDirectory.synchronize(core.directory, io: io)
            do throws(SystemCallError) {
                try SystemCall.run("rename to \(finalPath)") { rename(temporaryPath, finalPath) }
            } catch {
                throw LogError.system(error, file: temporaryPath)
            }
        } catch {
            output.discard()
            throw error
        }
        // The directory names the new segment from the rename on: readers see it too (a
        // failing sync below leaves its durability in doubt, not which file is the segment).
        // The index is derived data, rebuilt from the segment at the next open if writing it fails.
        let replacement = Segment(file: try OpenFile.open(finalPath, flags: O_RDONLY), index: index)
        core.state.withLock { state in
            if let k = state.segments.firstIndex(where: { $0.basePosition == base }) {
                state.segments[k] = replacement
                state.recomputeBounds()
            }
        }
        try StoreDirectory.synchronize(core.directory, io: io)
        result.bytesAfter = index.dataLength
        result.rewritten = true
        try Segment.writeIndex(index, directory: core.directory, io: io)
        return result
    }

    /// Sets the store file's sparse-batches feature (durably) unless it is set.
    private func markSparseBatches(io: any LogFileIO) throws(LogError) {
        var manifest = try StoreManifest.requireForReading(in: core.directory)
        guard !manifest.features.contains(.sparseBatches) else { return }
        manifest.features.insert(.sparseBatches)
        try manifest.write(in: core.directory, io: io)
    }
}

/// The new file of a segment being rewritten: its header, then batches appended one by one,
/// kept records gathered into sparse batches of about ``SegmentedLog/rewriteBatchBytes``.
private struct SegmentOutput {
    let path: String
    let base: LogPosition
    let io: any LogFileIO
    let codec: CompressionCodec
    private var file: OpenFile?
    private var offset = Int64(SegmentHeader.size)
    private var next: LogPosition
    private var batches: [BatchLocation] = []
    /// Sparse records waiting to be written, the positions they cover, and their timestamps
    /// when there are none.
    private var pending: [BatchPayload.PositionedRecord] = []
    private var pendingBytes = 0
    private var pendingStart: LogPosition
    private var pendingTimestamps: (Int64, Int64)?
    private var encoded: [UInt8] = []
    private var scratch: [UInt8] = []

    init(path: String, base: LogPosition, io: any LogFileIO, codec: CompressionCodec) {
        self.path = path
        self.base = base
        self.io = io
        self.codec = codec
        self.next = base
        self.pendingStart = base
    }

    private mutating func openedFile() throws(LogError) -> OpenFile {
        if let file { return file }
        let opened = try OpenFile.open(path, flags: O_RDWR | O_CREAT | O_TRUNC)
        file = opened
        try SegmentHeader(basePosition: base).encoded().withBytes { (raw) throws(LogError) in
            try io.writeAll(raw, toAbsoluteOffset: 0, descriptor: opened.descriptor, path: path)
        }
        return opened
    }

    /// Adds the records kept of a batch that covered `positions` (a sparse batch's worth).
    mutating func addSparse(_ records: [BatchPayload.PositionedRecord], covering positions: Range<LogPosition>,
                            timestamps: (Int64, Int64)) throws(LogError) {
        precondition(positions.lowerBound == next, "batches are rewritten in position order")
        // Each record's framing is at most three varints; a batch's limit is the format's.
        var incoming = 0
        for record in records { incoming += record.payload.count + 30 }
        if pendingBytes > 0 && pendingBytes + incoming > SegmentedLog.rewriteBatchBytes { try flush() }
        pending.append(contentsOf: records)
        pendingBytes += incoming
        pendingTimestamps = pendingTimestamps.map { (min($0.0, timestamps.0), max($0.1, timestamps.1)) } ?? timestamps
        next = positions.upperBound
    }

    /// Adds a batch unchanged: its verified bytes as they were.
    mutating func addVerbatim(_ raw: [UInt8], location: BatchLocation) throws(LogError) {
        precondition(location.firstPosition == next, "batches are rewritten in position order")
        try flush()
        try write(raw, location: location)
        next = location.endPosition
        pendingStart = next
    }

    /// Writes the pending sparse batch, if any.
    private mutating func flush() throws(LogError) {
        guard pendingStart < next, let timestamps = pendingTimestamps else { return }
        encoded.removeAll(keepingCapacity: true)
        let header = try BatchPayload.encodeSparseBatch(pending, covering: pendingStart..<next, emptyTimestamps: timestamps,
                                                        codec: codec, into: &encoded, scratch: &scratch)
        try write(encoded, location: BatchLocation(
            firstPosition: header.firstPosition, positionCount: header.positionCount, batchLength: UInt32(header.batchLength),
            offset: offset, minTimestamp: header.minTimestamp, maxTimestamp: header.maxTimestamp))
        pending.removeAll(keepingCapacity: true)
        pendingBytes = 0
        pendingStart = next
        pendingTimestamps = nil
    }

    private mutating func write(_ bytes: [UInt8], location: BatchLocation) throws(LogError) {
        let file = try openedFile()
        var placed = location
        placed.offset = offset
        try bytes.withBytes { (raw) throws(LogError) in
            try io.writeAll(raw, toAbsoluteOffset: offset, descriptor: file.descriptor, path: path)
        }
        batches.append(placed)
        offset += Int64(bytes.count)
    }

    /// Writes what is pending and syncs the file.
    /// - Returns: The new segment's index.
    mutating func finish() throws(LogError) -> SegmentIndexFile {
        do throws(LogError) {
            try flush()
            let file = try openedFile()
            try io.truncate(descriptor: file.descriptor, path: path, length: offset)
            try io.synchronize(descriptor: file.descriptor, path: path)
            return SegmentIndexFile(basePosition: base, nextPosition: next, dataLength: offset, batches: batches)
        } catch {
            discard()
            throw error
        }
    }

    /// Removes the temporary file.
    mutating func discard() {
        if file != nil { unlink(path) }
        file = nil
    }
}
