import EventKernel
import Foundation
import Testing
import EventKernelTestSupport

/// The binary Codable coder: round trips of every shape synthesized `Codable` produces, typed
/// errors for damage and mismatches, and schema tolerance like JSON's.
@Suite struct BinaryEntityCoderTests {
    enum Shape: Codable, Equatable, Sendable {
        case circle(radius: Double)
        case polygon([Int], closed: Bool)
        case empty
    }
    struct Inner: Codable, Equatable, Sendable { var tags: [String]; var weights: [String: Double] }
    struct Everything: Codable, Equatable, Sendable {
        var id: UUID
        var int: Int
        var int8: Int8
        var uint64: UInt64
        var int64: Int64
        var double: Double
        var float: Float
        var bool: Bool
        var string: String
        var date: Date
        var data: Data
        var url: URL
        var decimal: Decimal
        var optional: String?
        var missing: Int?
        var inner: Inner
        var shapes: [Shape]
        var byNumber: [Int: String]
        var nested: [[Int?]]
        var empty: [String]
    }

    static func sample(_ i: Int) -> Everything {
        Everything(
            id: UUID(), int: i * -7919, int8: -128, uint64: .max, int64: .min, double: -0.5 + Double(i), float: 1.25, bool: i % 2 == 0,
            string: "héllo \(i) ✓", date: Date(timeIntervalSinceReferenceDate: 123_456.789_012 + Double(i)),
            data: Data([0, 1, 2, 255]), url: URL(string: "https://example.com/a?b=\(i)")!,
            decimal: Decimal(string: "12345.6789")!, optional: i % 3 == 0 ? nil : "x", missing: nil,
            inner: Inner(tags: ["a", "b"], weights: ["w": 0.1]), shapes: [.circle(radius: 2), .polygon([1, 2, 3], closed: true), .empty],
            byNumber: [1: "one", 20: "twenty"], nested: [[1, nil, 3], []], empty: [])
    }

    @Test func roundTripsEveryShapeAndArraysOfThem() throws {
        let values = (0..<50).map(Self.sample)
        for value in values {
            let bytes = try BinaryEntityEncoder().encode(value)
            #expect(try BinaryEntityDecoder().decode(Everything.self, from: bytes) == value)
        }
        let array = try BinaryEntityEncoder().encode(values)
        #expect(try BinaryEntityDecoder().decode([Everything].self, from: array) == values)
        // Key names are written once per payload: an array costs far less than JSON.
        let json = try JSONEncoder().encode(values)
        #expect(array.count * 2 < json.count, "binary \(array.count) B, JSON \(json.count) B")
    }

    @Test func everyTruncationAndEveryBitFlipIsAnErrorOrTheSameValueNeverACrash() throws {
        let value = Self.sample(3)
        let bytes = try BinaryEntityEncoder().encode(value)
        for cut in 0..<bytes.count {
            #expect(throws: DecodingError.self) { try BinaryEntityDecoder().decode(Everything.self, from: Array(bytes[..<cut])) }
        }
        // A flipped bit may still decode (a flipped bit inside a double is another double; the
        // log's checksums catch those), but it must never crash.
        for bit in 0..<(bytes.count * 8) {
            var damaged = bytes
            damaged[bit / 8] ^= 1 << (bit % 8)
            _ = try? BinaryEntityDecoder().decode(Everything.self, from: damaged)
        }
    }

    struct Amount: Codable, Equatable { var value: Decimal }

    @Test func decimalsRoundTripExactlyInTheirPartsOrAsText() throws {
        let texts = ["0", "1", "-1", "0.01", "-123.45", "12345.6789", "1.50", "-0.000000000000000000000000000001",
                     "18446744073709551615", "-18446744073709551615", "18446744073709551616", // 2^64: text form
                     "79228162514264337593543950335", "3.402823669209384634633746074317682114e+38", "1e-128", "9e127"]
        for text in texts {
            let value = try #require(Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")))
            let bytes = try BinaryEntityEncoder().encode(Amount(value: value))
            let decoded = try BinaryEntityDecoder().decode(Amount.self, from: bytes)
            #expect(decoded == Amount(value: value), "\(text)")
            #expect(decoded.value.description == value.description, "\(text)")
            // Significands of up to 64 bits take the parts form (0x10), larger ones the text (0x0D).
            let fits = Decimal(NSDecimalNumber(decimal: value.significand).uint64Value) == value.significand
            #expect(bytes.contains(fits ? 0x10 : 0x0D), "\(text)")
        }
        // NaN has a flag of its own (its text is not something Decimal(string:) parses, so a
        // NaN written as text used to make its entity unreadable); that text is read as NaN.
        let nan = try BinaryEntityDecoder().decode(Amount.self, from: BinaryEntityEncoder().encode(Amount(value: .nan)))
        #expect(nan.value.isNaN)
        let oldNaN: [UInt8] = [0xFF, 0x0B, 1, 5] + Array("value".utf8) + [0x0D, 3] + Array("NaN".utf8) + [0]
        #expect(try BinaryEntityDecoder().decode(Amount.self, from: oldNaN).value.isNaN)
    }

    @Test func decimalsWrittenAsTextBeforeThePartsFormStillDecode() throws {
        // A payload as the coder wrote it before decimal parts: {"value": 0x0D "-123.45"}.
        let old: [UInt8] = [0xFF, 0x0B, 1, 5] + Array("value".utf8) + [0x0D, 7] + Array("-123.45".utf8) + [0]
        #expect(try BinaryEntityDecoder().decode(Amount.self, from: old) == Amount(value: Decimal(string: "-123.45")!))
    }

    @Test func damagedDecimalPartsAreRefusedNeverScaledOrNaN() throws {
        func payload(flags: UInt8, exponent: [UInt8], mantissa: [UInt8]) -> [UInt8] {
            [0xFF, 0x0B, 1, 5] + Array("value".utf8) + [0x10, flags] + exponent + mantissa + [0]
        }
        #expect(try BinaryEntityDecoder().decode(Amount.self, from: payload(flags: 1, exponent: [3], mantissa: [5])) == Amount(value: Decimal(string: "-0.05")!))
        for bad in [payload(flags: 2, exponent: [3], mantissa: [5]),            // unknown flag
                    payload(flags: 1, exponent: [0], mantissa: [0]),            // negative zero (NaN)
                    payload(flags: 2, exponent: [0], mantissa: [1]),            // NaN with a significand
                    payload(flags: 3, exponent: [0], mantissa: [0]),            // negative NaN
                    payload(flags: 0, exponent: [0x80, 0x02], mantissa: [5]),   // exponent 128
                    payload(flags: 0, exponent: [0x81, 0x02], mantissa: [5])] { // exponent -129
            #expect(throws: DecodingError.self) { try BinaryEntityDecoder().decode(Amount.self, from: bad) }
        }
        // A decimal where a string is expected (and the reverse) is a type mismatch.
        struct Text: Codable { var value: String }
        let parts = try BinaryEntityEncoder().encode(Amount(value: 5))
        #expect(throws: DecodingError.self) { try BinaryEntityDecoder().decode(Text.self, from: parts) }
        let text = try BinaryEntityEncoder().encode(Text(value: "5"))
        #expect(throws: DecodingError.self) { try BinaryEntityDecoder().decode(Amount.self, from: text) }
    }

    struct V1: Codable, Equatable { var id: Int; var name: String }
    struct V2: Codable, Equatable { var id: Int; var name: String; var note: String? }
    struct Renamed: Codable, Equatable { var id: Int; var name: Int }

    @Test func toleratesAddedOptionalsAndRefusesChangedTypes() throws {
        let old = try BinaryEntityEncoder().encode(V1(id: 1, name: "a"))
        #expect(try BinaryEntityDecoder().decode(V2.self, from: old) == V2(id: 1, name: "a", note: nil))
        #expect(try BinaryEntityDecoder().decode(V1.self, from: BinaryEntityEncoder().encode(V2(id: 1, name: "a", note: "n"))) == V1(id: 1, name: "a"))
        do {
            _ = try BinaryEntityDecoder().decode(Renamed.self, from: old)
            Issue.record("a string read as an Int")
        } catch DecodingError.typeMismatch(_, let context) {
            #expect(context.codingPath.map(\.stringValue) == ["name"])
        }
        #expect(throws: DecodingError.self) { try BinaryEntityDecoder().decode(V1.self, from: BinaryEntityEncoder().encode(["id": 1])) }
    }

    struct OutOfOrder: Encodable {
        enum K: CodingKey { case a, b }
        func encode(to encoder: any Encoder) throws {
            var top = encoder.container(keyedBy: K.self)
            var a = top.nestedUnkeyedContainer(forKey: .a)
            var b = top.nestedUnkeyedContainer(forKey: .b)
            try b.encode(1)
            try a.encode(2)   // `a` was closed when `b` began
        }
    }

    @Test func aContainerWrittenAfterALaterSiblingBeganIsRefused() {
        #expect(throws: EncodingError.self) { try BinaryEntityEncoder().encode(OutOfOrder()) }
    }
}
