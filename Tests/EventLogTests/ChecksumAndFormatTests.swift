@testable import EventLog
import Foundation
import Testing
import EventKernelTestSupport

@Suite("CRC32C and the batch format")
struct ChecksumAndFormatTests {
    @Test("CRC32C matches the standard check value")
    func checkValue() {
        #expect(CRC32C.checksum("123456789") == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8]()) == 0)
        // 32 bytes of zeros and of 0xFF: test vectors from RFC 3720 (iSCSI), B.4.
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum(Array(0..<32 as Range<UInt8>)) == 0x46DD_794E)
    }

    @Test("CRC32C continues across pieces")
    func incremental() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let whole = CRC32C.checksum(bytes)
        for split in [0, 1, 7, 8, 9, 500, 999, 1000] {
            let first = bytes[..<split].withUnsafeBytes { CRC32C.checksum($0) }
            let both = bytes[split...].withUnsafeBytes { CRC32C.checksum($0, continuing: first) }
            #expect(both == whole, "split at \(split)")
        }
    }

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

    @Test("LZ4 rejects malformed input with a typed error")
    func lz4Malformed() {
        var out = [UInt8](repeating: 0, count: 100)
        let garbage: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3]
        #expect(throws: LogError.self) {
            try garbage.withUnsafeBytes { src in
                try out.withUnsafeMutableBytes { dst in try LZ4Block.decompress(src, into: dst) }
            }
        }
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
