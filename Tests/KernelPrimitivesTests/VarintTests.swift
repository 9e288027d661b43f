import KernelPrimitives
import Testing

@Suite("Varints and zigzag")
struct VarintTests {
    /// The smallest and largest value of each encoded length, 1 to 10 bytes, and the values
    /// either side of each boundary.
    static let boundaries: [UInt64] = {
        var values: [UInt64] = [0, 1, UInt64.max, UInt64.max - 1, 1 << 63]
        for bits in stride(from: 7, through: 63, by: 7) {
            values += [(1 << UInt64(bits)) - 1, 1 << UInt64(bits), (1 << UInt64(bits)) + 1]
        }
        return values
    }()

    @Test("values round-trip at every length, in the bytes the formats expect")
    func roundTrip() throws {
        for value in Self.boundaries {
            var bytes: [UInt8] = [0xAA]  // decoding starts past whatever came before
            Varint.encode(value, into: &bytes)
            let length = bytes.count - 1
            #expect(length == Varint.encodedLength(of: value), "\(value)")
            #expect(length == max(1, (64 - value.leadingZeroBitCount + 6) / 7), "\(value)")
            // Every byte but the last has the continuation bit.
            #expect(bytes.dropFirst().dropLast().allSatisfy { $0 & 0x80 != 0 } && bytes.last! & 0x80 == 0, "\(value)")
            var offset = 1
            #expect(try Varint.decode(bytes, at: &offset) == value)
            #expect(offset == bytes.count)
            // The same through a raw buffer, as the log's framing reads it.
            offset = 1
            let raw = try bytes.withUnsafeBytes { buffer throws(Varint.Failure) in try Varint.decode(buffer, at: &offset) }
            #expect(raw == value)
        }
        var known: [UInt8] = []
        Varint.encode(300, into: &known)
        #expect(known == [0xAC, 0x02])
        known = []
        Varint.encode(.max, into: &known)
        #expect(known == [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
    }

    @Test("a varint cut short at any length is truncated, and the offset is the end")
    func truncation() {
        for value in Self.boundaries {
            var bytes: [UInt8] = []
            Varint.encode(value, into: &bytes)
            for cut in 0..<bytes.count {
                let prefix = Array(bytes[..<cut])
                var offset = 0
                #expect(throws: Varint.Failure.truncated) { try Varint.decode(prefix, at: &offset) }
                #expect(offset == cut)
            }
        }
    }

    @Test("past 64 bits or 10 bytes is an overflow at the offending byte, never a wrapped value")
    func overflow() throws {
        // The tenth byte may only be 0 or 1.
        for tenth: UInt8 in [0x02, 0x7F, 0x80, 0x81, 0xFF] {
            let bytes = [UInt8](repeating: 0xFF, count: 9) + [tenth, 0x00]
            var offset = 0
            #expect(throws: Varint.Failure.overflow, "tenth byte \(tenth)") { try Varint.decode(bytes, at: &offset) }
            #expect(offset == 10)
        }
        // An eleven-byte zero (non-minimal but in range up to ten bytes) is refused at byte 10.
        let long = [UInt8](repeating: 0x80, count: 10) + [0x00]
        var offset = 0
        #expect(throws: Varint.Failure.overflow) { try Varint.decode(long, at: &offset) }
        #expect(offset == 10)
        // Non-minimal encodings within ten bytes decode, as they always did.
        for length in 1...10 {
            let padded = [UInt8](repeating: 0x80, count: length - 1) + [0x00]
            offset = 0
            #expect(try Varint.decode(padded, at: &offset) == 0)
        }
    }

    @Test("zigzag maps small magnitudes to small values and round-trips the extremes")
    func zigzag() {
        #expect(ZigZag.encode(0) == 0)
        #expect(ZigZag.encode(-1) == 1)
        #expect(ZigZag.encode(1) == 2)
        #expect(ZigZag.encode(-2) == 3)
        #expect(ZigZag.encode(.max) == UInt64.max - 1)
        #expect(ZigZag.encode(.min) == UInt64.max)
        for value: Int64 in [0, 1, -1, 63, -64, 64, -65, .max, .min, .max - 1, .min + 1] {
            #expect(ZigZag.decode(ZigZag.encode(value)) == value)
        }
        for raw: UInt64 in [0, 1, 2, .max, .max - 1] {
            #expect(ZigZag.encode(ZigZag.decode(raw)) == raw)
        }
    }

    @Test("the reader reports a bad varint with the formats' offsets")
    func readerErrors() throws {
        var truncated = BinaryReader([0x05, 0x80, 0x80])
        #expect(try truncated.readVarint() == 5)
        #expect(throws: BinaryDecodingError(.truncated(needed: 1), at: 3)) { try truncated.readVarint() }
        var overflowing = BinaryReader([0x01] + [UInt8](repeating: 0xFF, count: 10))
        #expect(try overflowing.readVarint() == 1)
        #expect(throws: BinaryDecodingError(.malformedVarint, at: 1)) { try overflowing.readVarint() }
        var cursor = [UInt8]([0xFF]).withUnsafeBytes { raw in
            var cursor = ByteCursor(raw)
            return cursor.readVarint()
        }
        #expect(cursor == nil)
        cursor = [UInt8]([0xAC, 0x02]).withUnsafeBytes { raw in
            var cursor = ByteCursor(raw)
            return cursor.readVarint()
        }
        #expect(cursor == 300)
    }

    @Test("little-endian integers are written and read least significant byte first")
    func littleEndian() throws {
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(UInt32(0x0403_0201))
        bytes.appendLittleEndian(Int16(-2))
        bytes.appendLittleEndian(UInt64(0x0807_0605_0403_0201))
        #expect(bytes == [1, 2, 3, 4, 0xFE, 0xFF, 1, 2, 3, 4, 5, 6, 7, 8])
        bytes.withUnsafeBytes { raw in
            #expect(raw.loadLittleEndian(at: 0, as: UInt32.self) == 0x0403_0201)
            #expect(raw.loadLittleEndian(at: 4, as: Int16.self) == -2)
            // Unaligned.
            #expect(raw.loadLittleEndian(at: 6, as: UInt64.self) == 0x0807_0605_0403_0201)
        }
        var writer = BinaryWriter()
        writer.writeFixed(UInt32(0x0403_0201))
        #expect(writer.bytes == [1, 2, 3, 4])
        var reader = BinaryReader(writer.bytes)
        #expect(try reader.readFixed(UInt32.self) == 0x0403_0201)
    }
}
