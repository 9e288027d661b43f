import KernelPrimitives
/// Where a read walk stands: a segment, a batch within it, and the first position the walk has
/// not passed yet. The segment index is stable while the log is open (segments are only ever appended, and
/// compaction replaces a segment in place); the batch index is stable until compaction rewrites
/// the segment, which is why the cursor keeps the position too: ``LogCore/locations(from:limit:segmentFilter:include:)``
/// finds its batch again by position when the segment's batches changed under it.
struct BatchCursor {
    var segment: Int
    var batch: Int
    /// Where the walk resumes: the first position of the batch at `batch` unless compaction
    /// rewrote the segment.
    var position: LogPosition
}

extension LogCore {
    /// The cursor of the batch holding `position`, or nil when the log does not hold it.
    /// - Complexity: O(log s + log b).
    func cursor(containing position: LogPosition) -> BatchCursor? {
        state.withLock { state in Self.cursor(containing: position, in: state.segments) }
    }

    /// The first position of the batch that holds `position`, found under one hold of the lock.
    func batchStart(containing position: LogPosition) -> LogPosition? {
        state.withLock { state in
            guard let cursor = Self.cursor(containing: position, in: state.segments) else { return nil }
            return state.segments[cursor.segment].batches[cursor.batch].firstPosition
        }
    }

    static func cursor(containing position: LogPosition, in segments: [Segment]) -> BatchCursor? {
        // Last segment whose base is <= position.
        var lo = 0, hi = segments.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if segments[mid].basePosition <= position { lo = mid + 1 } else { hi = mid }
        }
        guard lo > 0 else { return nil }
        let segment = lo - 1
        let batches = segments[segment].batches
        var blo = 0, bhi = batches.count
        while blo < bhi {
            let mid = (blo + bhi) / 2
            if batches[mid].firstPosition <= position { blo = mid + 1 } else { bhi = mid }
        }
        guard blo > 0, position < batches[blo - 1].endPosition else { return nil }
        return BatchCursor(segment: segment, batch: blo - 1, position: batches[blo - 1].firstPosition)
    }

    /// The index of the batch of `batches` (contiguous by position) that holds `position`: 0
    /// when `position` is before the first, the count when it is at or past the last's end.
    private static func batchIndex(containing position: LogPosition, in batches: [BatchLocation]) -> Int {
        var lo = 0, hi = batches.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if batches[mid].firstPosition <= position { lo = mid + 1 } else { hi = mid }
        }
        guard lo > 0 else { return 0 }
        return position < batches[lo - 1].endPosition ? lo - 1 : lo
    }

    /// Up to `limit` batch locations from `cursor` within one segment that pass `include`,
    /// with the segment's file and the position the walk resumes at (records of the first
    /// batch before it were handed out already), and the cursor after them; nil at the end
    /// of the log.
    ///
    /// Copies a bounded slice under the lock so that the disk reads happen outside it and an
    /// appending writer is never made to copy a large array.
    func locations(
        from cursor: inout BatchCursor, limit: Int, segmentFilter: (Segment) -> Bool = { _ in true },
        include: (BatchLocation) -> Bool = { _ in true }
    ) -> (file: OpenFile, batches: [BatchLocation], resumeAt: LogPosition)? {
        state.withLock { state in
            while cursor.segment < state.segments.count {
                let segment = state.segments[cursor.segment]
                let batches = segment.batches
                let inPlace = cursor.batch < batches.count
                    ? batches[cursor.batch].firstPosition == cursor.position
                    : (batches.last?.endPosition ?? segment.basePosition) == cursor.position
                if !inPlace {
                    // Compaction rewrote the segment since the last call: the same positions in
                    // other batches. Resume at the batch holding the cursor's position.
                    cursor.batch = Self.batchIndex(containing: cursor.position, in: batches)
                }
                if cursor.batch >= batches.count || !segmentFilter(segment) {
                    if !segment.sealed && cursor.segment == state.segments.count - 1 { return nil }
                    cursor.segment += 1
                    cursor.batch = 0
                    cursor.position = segment.nextPosition
                    continue
                }
                let resumeAt = cursor.position
                var found: [BatchLocation] = []
                while cursor.batch < batches.count && found.count < limit {
                    let batch = batches[cursor.batch]
                    if include(batch) { found.append(batch) }
                    cursor.batch += 1
                    cursor.position = batch.endPosition
                }
                if !found.isEmpty { return (segment.file, found, resumeAt) }
            }
            return nil
        }
    }
}

/// Reads batches from a segment file, coalescing neighbours into one `pread` and checking
/// every header and payload checksum before a record is handed out.
struct BatchReader {
    private var buffer: [UInt8] = []
    private var scratch: [UInt8] = []
    private static let maxSpan = 4 << 20

    /// Visits the records of `batches` (sorted, from one file) in [start, end]; false if stopped.
    mutating func visit(
        _ batches: [BatchLocation], in file: OpenFile, from start: LogPosition, through end: LogPosition,
        filter: ((LogRecordView) -> Bool)? = nil, _ body: (LogRecordView) throws -> Bool
    ) throws -> Bool {
        var i = 0
        while i < batches.count {
            // Coalesce physically adjacent batches up to maxSpan bytes.
            var j = i + 1
            var spanEnd = batches[i].endOffset
            while j < batches.count && batches[j].offset == spanEnd && spanEnd - batches[i].offset < Int64(Self.maxSpan) {
                spanEnd = batches[j].endOffset
                j += 1
            }
            let spanStart = batches[i].offset
            let length = Int(spanEnd - spanStart)
            if buffer.count < length { buffer = [UInt8](repeating: 0, count: length) }
            let read = try buffer.withUnsafeMutableBytes { raw in
                try file.read(fromAbsoluteOffset: spanStart, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<length]))
            }
            guard read == length else {
                throw LogError(.corruption, "segment ends at \(spanStart + Int64(read)) inside a batch that ends at \(spanEnd)",
                               file: file.path, offset: spanStart + Int64(read), position: batches[i].firstPosition)
            }
            for k in i..<j {
                let location = batches[k]
                let keepGoing = try buffer.withUnsafeBytes { raw -> Bool in
                    let at = Int(location.offset - spanStart)
                    let bytes = UnsafeRawBufferPointer(rebasing: raw[at..<(at + Int(location.batchLength))])
                    return try Self.visitBatch(bytes, location: location, file: file, scratch: &scratch,
                                               from: start, through: end, filter: filter, body)
                }
                if !keepGoing { return false }
            }
            i = j
        }
        return true
    }

    /// Checks one batch read whole (`bytes`) against its location, then visits its records in
    /// [start, end]: the checks every read of a batch makes.
    static func visitBatch(
        _ bytes: UnsafeRawBufferPointer, location: BatchLocation, file: OpenFile, scratch: inout [UInt8],
        from start: LogPosition, through end: LogPosition, filter: ((LogRecordView) -> Bool)?,
        _ body: (LogRecordView) throws -> Bool
    ) throws -> Bool {
        func damage(_ message: String) -> LogError {
            LogError(.corruption, message, file: file.path, offset: location.offset, position: location.firstPosition)
        }
        let header: BatchHeader
        switch BatchHeader.decode(bytes) {
        case .success(let decoded): header = decoded
        case .failure(let why): throw damage(why.message)
        }
        guard header.firstPosition == location.firstPosition, header.positionCount == location.positionCount,
              header.batchLength == Int(location.batchLength) else {
            throw damage("batch header (position \(header.firstPosition), \(header.positionCount) positions) does not match the segment index")
        }
        let payload = UnsafeRawBufferPointer(rebasing: bytes[BatchHeader.size...])
        let crc = CRC32C.checksum(payload)
        guard crc == header.payloadChecksum else {
            throw damage("payload checksum mismatch: stored 0x\(String(header.payloadChecksum, radix: 16)), computed 0x\(String(crc, radix: 16))")
        }
        do {
            if let filter {
                return try BatchPayload.forEachRecord(in: payload, header: header, scratch: &scratch, from: start, through: end) { view in
                    filter(view) ? try body(view) : true
                }
            }
            return try BatchPayload.forEachRecord(in: payload, header: header, scratch: &scratch, from: start, through: end, body)
        } catch var error as LogError where error.file == nil && (error.code == .corruption || error.code == .compression) {
            error.file = file.path
            error.offset = location.offset
            error.position = error.position ?? location.firstPosition
            throw error
        }
    }
}

extension SegmentedLog {
    /// The first position of the batch that holds `position`; `nil` when the log does not hold it.
    /// - Complexity: O(log s + log b).
    public func batchStart(containing position: LogPosition) -> LogPosition? {
        core.batchStart(containing: position)
    }

    public func firstCompactedPosition(in range: Range<LogPosition>) throws -> LogPosition? {
        guard !range.isEmpty else { return nil }
        // The locations are taken under the lock, the headers read outside it (a rewrite that
        // replaces a file meanwhile leaves the old one readable through its descriptor).
        let found = core.state.withLock { state -> [(OpenFile, BatchLocation)] in
            guard var cursor = LogCore.cursor(containing: range.lowerBound, in: state.segments) else { return [] }
            var found: [(OpenFile, BatchLocation)] = []
            while cursor.segment < state.segments.count {
                let segment = state.segments[cursor.segment]
                while cursor.batch < segment.batches.count {
                    let batch = segment.batches[cursor.batch]
                    guard batch.firstPosition < range.upperBound else { return found }
                    found.append((segment.file, batch))
                    cursor.batch += 1
                }
                cursor.segment += 1
                cursor.batch = 0
            }
            return found
        }
        for (file, batch) in found where try batch.isSparse(in: file) {
            return Swift.max(batch.firstPosition, range.lowerBound)
        }
        return nil
    }

    public func forEachRecord(
        from start: LogPosition, through end: LogPosition?, _ body: (LogRecordView) throws -> Bool
    ) throws {
        let bounds = self.bounds
        guard !bounds.isEmpty else { return }
        let first = Swift.max(start, bounds.firstPosition)
        let last = Swift.min(end ?? .max, bounds.nextPosition - 1)
        guard first <= last, var cursor = core.cursor(containing: first) else { return }
        var reader = BatchReader()
        while let (file, batches, resumeAt) = core.locations(from: &cursor, limit: 1024, include: { $0.firstPosition <= last }) {
            guard try reader.visit(batches, in: file, from: Swift.max(first, resumeAt), through: last, body) else { return }
            if batches[batches.count - 1].endPosition > last { return }
        }
    }

    public func forEachRecord(
        timestampsIn range: ClosedRange<LogTimestamp>, _ body: (LogRecordView) throws -> Bool
    ) throws {
        let lo = range.lowerBound.nanosecondsSince1970
        let hi = range.upperBound.nanosecondsSince1970
        let last = bounds.nextPosition
        guard last > 0 else { return }
        var cursor = BatchCursor(segment: 0, batch: 0, position: 0)
        var reader = BatchReader()
        while let (file, batches, resumeAt) = core.locations(
            from: &cursor, limit: 1024,
            segmentFilter: { segment in
                guard let min = segment.minTimestamp, let max = segment.maxTimestamp else { return false }
                return min <= hi && max >= lo
            },
            include: { $0.minTimestamp <= hi && $0.maxTimestamp >= lo && $0.firstPosition < last }
        ) {
            let keepGoing = try reader.visit(batches, in: file, from: resumeAt, through: last - 1,
                                             filter: { range.contains($0.timestamp) }, body)
            guard keepGoing else { return }
        }
    }
}
