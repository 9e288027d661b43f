public import Foundation

/// The zigzag mapping between signed and unsigned integers (0, -1, 1, -2, ... to 0, 1, 2, 3, ...),
/// so that small negative numbers make short varints: the one definition every binary form of
/// the package uses (``BinaryWriter``, ``BinaryReader``, the entity coder, the activity snapshot).
package enum ZigZag {
    /// `value` mapped to an unsigned integer.
    @inlinable package static func encode(_ value: Int64) -> UInt64 { UInt64(bitPattern: (value << 1) ^ (value >> 63)) }
    /// The signed integer `raw` encodes.
    @inlinable package static func decode(_ raw: UInt64) -> Int64 { Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1) }
}

/// Appends primitive values to a growing byte buffer in EventKernel's compact binary forms.
///
/// Domain codecs use it to encode event payloads; the envelope encoding and snapshot headers
/// use it too, so one set of rules (LEB128 varints, zigzag for signed, little-endian fixed
/// width) holds everywhere.
public struct BinaryWriter: Sendable {
    /// The bytes written so far.
    public private(set) var bytes: [UInt8]

    /// Creates an empty writer.
    /// - Parameter capacity: Bytes to reserve up front.
    public init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Writes an unsigned LEB128 varint (1 byte below 128, at most 10).
    public mutating func writeVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// Writes a signed integer zigzag-encoded as a varint, so small negatives stay small.
    public mutating func writeZigZag(_ value: Int64) {
        writeVarint(ZigZag.encode(value))
    }

    /// Writes one byte.
    public mutating func writeUInt8(_ value: UInt8) { bytes.append(value) }

    /// Writes a fixed-width little-endian integer.
    public mutating func writeFixed<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// Writes a `Bool` as one byte.
    public mutating func writeBool(_ value: Bool) { bytes.append(value ? 1 : 0) }

    /// Writes bytes prefixed by their length as a varint.
    public mutating func writeBytes(_ value: some Collection<UInt8>) {
        writeVarint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// Writes bytes with no length prefix (the reader must know where they end).
    public mutating func writeRaw(_ value: some Sequence<UInt8>) { bytes.append(contentsOf: value) }

    /// Writes a string as length-prefixed UTF-8.
    public mutating func writeString(_ value: String) { writeBytes(Array(value.utf8)) }

    /// Writes an optional string: a presence byte, then the string.
    public mutating func writeOptionalString(_ value: String?) {
        if let value { writeUInt8(1); writeString(value) } else { writeUInt8(0) }
    }

    /// Writes a UUID as its 16 raw bytes.
    public mutating func writeUUID(_ value: UUID) {
        withUnsafeBytes(of: value.uuid) { bytes.append(contentsOf: $0) }
    }

    /// Writes a `Double` as its IEEE-754 bit pattern, 8 bytes little-endian (lossless).
    public mutating func writeDouble(_ value: Double) { writeFixed(value.bitPattern) }

    /// Writes a date as zigzag milliseconds since 1970 (compact; sub-millisecond precision is lost).
    public mutating func writeDateMilliseconds(_ value: Date) {
        writeZigZag(Int64((value.timeIntervalSince1970 * 1000).rounded()))
    }

    /// Writes a date as a `Double` of seconds since 1970 (8 bytes). Not lossless for every
    /// `Date`: a `Date` holds seconds since 2001, and converting rounds some values by an ulp;
    /// use ``writeDateReference(_:)`` for an exact round trip.
    public mutating func writeDateExact(_ value: Date) { writeDouble(value.timeIntervalSince1970) }

    /// Writes a date as its `timeIntervalSinceReferenceDate` `Double` (8 bytes, lossless: the
    /// value a `Date` holds).
    public mutating func writeDateReference(_ value: Date) { writeDouble(value.timeIntervalSinceReferenceDate) }
}
