public import Foundation

/// Reads values written by ``BinaryWriter``, front to back, with bounds checks.
///
/// Every failure is a ``BinaryDecodingError`` carrying the byte offset where it happened.
///
/// Package access: domain codecs and snapshot layouts in this package use it; apps encode
/// their own payloads (the entity coder, JSON, or their own format).
///
/// `@usableFromInline` so that its inlinable members reach the other modules inlined (see
/// ``Varint``: Swift 6.3.1 does not serialise them for a plain `package` type).
@usableFromInline package struct BinaryReader: Sendable {
    /// The input.
    @usableFromInline package let bytes: [UInt8]
    /// The offset of the next byte to read.
    @inlinable
    package var offset: Int { next }
    // Stored apart from `offset` so that the hot reads below can be inlinable into the layers
    // that decode every event on replay, while only the reader moves it.
    @usableFromInline var next: Int

    /// Creates a reader over `bytes`, starting at offset 0.
    @inlinable
    package init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.next = 0
    }

    /// The number of bytes not yet read.
    @inlinable
    package var remaining: Int { bytes.count - offset }
    /// Whether every byte has been read.
    @inlinable
    package var isAtEnd: Bool { offset >= bytes.count }

    @inlinable
    func require(_ count: Int) throws(BinaryDecodingError) {
        guard count >= 0, remaining >= count else {
            throw BinaryDecodingError(.truncated(needed: count - remaining), at: offset)
        }
    }

    /// Reads a varint (``Varint``).
    /// - Throws: ``BinaryDecodingError`` when truncated (at the end of the input) or longer
    ///   than 64 bits (at the varint's first byte).
    @inlinable
    package mutating func readVarint() throws(BinaryDecodingError) -> UInt64 {
        let start = offset
        do throws(Varint.Failure) {
            return try Varint.decode(bytes, at: &next)
        } catch .truncated {
            throw BinaryDecodingError(.truncated(needed: 1), at: offset)
        } catch {
            throw BinaryDecodingError(.malformedVarint, at: start)
        }
    }

    /// Reads a varint that must fit in `T`.
    /// - Throws: ``BinaryDecodingError`` when truncated or out of range.
    @inlinable
    package mutating func readVarint<T: FixedWidthInteger & UnsignedInteger>(as type: T.Type) throws(BinaryDecodingError) -> T {
        let start = offset
        let value = try readVarint()
        guard let narrowed = T(exactly: value) else {
            throw BinaryDecodingError(.invalidValue("\(value) does not fit in \(T.self)"), at: start)
        }
        return narrowed
    }

    /// Reads a zigzag-encoded signed varint.
    @inlinable
    package mutating func readZigZag() throws(BinaryDecodingError) -> Int64 {
        ZigZag.decode(try readVarint())
    }

    /// Reads one byte.
    @inlinable
    package mutating func readUInt8() throws(BinaryDecodingError) -> UInt8 {
        try require(1)
        defer { next += 1 }
        return bytes[offset]
    }

    /// Reads a fixed-width little-endian integer.
    @inlinable
    package mutating func readFixed<T: FixedWidthInteger>(_ type: T.Type) throws(BinaryDecodingError) -> T {
        let size = MemoryLayout<T>.size
        try require(size)
        let at = offset
        next += size
        return bytes.withUnsafeBytes { $0.loadLittleEndian(at: at, as: T.self) }
    }

    /// Reads a `Bool` written as one byte (0 or 1).
    @inlinable
    package mutating func readBool() throws(BinaryDecodingError) -> Bool {
        let start = offset
        switch try readUInt8() {
        case 0: return false
        case 1: return true
        case let other: throw BinaryDecodingError(.invalidValue("boolean byte \(other)"), at: start)
        }
    }

    /// Reads exactly `count` raw bytes.
    @inlinable
    package mutating func readRaw(count: Int) throws(BinaryDecodingError) -> [UInt8] {
        try require(count)
        defer { next += count }
        return Array(bytes[offset..<offset + count])
    }

    /// Reads every remaining byte.
    @inlinable
    package mutating func readRemaining() -> [UInt8] {
        defer { next = bytes.count }
        return Array(bytes[offset...])
    }

    /// Reads length-prefixed bytes.
    @inlinable
    package mutating func readBytes() throws(BinaryDecodingError) -> [UInt8] {
        let start = offset
        let count = try readVarint()
        guard count <= UInt64(remaining) else {
            throw BinaryDecodingError(.truncated(needed: Int(clamping: count) - remaining), at: start)
        }
        return try readRaw(count: Int(count))
    }

    /// Reads a length-prefixed UTF-8 string.
    /// - Throws: ``BinaryDecodingError`` when truncated or not UTF-8.
    @inlinable
    package mutating func readString() throws(BinaryDecodingError) -> String {
        try readString { String(utf8Validating: $0) }
    }

    /// Reads a length-prefixed UTF-8 string, reusing one of `strings` with the same bytes
    /// (see ``StringInterner``).
    /// - Throws: ``BinaryDecodingError`` when truncated or not UTF-8.
    @inlinable
    package mutating func readString(interning strings: inout StringInterner) throws(BinaryDecodingError) -> String {
        try readString { strings.string($0) }
    }

    /// Reads a length-prefixed string's bytes and makes the string with `make` (`nil`: not
    /// UTF-8), in place: no intermediate array (this runs for every event on replay).
    @inlinable
    mutating func readString(_ make: (UnsafeBufferPointer<UInt8>) -> String?) throws(BinaryDecodingError) -> String {
        let start = offset
        let count = try readVarint()
        guard count <= UInt64(remaining) else {
            throw BinaryDecodingError(.truncated(needed: Int(clamping: count) - remaining), at: start)
        }
        let from = offset
        next += Int(count)
        let string = bytes.withUnsafeBufferPointer { buffer in
            make(UnsafeBufferPointer(rebasing: buffer[from..<(from + Int(count))]))
        }
        guard let string else { throw BinaryDecodingError(.invalidUTF8, at: start) }
        return string
    }

    /// Reads a string written by ``BinaryWriter/writeOptionalString(_:)``.
    @inlinable
    package mutating func readOptionalString() throws(BinaryDecodingError) -> String? {
        try readBool() ? try readString() : nil
    }

    /// Reads a 16-byte UUID.
    @inlinable
    package mutating func readUUID() throws(BinaryDecodingError) -> UUID {
        try require(16)
        let at = offset
        next += 16
        var value = uuid_t(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        bytes.withUnsafeBytes { source in
            withUnsafeMutableBytes(of: &value) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[at..<(at + 16)])) }
        }
        return UUID(uuid: value)
    }

    /// Reads a `Double` written by ``BinaryWriter/writeDouble(_:)``.
    @inlinable
    package mutating func readDouble() throws(BinaryDecodingError) -> Double {
        Double(bitPattern: try readFixed(UInt64.self))
    }

    /// Reads a date written by ``BinaryWriter/writeDateMilliseconds(_:)``.
    @inlinable
    package mutating func readDateMilliseconds() throws(BinaryDecodingError) -> Date {
        Date(timeIntervalSince1970: Double(try readZigZag()) / 1000)
    }

    /// Reads a date written by ``BinaryWriter/writeDateExact(_:)``.
    @inlinable
    package mutating func readDateExact() throws(BinaryDecodingError) -> Date {
        Date(timeIntervalSince1970: try readDouble())
    }

    /// Reads a date written by ``BinaryWriter/writeDateReference(_:)`` (exact).
    @inlinable
    package mutating func readDateReference() throws(BinaryDecodingError) -> Date {
        Date(timeIntervalSinceReferenceDate: try readDouble())
    }

    /// Fails unless every byte was consumed.
    /// - Throws: ``BinaryDecodingError`` with reason ``BinaryDecodingError/Reason/trailingBytes(_:)``.
    @inlinable
    package func expectEnd() throws(BinaryDecodingError) {
        guard isAtEnd else { throw BinaryDecodingError(.trailingBytes(remaining), at: offset) }
    }
}
