public import Foundation

/// Why binary input could not be decoded, and where.
public struct BinaryDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Reason: Hashable, Sendable {
        /// The input ended; `needed` more bytes were required.
        case truncated(needed: Int)
        /// A varint ran longer than 10 bytes or overflowed 64 bits.
        case malformedVarint
        /// A string's bytes are not valid UTF-8.
        case invalidUTF8
        /// A value is out of range or unknown (a tag, a version, a length).
        case invalidValue(String)
        /// Bytes were left over after the value was decoded.
        case trailingBytes(Int)
    }

    /// What went wrong.
    public var reason: Reason
    /// The byte offset, from the start of the input, where decoding failed.
    public var offset: Int

    /// Creates an error.
    public init(_ reason: Reason, at offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    public var description: String {
        let what: String
        switch reason {
        case .truncated(let needed): what = "input ends early (\(needed) more byte(s) needed)"
        case .malformedVarint: what = "malformed varint"
        case .invalidUTF8: what = "string is not valid UTF-8"
        case .invalidValue(let detail): what = detail
        case .trailingBytes(let count): what = "\(count) unexpected trailing byte(s)"
        }
        return "binary decoding failed at byte offset \(offset): \(what)"
    }
}

/// Reads values written by ``BinaryWriter``, front to back, with bounds checks.
///
/// Every failure is a ``BinaryDecodingError`` carrying the byte offset where it happened.
public struct BinaryReader: Sendable {
    /// The input.
    public let bytes: [UInt8]
    /// The offset of the next byte to read.
    public private(set) var offset: Int

    /// Creates a reader over `bytes`, starting at offset 0.
    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.offset = 0
    }

    /// The number of bytes not yet read.
    public var remaining: Int { bytes.count - offset }
    /// Whether every byte has been read.
    public var isAtEnd: Bool { offset >= bytes.count }

    private func require(_ count: Int) throws(BinaryDecodingError) {
        guard count >= 0, remaining >= count else {
            throw BinaryDecodingError(.truncated(needed: count - remaining), at: offset)
        }
    }

    /// Reads an unsigned LEB128 varint.
    /// - Throws: ``BinaryDecodingError`` when truncated or longer than 64 bits.
    public mutating func readVarint() throws(BinaryDecodingError) -> UInt64 {
        let start = offset
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard offset < bytes.count else { throw BinaryDecodingError(.truncated(needed: 1), at: offset) }
            let byte = bytes[offset]
            offset += 1
            if shift == 63 && byte > 1 { throw BinaryDecodingError(.malformedVarint, at: start) }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw BinaryDecodingError(.malformedVarint, at: start) }
        }
    }

    /// Reads a varint that must fit in `T`.
    /// - Throws: ``BinaryDecodingError`` when truncated or out of range.
    public mutating func readVarint<T: FixedWidthInteger & UnsignedInteger>(as type: T.Type) throws(BinaryDecodingError) -> T {
        let start = offset
        let value = try readVarint()
        guard let narrowed = T(exactly: value) else {
            throw BinaryDecodingError(.invalidValue("\(value) does not fit in \(T.self)"), at: start)
        }
        return narrowed
    }

    /// Reads a zigzag-encoded signed varint.
    public mutating func readZigZag() throws(BinaryDecodingError) -> Int64 {
        ZigZag.decode(try readVarint())
    }

    /// Reads one byte.
    public mutating func readUInt8() throws(BinaryDecodingError) -> UInt8 {
        try require(1)
        defer { offset += 1 }
        return bytes[offset]
    }

    /// Reads a fixed-width little-endian integer.
    public mutating func readFixed<T: FixedWidthInteger>(_ type: T.Type) throws(BinaryDecodingError) -> T {
        let size = MemoryLayout<T>.size
        try require(size)
        let at = offset
        offset += size
        return bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: T.self)) }
    }

    /// Reads a `Bool` written as one byte (0 or 1).
    public mutating func readBool() throws(BinaryDecodingError) -> Bool {
        let start = offset
        switch try readUInt8() {
        case 0: return false
        case 1: return true
        case let other: throw BinaryDecodingError(.invalidValue("boolean byte \(other)"), at: start)
        }
    }

    /// Reads exactly `count` raw bytes.
    public mutating func readRaw(count: Int) throws(BinaryDecodingError) -> [UInt8] {
        try require(count)
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// Reads every remaining byte.
    public mutating func readRemaining() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[offset...])
    }

    /// Reads length-prefixed bytes.
    public mutating func readBytes() throws(BinaryDecodingError) -> [UInt8] {
        let start = offset
        let count = try readVarint()
        guard count <= UInt64(remaining) else {
            throw BinaryDecodingError(.truncated(needed: Int(clamping: count) - remaining), at: start)
        }
        return try readRaw(count: Int(count))
    }

    /// Reads a length-prefixed UTF-8 string.
    /// - Throws: ``BinaryDecodingError`` when truncated or not UTF-8.
    public mutating func readString() throws(BinaryDecodingError) -> String {
        try readString { String(validating: $0, as: UTF8.self) }
    }

    /// Reads a length-prefixed UTF-8 string, reusing one of `strings` with the same bytes
    /// (see ``StringInterner``).
    /// - Throws: ``BinaryDecodingError`` when truncated or not UTF-8.
    package mutating func readString(interning strings: inout StringInterner) throws(BinaryDecodingError) -> String {
        try readString { strings.string($0) }
    }

    /// Reads a length-prefixed string's bytes and makes the string with `make` (`nil`: not
    /// UTF-8), in place: no intermediate array (this runs for every event on replay).
    private mutating func readString(_ make: (UnsafeBufferPointer<UInt8>) -> String?) throws(BinaryDecodingError) -> String {
        let start = offset
        let count = try readVarint()
        guard count <= UInt64(remaining) else {
            throw BinaryDecodingError(.truncated(needed: Int(clamping: count) - remaining), at: start)
        }
        let from = offset
        offset += Int(count)
        let string = bytes.withUnsafeBufferPointer { buffer in
            make(UnsafeBufferPointer(rebasing: buffer[from..<(from + Int(count))]))
        }
        guard let string else { throw BinaryDecodingError(.invalidUTF8, at: start) }
        return string
    }

    /// Reads a string written by ``BinaryWriter/writeOptionalString(_:)``.
    public mutating func readOptionalString() throws(BinaryDecodingError) -> String? {
        try readBool() ? try readString() : nil
    }

    /// Reads a 16-byte UUID.
    public mutating func readUUID() throws(BinaryDecodingError) -> UUID {
        try require(16)
        let at = offset
        offset += 16
        var value = uuid_t(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        bytes.withUnsafeBytes { source in
            withUnsafeMutableBytes(of: &value) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[at..<(at + 16)])) }
        }
        return UUID(uuid: value)
    }

    /// Reads a `Double` written by ``BinaryWriter/writeDouble(_:)``.
    public mutating func readDouble() throws(BinaryDecodingError) -> Double {
        Double(bitPattern: try readFixed(UInt64.self))
    }

    /// Reads a date written by ``BinaryWriter/writeDateMilliseconds(_:)``.
    public mutating func readDateMilliseconds() throws(BinaryDecodingError) -> Date {
        Date(timeIntervalSince1970: Double(try readZigZag()) / 1000)
    }

    /// Reads a date written by ``BinaryWriter/writeDateExact(_:)``.
    public mutating func readDateExact() throws(BinaryDecodingError) -> Date {
        Date(timeIntervalSince1970: try readDouble())
    }

    /// Reads a date written by ``BinaryWriter/writeDateReference(_:)`` (exact).
    public mutating func readDateReference() throws(BinaryDecodingError) -> Date {
        Date(timeIntervalSinceReferenceDate: try readDouble())
    }

    /// Fails unless every byte was consumed.
    /// - Throws: ``BinaryDecodingError`` with reason ``BinaryDecodingError/Reason/trailingBytes(_:)``.
    public func expectEnd() throws(BinaryDecodingError) {
        guard isAtEnd else { throw BinaryDecodingError(.trailingBytes(remaining), at: offset) }
    }
}
