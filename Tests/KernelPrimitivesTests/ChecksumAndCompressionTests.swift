import CCRC32C
import EventKernelTestSupport
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

    @Test("CRC32C of two pieces combines from each piece's checksum and the second's length")
    func combine() {
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 7, 8, 64, 4_095, 12_288, 100_003] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let whole = CRC32C.checksum(bytes)
            for split in Set([0, length / 3, length / 2, max(0, length - 1), length]) {
                let first = CRC32C.checksum(bytes[..<split])
                let second = CRC32C.checksum(bytes[split...])
                #expect(CRC32C.combine(first, second, secondCount: length - split) == whole, "\(length) split at \(split)")
            }
        }
        // Many pieces, as a backup combines a segment's batches: header, payload, header, ...
        let bytes = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        var combined = CRC32C.checksum(bytes[..<32])
        var at = 32
        for piece in [1, 900, 3, 12_288, 0, 20_000] {
            combined = CRC32C.combine(combined, CRC32C.checksum(bytes[at..<(at + piece)]), secondCount: piece)
            at += piece
        }
        #expect(combined == CRC32C.checksum(bytes[..<at]))
        #expect(CRC32C.combine(0x1234_5678, 0, secondCount: 0) == 0x1234_5678, "an empty second piece changes nothing")
    }

    /// The processor's instruction (three streams over 12 KiB blocks, combined) and the tables
    /// give the same checksum at every length around the block's edges, at every alignment,
    /// and in pieces; the large values are from a bitwise implementation in Python
    /// (`crc32c(bytes((i*7+3)&0xff for i in range(n)))`), independent of both.
    @Test("CRC32C: the processor's instruction and the tables agree at every block edge, alignment and split")
    func hardwareAndTablesAgree() {
        let bytes = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let expected: [Int: UInt32] = [12_287: 0x5A9F_4031, 12_288: 0x2E82_A606, 12_289: 0x67A2_C5EB, 24_581: 0x1D63_2D94, 40_000: 0x3C95_7EE1]
        bytes.withUnsafeBytes { all in
            for (count, value) in expected {
                let prefix = UnsafeRawBufferPointer(rebasing: all[..<count])
                #expect(CRC32C.checksum(prefix) == value, "\(count) bytes")
                #expect(CRC32C.softwareChecksum(prefix) == value, "\(count) bytes, tables")
            }
            // The instruction itself, called directly (whatever EVENTKERNEL_CRC32C says), where
            // the processor has it; the tables otherwise.
            func instruction(_ bytes: UnsafeRawBufferPointer, _ crc: UInt32) -> UInt32 {
                guard eventkernel_crc32c_hardware_available() != 0, let base = bytes.baseAddress else {
                    return CRC32C.softwareChecksum(bytes, continuing: crc)
                }
                return ~eventkernel_crc32c_hardware_update(~crc, base, bytes.count)
            }
            for (count, value) in expected {
                #expect(instruction(UnsafeRawBufferPointer(rebasing: all[..<count]), 0) == value, "\(count) bytes, the instruction")
            }
            var generator = SystemRandomNumberGenerator()
            let seed = generator.next() as UInt64
            var random = SplitMix64(seed: seed)
            var lengths = Array(0...80) + [4095, 4096, 4097, 12_280, 36_864, 36_871]
            lengths += (0..<40).map { _ in Int(random.next() % 39_001) }
            for count in lengths {
                for offset in [0, 1, 3, 7] where offset + count <= all.count {
                    let slice = UnsafeRawBufferPointer(rebasing: all[offset..<(offset + count)])
                    let start = UInt32(truncatingIfNeeded: random.next())
                    let tables = CRC32C.softwareChecksum(slice, continuing: start)
                    #expect(CRC32C.checksum(slice, continuing: start) == tables, "\(count) bytes at \(offset) from \(start) (seed \(seed))")
                    #expect(instruction(slice, start) == tables, "\(count) bytes at \(offset) from \(start), the instruction (seed \(seed))")
                }
            }
            for split in [0, 5, 12_288, 12_300, 24_576, 39_999] {
                let first = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: all[..<split]))
                #expect(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: all[split...]), continuing: first) == 0x3C95_7EE1, "split at \(split)")
            }
        }
    }

    @Test("SHA-256 matches FIPS 180-4 and Python's hashlib at every padding boundary")
    func sha256() {
        func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
        // FIPS 180-4 examples (one block, two blocks).
        #expect(hex(SHA256.digest(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hex(SHA256.digest(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // `hashlib.sha256(bytes((i*7+3)&0xff for i in range(n))).hexdigest()`: lengths on each
        // side of the padding's edges (55/56 bytes: the length still fits the block or not).
        let expected: [Int: String] = [
            0: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            1: "084fed08b978af4d7d196a7446a86b58009e636b611db16211b65a9aadff29c5",
            55: "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b",
            56: "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27",
            63: "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055",
            64: "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241",
            65: "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e",
            119: "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e",
            120: "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5",
            1000: "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371",
        ]
        for (length, digest) in expected {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) }
            #expect(hex(SHA256.digest(bytes)) == digest, "\(length) bytes")
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

    @Test("LZ4 into an array of its own: the same bytes as appending, of random and empty inputs")
    func lz4Compressed() throws {
        var state: UInt64 = 0x5EED
        for count in [0, 1, 17, 4_096, 300_000] {
            let original = (0..<count).map { i -> UInt8 in
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return i % 3 == 0 ? UInt8(truncatingIfNeeded: state >> 56) : UInt8(i % 7)
            }
            let compressed = try original.withUnsafeBytes { (raw) throws(CompressionError) in try LZ4Block.compressed(raw) }
            var appended: [UInt8] = []
            _ = try original.withUnsafeBytes { (raw) throws(CompressionError) in try LZ4Block.compress(raw, appendingTo: &appended) }
            #expect(compressed == appended, "\(count) bytes")
            #expect(compressed.isEmpty == original.isEmpty)
            var restored = [UInt8](repeating: 0, count: original.count)
            try compressed.withUnsafeBytes { src in
                try restored.withUnsafeMutableBytes { dst in try LZ4Block.decompress(src, into: dst) }
            }
            #expect(restored == original)
        }
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
