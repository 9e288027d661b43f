#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KernelPrimitives

/// What a walk over one segment file found.
struct SegmentScan: Sendable {
    var basePosition: LogPosition
    var batches: [BatchLocation] = []
    /// One past the last record of the last valid batch.
    var nextPosition: LogPosition
    /// End offset of the last valid batch: where the next batch goes.
    var dataEnd: Int64 = Int64(SegmentHeader.size)
    var fileSize: Int64
    /// Totals, for verification and inspection.
    var storedPayloadBytes: Int64 = 0
    var uncompressedPayloadBytes: Int64 = 0
    var records: UInt64 = 0
    var minTimestamp: Int64?
    var maxTimestamp: Int64?
    /// How the walk ended.
    var end: End = .clean

    enum End: Sendable {
        /// End of file, or only never-written (zero) space after the last batch.
        case clean
        /// An invalid batch at `offset` and nothing valid after it: a torn write at the tail.
        case tornTail(LogError)
        /// An invalid batch at `offset` followed by a valid one: damage, never to be skipped.
        case damage(LogError)

        var isClean: Bool { if case .clean = self { true } else { false } }
    }
}

/// Walks a segment file batch by batch, validating every header and payload checksum.
///
/// Used by recovery on open (the active segment, and sealed segments whose index is missing),
/// by ``SegmentedLog/verify(at:acknowledgedElsewhere:decodingRecords:)`` and by ``SegmentedLog/repair(at:)``. Reads in large
/// windows, so a segment of single-record batches costs a few `pread`s, not one per batch.
struct SegmentScanner {
    let file: OpenFile
    let basePosition: LogPosition
    /// Also decompress each batch and check its record framing (verification walks do).
    var decodeRecords = false
    /// A writer may be appending while this scan reads (read-only opens, verify). Then an
    /// invalid batch may be one still being copied in: the scan re-reads before judging, so a
    /// write in progress is never mistaken for damage.
    var concurrentWriterPossible = false
    private static let rereadAttempts = 5
    /// Where to resume: batches already known valid (from a checkpoint) and the offset and
    /// position after them. The walk then checks only what follows.
    var resume: (batches: [BatchLocation], offset: Int64, position: LogPosition)?

    private static let windowSize = 4 << 20

    func scan() throws(LogError) -> SegmentScan {
        var fileSize = try file.size()
        var result = SegmentScan(basePosition: basePosition, nextPosition: basePosition, fileSize: fileSize)
        try Segment.checkHeader(of: file, base: basePosition)

        var window = FileWindow(file: file, fileSize: fileSize)
        var offset = Int64(SegmentHeader.size)
        var expected = basePosition
        if let resume {
            result.batches = resume.batches
            for batch in resume.batches {
                // A checkpoint lists an active segment's batches, which only appends write:
                // never sparse ones (a rewrite touches sealed segments only, and sealing a
                // segment starts the next one): a position is a record.
                result.records += UInt64(batch.positionCount)
                result.minTimestamp = min(result.minTimestamp ?? batch.minTimestamp, batch.minTimestamp)
                result.maxTimestamp = max(result.maxTimestamp ?? batch.maxTimestamp, batch.maxTimestamp)
            }
            offset = resume.offset
            expected = resume.position
            result.nextPosition = expected
            result.dataEnd = offset
        }
        var decodeScratch: [UInt8] = []
        var rereads = 0
        while offset < fileSize {
            let failure: String
            if fileSize - offset < Int64(BatchHeader.size) {
                failure = "batch header truncated by end of file (\(fileSize - offset) of \(BatchHeader.size) bytes)"
            } else {
                let decoded: Result<BatchHeader, BatchHeader.DecodeFailure>
                do {
                    decoded = try window.withBytes(at: offset, count: BatchHeader.size) { BatchHeader.decode($0) }
                } catch where concurrentWriterPossible && (try? file.size()).map({ $0 < fileSize }) == true {
                    // A closing writer trimmed its preallocated space under us: what it holds
                    // is still there; scan again against the new size.
                    fileSize = try file.size()
                    result.fileSize = fileSize
                    window = FileWindow(file: file, fileSize: fileSize)
                    continue
                }
                switch decoded {
                case .failure(let why):
                    failure = why.message
                case .success(let header):
                    if header.firstPosition != expected {
                        failure = "batch starts at position \(header.firstPosition), expected \(expected)"
                    } else if offset + Int64(header.batchLength) > fileSize {
                        failure = "batch of \(header.batchLength) bytes runs past end of file (\(fileSize))"
                    } else if let problem = try check(header, at: offset, window: &window, scratch: &decodeScratch) {
                        failure = problem
                    } else {
                        result.batches.append(BatchLocation(
                            firstPosition: header.firstPosition, positionCount: header.positionCount,
                            batchLength: UInt32(header.batchLength), offset: offset,
                            minTimestamp: header.minTimestamp, maxTimestamp: header.maxTimestamp))
                        result.storedPayloadBytes += Int64(header.storedLength)
                        result.uncompressedPayloadBytes += Int64(header.uncompressedLength)
                        result.records += UInt64(header.recordCount)
                        result.minTimestamp = min(result.minTimestamp ?? header.minTimestamp, header.minTimestamp)
                        result.maxTimestamp = max(result.maxTimestamp ?? header.maxTimestamp, header.maxTimestamp)
                        offset += Int64(header.batchLength)
                        expected = header.endPosition
                        result.nextPosition = expected
                        result.dataEnd = offset
                        rereads = 0
                        continue
                    }
                }
            }
            if concurrentWriterPossible && rereads < Self.rereadAttempts {
                rereads += 1
                if rereads > 1 { usleep(1_000) }
                fileSize = try file.size()
                result.fileSize = fileSize
                window = FileWindow(file: file, fileSize: fileSize)
                continue
            }
            result.end = try classify(failure, at: offset, expected: expected, fileSize: fileSize)
            return result
        }
        return result
    }

    /// Checks a batch's payload checksum (and, when asked, its records); returns the problem.
    private func check(_ header: BatchHeader, at offset: Int64, window: inout FileWindow, scratch: inout [UInt8]) throws(LogError) -> String? {
        let payloadOffset = offset + Int64(BatchHeader.size)
        let decodeRecords = self.decodeRecords
        return try window.withBytes(at: payloadOffset, count: Int(header.storedLength)) { payload -> String? in
            let crc = CRC32C.checksum(payload)
            guard crc == header.payloadChecksum else {
                return "payload checksum mismatch: stored 0x\(String(header.payloadChecksum, radix: 16)), computed 0x\(String(crc, radix: 16))"
            }
            guard decodeRecords else { return nil }
            do {
                _ = try BatchPayload.forEachRecord(in: payload, header: header, scratch: &scratch) { _ in true }
                return nil
            } catch let error as LogError {
                return error.message
            } catch {
                return "\(error)"
            }
        }
    }

    /// Decides whether an invalid batch is the torn end of the log or damage inside it.
    ///
    /// Only the last write can be torn: every earlier one was complete before it was
    /// acknowledged. So an invalid batch followed by nothing but zeros, or by bytes containing
    /// no valid batch header, is a torn tail; one followed by a valid batch header is damage.
    /// Zeros alone are the preallocated, never-written end of the segment.
    private func classify(_ failure: String, at offset: Int64, expected: LogPosition, fileSize: Int64) throws(LogError) -> SegmentScan.End {
        let rest = try file.read(fromAbsoluteOffset: offset, count: Int(fileSize - offset))
        let allZero = rest.withUnsafeBytes { $0.isAllZero() }
        if allZero { return .clean }
        if concurrentWriterPossible, rest.count >= BatchHeader.size,
           case .success(let header) = rest.withUnsafeBytes({ BatchHeader.decode(UnsafeRawBufferPointer(rebasing: $0[0..<BatchHeader.size])) }),
           header.firstPosition == expected, header.batchLength <= rest.count,
           rest.withUnsafeBytes({ CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[BatchHeader.size..<header.batchLength])) }) == header.payloadChecksum {
            // A whole, valid batch is here now: the writer appended it since the walk read this
            // offset. What was walked is a consistent prefix, and this is where it ends (a
            // later look sees the rest). Damage never passes both checksums.
            return .clean
        }
        let error = LogError(.corruption, failure, file: file.path, offset: offset, position: expected)
        if let later = rest.withUnsafeBytes({ Self.findValidHeader(in: $0, from: 1, atOrAfter: expected) }) {
            var damage = error
            damage.message += "; a valid batch follows at offset \(offset + Int64(later)), so this is damage, not a torn write"
            return .damage(damage)
        }
        return .tornTail(error)
    }

    /// The offset of the first valid batch header at or after `start` whose position is at
    /// least `position`, searching for the magic with `memmem`.
    static func findValidHeader(in bytes: UnsafeRawBufferPointer, from start: Int, atOrAfter position: LogPosition) -> Int? {
        guard let base = bytes.baseAddress else { return nil }
        let firstMagicByte = Int32(BatchHeader.magic & 0xFF)
        var from = start
        while from + BatchHeader.size <= bytes.count {
            // memchr finds candidates at memory speed; most of a damaged segment's tail is zeros.
            guard let hit = memchr(base + from, firstMagicByte, bytes.count - from) else { return nil }
            let at = base.distance(to: UnsafeRawPointer(hit))
            if at + BatchHeader.size <= bytes.count,
               bytes.loadLittleEndian(at: at, as: UInt32.self) == BatchHeader.magic,
               case .success(let header) = BatchHeader.decode(UnsafeRawBufferPointer(rebasing: bytes[at..<(at + BatchHeader.size)])),
               header.firstPosition >= position {
                return at
            }
            from = at + 1
        }
        return nil
    }
}

/// A sliding read window over a file, so a scan issues few large reads.
struct FileWindow {
    let file: OpenFile
    let fileSize: Int64
    private var buffer: [UInt8] = []
    private var bufferOffset: Int64 = 0
    private static let chunk = 4 << 20

    init(file: OpenFile, fileSize: Int64) {
        self.file = file
        self.fileSize = fileSize
    }

    /// Calls `body` with `count` bytes at `offset`, which must lie inside the file.
    mutating func withBytes<R>(at offset: Int64, count: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws(LogError) -> R {
        if offset < bufferOffset || offset + Int64(count) > bufferOffset + Int64(buffer.count) {
            let length = Int(min(fileSize - offset, Int64(max(count, Self.chunk))))
            buffer = try file.read(fromAbsoluteOffset: offset, count: length)
            bufferOffset = offset
            guard buffer.count >= count else {
                throw LogError(.io, "file shrank while being read (wanted \(count) bytes, got \(buffer.count))", file: file.path, offset: offset)
            }
        }
        let start = Int(offset - bufferOffset)
        do {
            return try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[start..<(start + count)])) }
        } catch let error as LogError {
            throw error
        } catch {
            throw LogError(.io, "\(error)", file: file.path, offset: offset)
        }
    }
}
