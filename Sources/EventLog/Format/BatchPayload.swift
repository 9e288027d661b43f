import KernelPrimitives
/// Encoding and decoding of a batch's records (Docs/FileFormat.md, "Batch payload").
///
/// Uncompressed, a payload is the records back to back, each as
/// `varint(timestamp - batch minimum timestamp)`, `varint(length)`, `length` bytes.
/// Varints (unsigned LEB128) keep the framing at two or three bytes a record, so that small
/// records are not dominated by their framing even before compression.
enum BatchPayload {
    /// Builds the stored form of a batch: the header followed by the (maybe compressed) payload.
    /// - Returns: The encoded batch and its header.
    static func encodeBatch(
        _ entries: some Collection<LogEntry>, firstPosition: LogPosition, codec: CompressionCodec,
        into output: inout [UInt8], scratch: inout [UInt8]
    ) throws(LogError) -> BatchHeader {
        guard !entries.isEmpty else { throw LogError(.invalidArgument, "an append needs at least one record") }
        guard entries.count <= Int(UInt32.max) else { throw LogError(.tooLarge, "\(entries.count) records in one batch") }
        var minTimestamp = Int64.max
        var maxTimestamp = Int64.min
        for entry in entries {
            minTimestamp = min(minTimestamp, entry.timestamp.nanosecondsSince1970)
            maxTimestamp = max(maxTimestamp, entry.timestamp.nanosecondsSince1970)
        }
        scratch.removeAll(keepingCapacity: true)
        for entry in entries {
            // Subtraction cannot overflow when done in UInt64 bit patterns: the difference fits.
            let delta = UInt64(bitPattern: entry.timestamp.nanosecondsSince1970) &- UInt64(bitPattern: minTimestamp)
            Varint.encode(delta, into: &scratch)
            Varint.encode(UInt64(entry.payload.count), into: &scratch)
            scratch.append(contentsOf: entry.payload)
        }
        return try seal(scratch, firstPosition: firstPosition, recordCount: UInt32(entries.count), sparsePositionCount: nil,
                        minTimestamp: minTimestamp, maxTimestamp: maxTimestamp, codec: codec, into: &output)
    }

    /// A record compaction keeps: where it was, when, and its (maybe replaced) payload.
    struct PositionedRecord {
        var position: LogPosition
        var timestamp: LogTimestamp
        var payload: [UInt8]
    }

    /// Builds a sparse batch (Docs/FileFormat.md, "Sparse batches"): `records`, in position
    /// order, inside `positions`, each framed as `varint(gap)`, `varint(timestamp delta)`,
    /// `varint(length)`, bytes, where the gap is its distance from the previous record's
    /// position + 1 (from `positions.lowerBound` for the first).
    ///
    /// - Parameters:
    ///   - emptyTimestamps: The header's timestamps when `records` is empty (a sparse batch
    ///     that keeps only its position range): those of what it replaces.
    /// - Returns: The header.
    static func encodeSparseBatch(
        _ records: [PositionedRecord], covering positions: Range<LogPosition>, emptyTimestamps: (Int64, Int64),
        codec: CompressionCodec, into output: inout [UInt8], scratch: inout [UInt8]
    ) throws(LogError) -> BatchHeader {
        guard !positions.isEmpty, positions.count <= Int(UInt32.max), records.count <= positions.count else {
            throw LogError(.invalidArgument, "a sparse batch of \(records.count) records cannot cover positions \(positions)")
        }
        var minTimestamp = records.isEmpty ? emptyTimestamps.0 : Int64.max
        var maxTimestamp = records.isEmpty ? emptyTimestamps.1 : Int64.min
        for record in records {
            minTimestamp = min(minTimestamp, record.timestamp.nanosecondsSince1970)
            maxTimestamp = max(maxTimestamp, record.timestamp.nanosecondsSince1970)
        }
        scratch.removeAll(keepingCapacity: true)
        var next = positions.lowerBound
        for record in records {
            guard record.position >= next, record.position < positions.upperBound else {
                throw LogError(.invalidArgument, "record at position \(record.position) is out of order or outside \(positions)", position: record.position)
            }
            Varint.encode(record.position - next, into: &scratch)
            let delta = UInt64(bitPattern: record.timestamp.nanosecondsSince1970) &- UInt64(bitPattern: minTimestamp)
            Varint.encode(delta, into: &scratch)
            Varint.encode(UInt64(record.payload.count), into: &scratch)
            scratch.append(contentsOf: record.payload)
            next = record.position + 1
        }
        return try seal(scratch, firstPosition: positions.lowerBound, recordCount: UInt32(records.count),
                        sparsePositionCount: UInt32(positions.count), minTimestamp: minTimestamp, maxTimestamp: maxTimestamp,
                        codec: codec, into: &output)
    }

    /// Appends the header and the stored form of the framed records in `scratch` to `output`:
    /// the one place a batch is compressed and checksummed, dense or sparse.
    private static func seal(
        _ scratch: [UInt8], firstPosition: LogPosition, recordCount: UInt32, sparsePositionCount: UInt32?,
        minTimestamp: Int64, maxTimestamp: Int64, codec: CompressionCodec, into output: inout [UInt8]
    ) throws(LogError) -> BatchHeader {
        guard scratch.count <= BatchHeader.maxPayloadLength else {
            throw LogError(.tooLarge, "batch payload of \(scratch.count) bytes exceeds the format limit of \(BatchHeader.maxPayloadLength) bytes")
        }
        let headerStart = output.count
        output.append(contentsOf: repeatElement(0, count: BatchHeader.size))
        var storedCodec = codec
        var storedLength = scratch.count
        if codec == .lz4 {
            storedLength = try scratch.withBytes { (raw) throws(LogError) -> Int in
                do throws(CompressionError) {
                    return try LZ4Block.compress(raw, appendingTo: &output)
                } catch {
                    throw LogError(error)
                }
            }
            // Incompressible data is stored as is: never pay more bytes for compression.
            if storedLength >= scratch.count {
                output.removeLast(storedLength)
                storedCodec = .none
                storedLength = scratch.count
                output.append(contentsOf: scratch)
            }
        } else {
            output.append(contentsOf: scratch)
        }
        let payloadChecksum = output.withUnsafeBytes {
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[(headerStart + BatchHeader.size)...]))
        }
        let header = BatchHeader(
            codec: storedCodec, firstPosition: firstPosition, recordCount: recordCount, sparsePositionCount: sparsePositionCount,
            storedLength: UInt32(storedLength), uncompressedLength: UInt32(scratch.count),
            payloadChecksum: payloadChecksum, minTimestamp: minTimestamp, maxTimestamp: maxTimestamp)
        var headerBytes: [UInt8] = []
        header.encode(into: &headerBytes)
        output.replaceSubrange(headerStart..<(headerStart + BatchHeader.size), with: headerBytes)
        return header
    }

    /// Decompresses (when needed) and walks a verified stored payload, calling `body` per record.
    ///
    /// - Returns: `false` if `body` asked to stop.
    /// - Throws: A ``LogError`` with code ``LogError/Code/corruption`` (without location; the
    ///   caller adds it) when the framing does not match the header, or whatever `body` throws.
    static func forEachRecord(
        in stored: UnsafeRawBufferPointer, header: BatchHeader, scratch: inout [UInt8],
        from start: LogPosition = 0, through end: LogPosition = .max,
        _ body: (LogRecordView) throws -> Bool
    ) throws -> Bool {
        if header.codec == .lz4 {
            let length = Int(header.uncompressedLength)
            if scratch.count < length { scratch = [UInt8](repeating: 0, count: length) }
            try scratch.withUnsafeMutableBytes { out in
                do throws(CompressionError) {
                    try LZ4Block.decompress(stored, into: UnsafeMutableRawBufferPointer(rebasing: out[0..<length]))
                } catch {
                    throw LogError(error)
                }
            }
            return try scratch.withUnsafeBytes { raw in
                try walk(UnsafeRawBufferPointer(rebasing: raw[0..<length]), header: header, from: start, through: end, body)
            }
        }
        return try walk(stored, header: header, from: start, through: end, body)
    }

    private static func walk(
        _ payload: UnsafeRawBufferPointer, header: BatchHeader, from start: LogPosition, through end: LogPosition,
        _ body: (LogRecordView) throws -> Bool
    ) throws -> Bool {
        var cursor = ByteCursor(payload)
        var position = header.firstPosition
        let covered = header.endPosition
        for index in 0..<Int(header.recordCount) {
            if header.isSparse {
                guard let gap = cursor.readVarint(), gap < covered - position else {
                    throw LogError(.corruption, "record \(index) of \(header.recordCount) in sparse batch is malformed or lies past its \(header.positionCount) positions", position: position)
                }
                position += gap
            }
            guard let delta = cursor.readVarint(), let length = cursor.readVarint(),
                  length <= UInt64(payload.count), let bytes = cursor.readBytes(Int(length)) else {
                throw LogError(.corruption, "record \(index) of \(header.recordCount) in batch is truncated or malformed", position: position)
            }
            let timestamp = LogTimestamp(nanosecondsSince1970: Int64(bitPattern: UInt64(bitPattern: header.minTimestamp) &+ delta))
            if position > end { return false }
            if position >= start {
                guard try body(LogRecordView(position: position, timestamp: timestamp, payload: bytes)) else { return false }
            }
            position += 1
        }
        guard cursor.isAtEnd else {
            throw LogError(.corruption, "batch payload has \(payload.count - cursor.offset) bytes after its \(header.recordCount) records", position: header.firstPosition)
        }
        return true
    }
}
