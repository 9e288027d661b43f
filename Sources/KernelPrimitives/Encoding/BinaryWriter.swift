public import Foundation

/// Appends primitive values to a growing byte buffer in EventKernel's compact binary forms.
///
/// Domain codecs use it to encode event payloads; the envelope encoding and snapshot headers
/// use it too, so one set of rules (LEB128 varints, zigzag for signed, little-endian fixed
/// width) holds everywhere.
///
/// Package access: domain codecs and snapshot layouts in this package use it; apps encode
/// their own payloads (the entity coder, JSON, or their own format).
///
/// `@usableFromInline` so that its inlinable members reach the other modules inlined (see
/// ``Varint``: Swift 6.3.1 does not serialise them for a plain `package` type).
@usableFromInline package struct BinaryWriter: Sendable {
    /// The bytes written so far.
    @inlinable
    package var bytes: [UInt8] { storage }
    // Stored apart from `bytes` so that the writes below can be inlinable into the layers that
    // encode every event, while only the writer appends.
    @usableFromInline var storage: [UInt8]

    /// Creates an empty writer.
    /// - Parameter capacity: Bytes to reserve up front.
    @inlinable
    package init(capacity: Int = 64) {
        storage = []
        storage.reserveCapacity(capacity)
    }

    /// Writes a varint (``Varint``: 1 byte below 128, at most 10).
    @inlinable
    package mutating func writeVarint(_ value: UInt64) {
        Varint.encode(value, into: &storage)
    }

    /// Writes a signed integer zigzag-encoded as a varint, so small negatives stay small.
    @inlinable
    package mutating func writeZigZag(_ value: Int64) {
        writeVarint(ZigZag.encode(value))
    }

    /// Writes one byte.
    @inlinable
    package mutating func writeUInt8(_ value: UInt8) { storage.append(value) }

    /// Writes a fixed-width little-endian integer.
    @inlinable
    package mutating func writeFixed<T: FixedWidthInteger>(_ value: T) {
        storage.appendLittleEndian(value)
    }

    /// Writes a `Bool` as one byte.
    @inlinable
    package mutating func writeBool(_ value: Bool) { storage.append(value ? 1 : 0) }

    /// Writes bytes prefixed by their length as a varint.
    @inlinable
    package mutating func writeBytes(_ value: some Collection<UInt8>) {
        writeVarint(UInt64(value.count))
        storage.append(contentsOf: value)
    }

    /// Writes bytes with no length prefix (the reader must know where they end).
    @inlinable
    package mutating func writeRaw(_ value: some Sequence<UInt8>) { storage.append(contentsOf: value) }

    /// Writes a string as length-prefixed UTF-8.
    @inlinable
    package mutating func writeString(_ value: String) { writeBytes(Array(value.utf8)) }

    /// Writes an optional string: a presence byte, then the string.
    @inlinable
    package mutating func writeOptionalString(_ value: String?) {
        if let value { writeUInt8(1); writeString(value) } else { writeUInt8(0) }
    }

    /// Writes a UUID as its 16 raw bytes.
    @inlinable
    package mutating func writeUUID(_ value: UUID) {
        withUnsafeBytes(of: value.uuid) { storage.append(contentsOf: $0) }
    }

    /// Writes a `Double` as its IEEE-754 bit pattern, 8 bytes little-endian (lossless).
    @inlinable
    package mutating func writeDouble(_ value: Double) { writeFixed(value.bitPattern) }

    /// Writes a date as zigzag milliseconds since 1970 (compact; sub-millisecond precision is lost).
    @inlinable
    package mutating func writeDateMilliseconds(_ value: Date) {
        writeZigZag(Int64((value.timeIntervalSince1970 * 1000).rounded()))
    }

    /// Writes a date as a `Double` of seconds since 1970 (8 bytes). Not lossless for every
    /// `Date`: a `Date` holds seconds since 2001, and converting rounds some values by an ulp;
    /// use ``writeDateReference(_:)`` for an exact round trip.
    @inlinable
    package mutating func writeDateExact(_ value: Date) { writeDouble(value.timeIntervalSince1970) }

    /// Writes a date as its `timeIntervalSinceReferenceDate` `Double` (8 bytes, lossless: the
    /// value a `Date` holds).
    @inlinable
    package mutating func writeDateReference(_ value: Date) { writeDouble(value.timeIntervalSinceReferenceDate) }
}
