@testable import EventLog
import Foundation
import Testing
import EventKernelTestSupport

@Suite("The batch format")
struct ChecksumAndFormatTests {
    @Test("a batch round-trips through encode and decode, compressed and not", arguments: CompressionCodec.allCases)
    func batchRoundTrip(codec: CompressionCodec) throws {
        let entries = (0..<100).map { entry($0, size: $0 % 3 == 0 ? 300 : 10, at: 1_000_000 - Int64($0)) }
        var output: [UInt8] = [], scratch: [UInt8] = []
        let header = try BatchPayload.encodeBatch(entries, firstPosition: 42, codec: codec, into: &output, scratch: &scratch)
        #expect(output.count == header.batchLength)
        #expect(header.minTimestamp == 1_000_000 - 99)
        #expect(header.maxTimestamp == 1_000_000)
        if codec == .lz4 { #expect(header.storedLength < header.uncompressedLength) }
        let decoded = try output.withUnsafeBytes { try BatchHeader.decode($0).get() }
        #expect(decoded == header)
        var seen: [LogRecord] = []
        var decodeScratch: [UInt8] = []
        _ = try output.withUnsafeBytes { raw in
            try BatchPayload.forEachRecord(in: UnsafeRawBufferPointer(rebasing: raw[BatchHeader.size...]), header: header, scratch: &decodeScratch) {
                seen.append($0.copy()); return true
            }
        }
        #expect(seen.map(\.payload) == entries.map(\.payload))
        #expect(seen.map(\.timestamp) == entries.map(\.timestamp))
        #expect(seen.map(\.position) == Array(42..<142))
    }

    @Test("every single-bit flip in a batch header is detected")
    func headerBitFlips() throws {
        var output: [UInt8] = [], scratch: [UInt8] = []
        _ = try BatchPayload.encodeBatch([entry(1)], firstPosition: 0, codec: .lz4, into: &output, scratch: &scratch)
        for byte in 0..<BatchHeader.size {
            for bit in 0..<8 {
                var damaged = output
                damaged[byte] ^= UInt8(1 << bit)
                let result = damaged.withUnsafeBytes { BatchHeader.decode($0) }
                guard case .failure = result else {
                    Issue.record("flip of bit \(bit) in header byte \(byte) went unnoticed")
                    return
                }
            }
        }
    }

    @Test("incompressible payloads are stored uncompressed")
    func incompressible() throws {
        var generator = SystemRandomNumberGenerator()
        let payload = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }
        var output: [UInt8] = [], scratch: [UInt8] = []
        let header = try BatchPayload.encodeBatch([LogEntry(timestamp: .init(nanosecondsSince1970: 0), payload: payload)],
                                                  firstPosition: 0, codec: .lz4, into: &output, scratch: &scratch)
        #expect(header.codec == .none)
        #expect(header.storedLength == header.uncompressedLength)
    }

    @Test("segment names sort by position and parse back")
    func segmentNames() {
        #expect(SegmentName.segment(0) == "00000000000000000000.log")
        #expect(SegmentName.segment(1234) == "00000000000000001234.log")
        #expect(SegmentName.basePosition(ofSegmentNamed: "00000000000000001234.log") == 1234)
        #expect(SegmentName.basePosition(ofSegmentNamed: "1234.log") == nil)
        #expect(SegmentName.basePosition(ofSegmentNamed: "00000000000000001234.idx") == nil)
        #expect(SegmentName.segment(UInt64.max).count == 24)
    }

    @Test("timestamps out of range are refused")
    func timestampRange() throws {
        #expect(throws: LogError.self) { try LogTimestamp(Date(timeIntervalSince1970: 1e12)) }
        #expect(throws: LogError.self) { try LogTimestamp(Date(timeIntervalSince1970: .nan)) }
        let date = Date(timeIntervalSince1970: 1_700_000_000.123)
        #expect(abs(try LogTimestamp(date).date.timeIntervalSince(date)) < 1e-6)
    }
}
