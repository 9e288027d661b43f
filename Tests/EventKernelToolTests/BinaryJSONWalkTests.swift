import Foundation
import Testing
import EventKernel
import EventKernelTestSupport
@testable import EventKernelTool

/// Export writes a binary entity payload as it walks it (`EntityJSON.appendBinary`), where
/// history and the viewer decode a tree, render it and check the form by encoding the tree
/// again (`EntityJSON.payload`). The two must agree on every payload: the same JSON, byte for
/// byte, and the same verdict (binary, or bytes with a reason), for payloads the encoder wrote
/// and for those bytes damaged or respelled.
@Suite struct BinaryJSONWalkTests {
    /// A random tree of every kind of value the format holds, the awkward ones included
    /// (non-finite and NaN-payload numbers, dates no ISO text names exactly, one-key objects
    /// whose key starts with `$`, control characters and quotes in strings, empty containers).
    static func randomValue(_ rng: inout SplitMix64, depth: Int = 0) -> BinaryEntityValue {
        let kinds: UInt64 = depth > 3 ? 13 : 15
        switch rng.next() % kinds {
        case 0: return .null
        case 1: return .bool(rng.next() & 1 == 0)
        case 2: return .int([0, -1, 1, Int64.min, Int64.max, Int64(bitPattern: rng.next()), Int64(rng.next() % 300) - 150][Int(rng.next() % 7)])
        case 3: return .uint([0, UInt64.max, rng.next(), rng.next() % 200][Int(rng.next() % 4)])
        case 4:
            let doubles: [Double] = [0, -0.0, 1, 0.1, 1e300, -2.5e-300, .infinity, -.infinity, .nan,
                                     Double(bitPattern: 0x7FF8_0000_0000_0001), Double(bitPattern: rng.next()), Double(Int64(rng.next() % 1000))]
            return .double(doubles[Int(rng.next() % UInt64(doubles.count))])
        case 5:
            let floats: [Float] = [0, 1.5, -3.25, .infinity, .nan, Float(bitPattern: 0x7FC0_0001), Float(bitPattern: UInt32(truncatingIfNeeded: rng.next())), 16_777_216]
            return .float(floats[Int(rng.next() % UInt64(floats.count))])
        case 6: return .string(randomText(&rng))
        case 7: return .uuid(UUID(uuid: withUnsafeBytes(of: (rng.next(), rng.next())) { $0.load(as: uuid_t.self) }))
        case 8:
            let seconds: [Double] = [0, 0.5, 1e-7, 7.25e8, Double(rng.next() % 2_000_000_000) + Double(rng.next() % 1000) / 1000,
                                     -6.3e10, 1e16, .infinity, .nan, Double(bitPattern: rng.next())]
            return .date(Date(timeIntervalSinceReferenceDate: seconds[Int(rng.next() % UInt64(seconds.count))]))
        case 9: return .data((0..<Int(rng.next() % 9)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
        case 10:
            let decimals: [Decimal] = [0, 12.5, -0.01, .nan, Decimal(string: "123456789012345678901234567890.5")!, Decimal(Int64(bitPattern: rng.next() % 100_000)) / 100]
            return .decimal(decimals[Int(rng.next() % UInt64(decimals.count))])
        case 11: return .url(["https://example.com/a?b=c", "file:///tmp/x", "mailto:a@b.c"][Int(rng.next() % 3)])
        case 12: return .string(["", "$", "plain"][Int(rng.next() % 3)])
        case 13:
            let count = Int(rng.next() % 4)
            var keys: [String] = []
            while keys.count < count {
                let key = rng.next() % 3 == 0 ? "$" + randomText(&rng) : randomText(&rng)
                if !keys.contains(key) { keys.append(key) }
            }
            return .keyed(keys.map { (key: $0, value: randomValue(&rng, depth: depth + 1)) })
        default:
            return .unkeyed((0..<Int(rng.next() % 4)).map { _ in randomValue(&rng, depth: depth + 1) })
        }
    }

    static func randomText(_ rng: inout SplitMix64) -> String {
        let pieces = ["a", "id", "é", "\"", "\\", "\n", "\u{01}", "日本", "🙂", " ", "$k", "name"]
        return (0..<Int(rng.next() % 4)).map { _ in pieces[Int(rng.next() % UInt64(pieces.count))] }.joined()
    }

    /// What the tree path shows, and what the walk writes, for `bytes`.
    static func bothRenderings(_ bytes: [UInt8]) -> (tree: String?, walked: String?, reason: String?) {
        var buffer = JSONBuffer()
        buffer.appendRaw("[")  // a line's earlier bytes, which a withdrawn walk must leave alone
        let walked = EntityJSON.appendBinary(bytes, to: &buffer)
        let text = buffer.text
        switch EntityJSON.payload(bytes) {
        case .binary(let tree): return (tree.text, walked ? String(text.dropFirst()) : (text == "[" ? nil : "withdrawn walk left \(text)"), nil)
        case .bytes(let reason, _): return (nil, walked ? String(text.dropFirst()) : (text == "[" ? nil : "withdrawn walk left \(text)"), reason)
        default: return (nil, "not binary", nil)
        }
    }

    @Test func theWalkWritesWhatTheTreeRendersForEveryPayloadTheEncoderWrites() throws {
        var rng = SplitMix64(seed: 0x5EED_2611)
        for trial in 0..<4_000 {
            let value = Self.randomValue(&rng)
            let bytes = try value.encoded()
            var counter = Counter()
            #expect(try BinaryEntityValue.walk(bytes, into: &counter), "trial \(trial): the encoder's own bytes called another form")
            let (tree, walked, reason) = Self.bothRenderings(bytes)
            if let reason {
                // Only a value the encoder itself respells (a signalling NaN float) may be bytes.
                #expect(walked == nil, "trial \(trial): \(reason)")
                continue
            }
            #expect(tree != nil && walked == tree, "trial \(trial): walked \(walked ?? "nothing"), tree \(tree ?? "nothing")")
        }
    }

    @Test func theWalkAndTheTreeAgreeOnDamagedAndRespelledBytes() throws {
        var rng = SplitMix64(seed: 0xDA4A_6E)
        var shownAsBinary = 0, shownAsBytes = 0
        for trial in 0..<20_000 {
            var bytes = try Self.randomValue(&rng).encoded()
            // One to three changes: a byte replaced, inserted or removed (never the format's first).
            for _ in 0...Int(rng.next() % 3) where bytes.count > 1 {
                let at = 1 + Int(rng.next() % UInt64(bytes.count - 1))
                switch rng.next() % 4 {
                case 0: bytes[at] = UInt8(truncatingIfNeeded: rng.next())
                case 1: bytes.insert(UInt8(truncatingIfNeeded: rng.next() % 0x12), at: at)
                case 2: bytes.remove(at: at)
                default: bytes[at] ^= 0x80  // a varint's continuation bit
                }
            }
            let (tree, walked, _) = Self.bothRenderings(bytes)
            #expect(walked == tree, "trial \(trial) \(bytes): walked \(walked ?? "nothing"), tree \(tree ?? "nothing")")
            if tree == nil { shownAsBytes += 1 } else { shownAsBinary += 1 }
        }
        // Both verdicts were exercised, many times.
        #expect(shownAsBinary > 1_000 && shownAsBytes > 1_000, "binary \(shownAsBinary), bytes \(shownAsBytes)")
    }

    @Test func respelledBytesAreNotTheEncodersForm() throws {
        // 5 as a two-byte varint; a key defined with a two-byte length; a float whose signalling
        // NaN the decoder's widening quiets; a decimal in its text form.
        let respelled: [[UInt8]] = [
            [0xFF, 0x04, 0x85, 0x00],
            [0xFF, 0x0B, 0x01, 0x81, 0x00, 0x61, 0x00, 0x00],
            [0xFF, 0x06] + withUnsafeBytes(of: UInt32(0x7F80_0001).littleEndian, Array.init),
            [0xFF, 0x0D, 0x04] + Array("12.5".utf8),
        ]
        for bytes in respelled {
            var counter = Counter()
            #expect(try !BinaryEntityValue.walk(bytes, into: &counter), "\(bytes)")
            #expect(counter.values == 1 || counter.values == 2, "\(bytes): \(counter.values) values")
            var buffer = JSONBuffer()
            #expect(!EntityJSON.appendBinary(bytes, to: &buffer))
            #expect(buffer.count == 0)
            guard case .bytes(let reason, let damaged) = EntityJSON.payload(bytes) else {
                Issue.record("\(bytes) shown as binary")
                continue
            }
            #expect(!damaged && reason.contains("the encoder writes that value otherwise"))
        }
    }

    @Test func aOneKeyObjectWithADollarKeyIsWrappedAndOtherObjectsAreNot() throws {
        let cases: [(BinaryEntityValue, String)] = [
            (.keyed([("$date", .int(1))]), #"{"$object":{"$date":1}}"#),
            (.keyed([("$a", .int(1)), ("b", .int(2))]), #"{"$a":1,"b":2}"#),
            (.unkeyed([.keyed([("$x", .keyed([("$y", .null)]))]), .keyed([])]), #"[{"$object":{"$x":{"$object":{"$y":null}}}},{}]"#),
            (.keyed([("when", .date(Date(timeIntervalSinceReferenceDate: 0.25)))]), #"{"when":{"$date":"2001-01-01T00:00:00.25Z"}}"#),
            (.keyed([("far", .date(Date(timeIntervalSinceReferenceDate: 1e16)))]), #"{"far":{"$date":1e+16}}"#),
        ]
        for (value, expected) in cases {
            var buffer = JSONBuffer()
            #expect(EntityJSON.appendBinary(try value.encoded(), to: &buffer))
            #expect(buffer.text == expected)
        }
    }

    /// Counts the values a walk reports.
    struct Counter: BinaryEntityVisitor {
        var values = 0
        mutating func visitNull() { values += 1 }
        mutating func visitBool(_ value: Bool) { values += 1 }
        mutating func visitInt(_ value: Int64) { values += 1 }
        mutating func visitUInt(_ value: UInt64) { values += 1 }
        mutating func visitDouble(_ value: Double) { values += 1 }
        mutating func visitFloat(_ value: Float) { values += 1 }
        mutating func visitString(_ value: String) { values += 1 }
        mutating func visitUUID(_ value: UUID) { values += 1 }
        mutating func visitDate(_ value: Date) { values += 1 }
        mutating func visitData(_ bytes: UnsafeBufferPointer<UInt8>) { values += 1 }
        mutating func visitDecimal(_ value: Decimal) { values += 1 }
        mutating func visitURL(_ text: String) { values += 1 }
        mutating func beginKeyed() { values += 1 }
        mutating func visitKey(_ key: String) {}
        mutating func endKeyed(count: Int) {}
        mutating func beginUnkeyed() { values += 1 }
        mutating func endUnkeyed(count: Int) {}
    }
}
