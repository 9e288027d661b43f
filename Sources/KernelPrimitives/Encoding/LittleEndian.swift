// Little-endian fixed-width integers, the only fixed-width encoding the file formats use
// (Docs/FileFormat.md): one way to write them and one way to read them, for every layer.

extension Array where Element == UInt8 {
    /// Appends `value`'s bytes, least significant first.
    @inlinable @inline(__always)
    package mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    /// `withUnsafeBytes` for closures with typed throws (the standard one is untyped).
    @inlinable @inline(__always)
    package func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let result: Result<R, E> = withUnsafeBytes { raw in Result { () throws(E) -> R in try body(raw) } }
        return try result.get()
    }
}

extension UnsafeRawBufferPointer {
    /// The `T` stored little-endian at `offset`, which need not be aligned. The caller checks
    /// that `offset + MemoryLayout<T>.size` is within bounds.
    @inlinable @inline(__always)
    package func loadLittleEndian<T: FixedWidthInteger>(at offset: Int, as type: T.Type) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    /// Whether every byte is zero: preallocated space that was never written.
    package func isAllZero() -> Bool {
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
