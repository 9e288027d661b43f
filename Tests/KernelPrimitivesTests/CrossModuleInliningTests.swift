public import KernelPrimitives
import Testing

// The codecs' hot reads must reach the other modules inlined: with Swift 6.3.1 an `@inlinable`
// member of a plain `package` type is not serialised for client modules, so Activities and
// EventKernel called `Varint.decode` unspecialised (witness calls, a malloc and a free per
// byte) and opening an activity snapshot became 1.65x slower (Docs/Benchmarks.md, 2026-11-26).
// A release build's inlining cannot be observed from a debug test, so this guards the
// declaration that decides it: the functions below are inlinable code in another module, and
// they compile only while every type they name is `@usableFromInline` (or public). Were one of
// them a plain `package` type again, this file would fail to build ("... is package and cannot
// be referenced from an '@inlinable' function").

/// Inlinable uses of KernelPrimitives' codec types and `Locked` from outside the module (see above).
@usableFromInline package enum InlinableCodecUse {
    /// Decodes the varints of `bytes` through ``Varint`` over a raw buffer, as the snapshot
    /// readers do; the failure ends the list.
    @inlinable package static func varints(_ bytes: [UInt8]) -> (values: [UInt64], failure: Varint.Failure?) {
        bytes.withUnsafeBytes { raw in
            var values: [UInt64] = []
            var offset = 0
            while offset < raw.count {
                do throws(Varint.Failure) {
                    values.append(try Varint.decode(raw, at: &offset))
                } catch {
                    return (values, error)
                }
            }
            return (values, nil)
        }
    }

    /// Writes `value`, `signed` and `text` with ``BinaryWriter`` and reads them back with
    /// ``BinaryReader`` (interning the string in `strings`), as event payloads are.
    @inlinable package static func roundTrip(_ value: UInt64, _ signed: Int64, _ text: String, strings: inout StringInterner) throws(BinaryDecodingError) -> (UInt64, Int64, String) {
        var writer = BinaryWriter()
        writer.writeVarint(value)
        writer.writeZigZag(signed)
        writer.writeString(text)
        var reader = BinaryReader(writer.bytes)
        let result = (try reader.readVarint(), try reader.readZigZag(), try reader.readString(interning: &strings))
        try reader.expectEnd()
        return result
    }

    /// The log's record framing: a varint length and that many bytes, read with ``ByteCursor``;
    /// nil when the bytes end early.
    @inlinable package static func framed(_ bytes: [UInt8]) -> [UInt8]? {
        bytes.withUnsafeBytes { raw in
            var cursor = ByteCursor(raw)
            guard let count = cursor.readVarint(), let body = cursor.readBytes(Int(count)), cursor.isAtEnd else { return nil }
            return Array(body)
        }
    }

    /// Adds 1 to `counter` under its lock, as the layers' shared states are updated.
    @inlinable package static func increment(_ counter: Locked<Int>) -> Int {
        counter.withLock { value in
            value += 1
            return value
        }
    }
}

@Suite("Codec types and Locked used from inlinable code in other modules")
struct CrossModuleInliningTests {
    @Test("Varint decodes through inlinable code, failures included")
    func varints() {
        var bytes: [UInt8] = []
        for value: UInt64 in [0, 127, 128, 300, .max] { Varint.encode(value, into: &bytes) }
        let decoded = InlinableCodecUse.varints(bytes)
        #expect(decoded.values == [0, 127, 128, 300, .max])
        #expect(decoded.failure == nil)
        // A continuation bit on the last byte: truncated, after the values before it.
        #expect(InlinableCodecUse.varints([0x05, 0x80]) == ([5], .truncated))
        // Eleven bytes: more than a UInt64 holds.
        #expect(InlinableCodecUse.varints([UInt8](repeating: 0xFF, count: 10) + [0x01]) == ([], .overflow))
    }

    @Test("BinaryWriter and BinaryReader round-trip through inlinable code; a short input is refused")
    func readerAndWriter() throws {
        var strings = StringInterner()
        let (value, signed, text) = try InlinableCodecUse.roundTrip(1 << 40, -3, "activity.added", strings: &strings)
        #expect(value == 1 << 40 && signed == -3 && text == "activity.added")
        let again = try InlinableCodecUse.roundTrip(0, .min, "activity.added", strings: &strings)
        #expect(again.0 == 0 && again.1 == .min && again.2 == "activity.added")
        var reader = BinaryReader([0x80])
        #expect(throws: BinaryDecodingError.self) { try reader.readVarint() }
    }

    @Test("ByteCursor frames through inlinable code; a short body is nil")
    func cursor() {
        #expect(InlinableCodecUse.framed([3, 7, 8, 9]) == [7, 8, 9])
        #expect(InlinableCodecUse.framed([4, 7, 8, 9]) == nil)
        #expect(InlinableCodecUse.framed([0x80]) == nil)
    }

    @Test("Locked updates through inlinable code")
    func locked() {
        let counter = Locked(41)
        #expect(InlinableCodecUse.increment(counter) == 42)
        #expect(counter.withLock { $0 } == 42)
    }
}
