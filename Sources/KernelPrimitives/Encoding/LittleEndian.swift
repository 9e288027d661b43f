// Little-endian fixed-width and LEB128 varint encoding, the only integer encodings the
// file format uses (Docs/FileFormat.md).

extension Array where Element == UInt8 {
    @inline(__always)
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    @inline(__always)
    mutating func appendVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        append(UInt8(v))
    }

    mutating func storeLittleEndian<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        Swift.withUnsafeBytes(of: value.littleEndian) { bytes in
            for i in 0..<bytes.count { self[offset + i] = bytes[i] }
        }
    }
}

extension UnsafeRawBufferPointer {
    @inline(__always)
    func loadLittleEndian<T: FixedWidthInteger>(at offset: Int, as type: T.Type) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    /// Whether every byte is zero: preallocated space that was never written.
    func isAllZero() -> Bool {
        var index = 0
        let n = count
        guard let base = baseAddress else { return true }
        while n - index >= 8 {
            if base.loadUnaligned(fromByteOffset: index, as: UInt64.self) != 0 { return false }
            index += 8
        }
        while index < n {
            if base.load(fromByteOffset: index, as: UInt8.self) != 0 { return false }
            index += 1
        }
        return true
    }
}

/// A bounds-checked cursor over bytes, for decoding record framing.
struct ByteCursor {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var isAtEnd: Bool { offset >= bytes.count }

    /// Reads an unsigned LEB128 varint of at most 10 bytes; nil when truncated or overlong.
    @inline(__always)
    mutating func readVarint() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count {
            let byte = bytes[offset]
            offset += 1
            if shift == 63 && byte > 1 { return nil }
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }

    /// Takes the next `count` bytes; nil when fewer remain.
    @inline(__always)
    mutating func readBytes(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, bytes.count - offset >= count else { return nil }
        let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
        offset += count
        return slice
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for closures with typed throws (the standard one is untyped).
    @inline(__always)
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws(LogError) -> R) throws(LogError) -> R {
        let result: Result<R, LogError> = withUnsafeBytes { raw in Result { () throws(LogError) -> R in try body(raw) } }
        return try result.get()
    }
}
