/// The zigzag mapping between signed and unsigned integers (0, -1, 1, -2, ... to 0, 1, 2, 3, ...),
/// so that small negative numbers make short varints: the one definition every binary form of
/// the package uses (``BinaryWriter``, ``BinaryReader``, the entity coder, the activity snapshot).
///
/// `@usableFromInline` so that its inlinable members reach the other modules inlined (see
/// ``Varint``: Swift 6.3.1 does not serialise them for a plain `package` type).
@usableFromInline package enum ZigZag {
    /// `value` mapped to an unsigned integer.
    @inlinable package static func encode(_ value: Int64) -> UInt64 { UInt64(bitPattern: (value << 1) ^ (value >> 63)) }
    /// The signed integer `raw` encodes.
    @inlinable package static func decode(_ raw: UInt64) -> Int64 { Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1) }
}
