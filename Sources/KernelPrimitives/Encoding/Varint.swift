/// Unsigned LEB128 varints: seven bits a byte, low bits first, the high bit set on every byte
/// but the last. The one encoder and the one decoder of every varint the package writes (batch
/// framing, event envelopes, entity payloads, snapshots; Docs/FileFormat.md), so that one
/// overflow rule holds for all of them.
///
/// The rule: a `UInt64` takes at most ``maxLength`` bytes, and the tenth byte may carry only
/// the value's top bit (0 or 1, no continuation). Anything longer or larger is refused rather
/// than wrapped, so damaged bytes never decode to a plausible small number. Non-minimal
/// encodings (`0x80 0x00` for 0) are accepted, as they always were; the encoder never writes
/// them.
///
/// `@usableFromInline` so that the members below reach the other modules inlined and
/// specialised: with Swift 6.3.1, an `@inlinable` member of a plain `package` type is not
/// serialised for its client modules, which then call the generic entry point through witness
/// tables (a malloc and a free per byte read from an `UnsafeRawBufferPointer`); that made
/// opening an activity snapshot 1.65x slower (Docs/Benchmarks.md, 2026-11-26). The same holds
/// for every `package` type in this module whose inlinable members other modules call: mark it
/// `@usableFromInline` (its inlinable members may then name only public or `@usableFromInline`
/// declarations, hence the public Foundation imports), or they are ordinary calls.
@usableFromInline package enum Varint {
    /// The most bytes a `UInt64` takes.
    package static let maxLength = 10

    /// Why bytes are not a varint. `@usableFromInline`: the inlinable decoder throws it.
    @usableFromInline package enum Failure: Error, Hashable, Sendable {
        /// The bytes ended inside the varint (the last byte read had its continuation bit set,
        /// or there was no byte at all).
        case truncated
        /// The varint runs past ten bytes or its value past 64 bits.
        case overflow
    }

    /// Appends `value` to `bytes`: 1 byte below 128, at most ``maxLength``.
    /// - Parameters:
    ///   - value: The value to encode.
    ///   - bytes: The buffer to append to.
    @inlinable @inline(__always)
    package static func encode(_ value: UInt64, into bytes: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// The number of bytes ``encode(_:into:)`` writes for `value`.
    @inlinable
    package static func encodedLength(of value: UInt64) -> Int {
        value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
    }

    /// Decodes the varint at `offset` in `bytes`.
    ///
    /// - Parameters:
    ///   - bytes: The input (an array or a raw buffer).
    ///   - offset: Where the varint starts. On return: just past it; after
    ///     ``Failure/truncated``, the end of `bytes`; after ``Failure/overflow``, just past the
    ///     offending byte (so `offset - 1` is where the damage is).
    /// - Returns: The value.
    /// - Throws: ``Failure`` when the bytes end inside the varint or it overflows 64 bits.
    @inlinable @inline(__always)
    package static func decode<Bytes: RandomAccessCollection<UInt8>>(
        _ bytes: Bytes, at offset: inout Int
    ) throws(Failure) -> UInt64 where Bytes.Index == Int {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        let end = bytes.endIndex
        while offset < end {
            let byte = bytes[offset]
            offset += 1
            // The tenth byte holds bit 63 alone: anything above 1 (a higher bit, or a
            // continuation) overflows.
            if shift == 63 && byte > 1 { throw .overflow }
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
        throw .truncated
    }
}
