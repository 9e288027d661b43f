/// FNV-1a, 64 bits: a non-cryptographic hash with a one-line step, used where a name or an
/// input needs a second, independent fingerprint beside ``CRC32C`` (a long snapshot name's file
/// name, an imported file's identity). Its constants are part of those formats: changing them
/// changes names and identities already on disk.
///
/// The step is `@inlinable` so that a caller that fuses it into its own per-byte loop (the import
/// scan checks UTF-8 in the same pass) pays no call per byte.
package struct FNV1a64: Sendable {
    /// The hash of the bytes added so far (the offset basis before any).
    package private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    /// A hash of nothing yet.
    @inlinable package init() {}

    /// Adds one byte.
    /// - Complexity: O(1).
    @inlinable @inline(__always)
    package mutating func add(_ byte: UInt8) {
        value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
    }

    /// Adds every byte of `bytes`, in order.
    /// - Complexity: O(n).
    @inlinable
    package mutating func add(_ bytes: some Sequence<UInt8>) {
        for byte in bytes { add(byte) }
    }

    /// The hash of `bytes`.
    /// - Complexity: O(n).
    @inlinable
    package static func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hasher = FNV1a64()
        hasher.add(bytes)
        return hasher.value
    }
}
