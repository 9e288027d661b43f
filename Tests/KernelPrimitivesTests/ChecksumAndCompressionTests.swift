import KernelPrimitives
import Testing

@Suite("CRC32C and LZ4 blocks")
struct ChecksumAndCompressionTests {
    @Test("CRC32C matches the standard check value")
    func checkValue() {
        #expect(CRC32C.checksum("123456789") == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8]()) == 0)
        // 32 bytes of zeros and of 0xFF: test vectors from RFC 3720 (iSCSI), B.4.
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum(Array(0..<32 as Range<UInt8>)) == 0x46DD_794E)
        #expect(CRC32C.checksum(Array((0..<32 as Range<UInt8>).reversed())) == 0x113F_DB5C)
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

    @Test("FNV-1a 64 matches the published test vectors and continues across pieces")
    func fnv1a64() {
        // From the FNV reference test suite (Fowler, Noll, Vo: fnv_test.c, FNV-1a 64).
        #expect(FNV1a64.hash([UInt8]()) == 0xcbf2_9ce4_8422_2325)
        #expect(FNV1a64.hash("a".utf8) == 0xaf63_dc4c_8601_ec8c)
        #expect(FNV1a64.hash("foobar".utf8) == 0x8594_4171_f739_67e8)
        var pieces = FNV1a64()
        pieces.add("foo".utf8)
        for byte in "bar".utf8 { pieces.add(byte) }
        #expect(pieces.value == FNV1a64.hash("foobar".utf8))
    }

    @Test("LZ4 round-trips a block, appending after what the buffer held")
    func lz4RoundTrip() throws {
        let original = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
        var compressed: [UInt8] = [9, 9]
        let written = try original.withUnsafeBytes { (raw) throws(CompressionError) in
            try LZ4Block.compress(raw, appendingTo: &compressed)
        }
        #expect(compressed.count == written + 2)
        #expect(compressed.prefix(2) == [9, 9])
        #expect(written < original.count)
        var restored = [UInt8](repeating: 0, count: original.count)
        try compressed.dropFirst(2).withUnsafeBytes { src in
            try restored.withUnsafeMutableBytes { dst in try LZ4Block.decompress(src, into: dst) }
        }
        #expect(restored == original)
    }

    @Test("LZ4 rejects malformed input and a wrong length with a typed error")
    func lz4Malformed() throws {
        var out = [UInt8](repeating: 0, count: 100)
        let garbage: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3]
        let error = #expect(throws: CompressionError.self) {
            try garbage.withUnsafeBytes { src in
                try out.withUnsafeMutableBytes { dst in try LZ4Block.decompress(src, into: dst) }
            }
        }
        #expect(error?.kind == .failed)
        // Valid data, but the caller expects one byte more than it holds.
        var compressed: [UInt8] = []
        let original = [UInt8](repeating: 7, count: 64)
        _ = try original.withUnsafeBytes { (raw) throws(CompressionError) in try LZ4Block.compress(raw, appendingTo: &compressed) }
        var tooLong = [UInt8](repeating: 0, count: 65)
        #expect(throws: CompressionError.self) {
            try compressed.withUnsafeBytes { src in
                try tooLong.withUnsafeMutableBytes { dst in try LZ4Block.decompress(src, into: dst) }
            }
        }
    }
}
