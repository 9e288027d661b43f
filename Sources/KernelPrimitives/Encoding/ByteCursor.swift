/// A bounds-checked cursor over borrowed bytes that answers `nil` instead of throwing: for
/// decoding the log's record framing, where the caller turns any failure into one corruption
/// error with its own location.
///
/// `@usableFromInline` so that its inlinable members reach the other modules inlined (see
/// ``Varint``: Swift 6.3.1 does not serialise them for a plain `package` type).
@usableFromInline package struct ByteCursor {
    /// The bytes read.
    @usableFromInline package let bytes: UnsafeRawBufferPointer
    /// The offset of the next byte to read.
    @usableFromInline package var offset = 0

    /// Creates a cursor at the start of `bytes`.
    @inlinable
    package init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Whether every byte has been read.
    @inlinable
    package var isAtEnd: Bool { offset >= bytes.count }

    /// Reads a varint (``Varint``); nil when truncated or overflowing.
    @inlinable @inline(__always)
    package mutating func readVarint() -> UInt64? {
        try? Varint.decode(bytes, at: &offset)
    }

    /// Takes the next `count` bytes; nil when fewer remain.
    @inlinable @inline(__always)
    package mutating func readBytes(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, bytes.count - offset >= count else { return nil }
        let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
        offset += count
        return slice
    }
}
