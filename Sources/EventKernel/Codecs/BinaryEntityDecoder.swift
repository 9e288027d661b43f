import Foundation
import KernelPrimitives

/// Decodes what ``BinaryEntityEncoder`` wrote. Keys are matched by name, so properties may be
/// reordered and optional ones added or removed without a schema bump, as with JSON; a value
/// whose tag does not match the requested type throws `DecodingError.typeMismatch` (with its
/// coding path and byte offset), never a reinterpreted value.
public struct BinaryEntityDecoder: Sendable {
    /// Creates a decoder.
    public init() {}

    /// Decodes a `T` from `bytes`.
    /// - Throws: `DecodingError` for truncated or malformed bytes, a type mismatch or a missing key.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try Self.checked(bytes).decodeValue(type, at: 1, codingPath: [])
    }

    /// The decoding state of `bytes` after the checking pass (the format's first byte, bounds,
    /// tags, nesting and the key table, with nothing after the value): what the typed decoder
    /// and the untyped reader (`BinaryEntityValue`) both start from.
    /// - Throws: `DecodingError.dataCorrupted` with the byte offset.
    static func checked(_ bytes: [UInt8]) throws -> BinaryDecodingState {
        let state = try BinaryDecodingState(binary: bytes)
        var offset = 1
        try state.skip(&offset, depth: 0, register: true)
        try state.requireEnd(at: offset)
        return state
    }
}

final class BinaryDecodingState {
    let bytes: [UInt8]
    /// The payload's key names in order of definition (a key's number is its index).
    /// Unchecked for exclusivity: only this state's methods change it, none while reading it,
    /// and the runtime's check of each access was a tenth of a walk (`perf` of an export).
    @exclusivity(unchecked) private(set) var keys: [String] = []
    /// The numbers of `keys` by name, once there are more than ``scannedKeys``.
    @exclusivity(unchecked) private var keyIndex: [String: Int] = [:]

    /// The state of `bytes`, which must start with the format's first byte.
    /// - Throws: `DecodingError.dataCorrupted` when they do not.
    init(binary bytes: [UInt8]) throws {
        guard BinaryEntityFormat.isBinary(bytes) else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not a binary entity payload (first byte \(bytes.first.map { String($0, radix: 16) } ?? "none"))"))
        }
        self.bytes = bytes
    }

    /// Checks that the payload's value ends at `offset`, the end of its bytes.
    /// - Throws: `DecodingError.dataCorrupted` naming the trailing bytes.
    func requireEnd(at offset: Int) throws {
        guard offset == bytes.count else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "\(bytes.count - offset) trailing bytes at offset \(offset)"))
        }
    }

    func corrupted(_ what: String, at offset: Int, _ codingPath: [any CodingKey] = []) -> DecodingError {
        .dataCorrupted(.init(codingPath: codingPath, debugDescription: "\(what) at byte offset \(offset)"))
    }

    func byte(_ offset: inout Int) throws -> UInt8 {
        guard offset < bytes.count else { throw corrupted("truncated value", at: offset) }
        defer { offset += 1 }
        return bytes[offset]
    }

    func varint(_ offset: inout Int) throws -> UInt64 {
        do throws(Varint.Failure) {
            return try Varint.decode(bytes, at: &offset)
        } catch .truncated {
            throw corrupted("truncated value", at: offset)
        } catch {
            throw corrupted("varint overflow", at: offset - 1)
        }
    }

    func length(_ offset: inout Int) throws -> Int {
        let n = try varint(&offset)
        guard n <= UInt64(bytes.count - offset) else { throw corrupted("length \(n) beyond the end", at: offset) }
        return Int(n)
    }

    func string(_ offset: inout Int) throws -> String {
        let n = try length(&offset)
        defer { offset += n }
        guard let s = bytes.withUnsafeBufferPointer({ String(utf8Validating: UnsafeBufferPointer(rebasing: $0[offset..<offset + n])) }) else {
            throw corrupted("invalid UTF-8", at: offset)
        }
        return s
    }

    /// Reads a key reference: the key's number, or `nil` at the end of the container.
    func keyReference(_ offset: inout Int, register: Bool) throws -> Int? {
        let reference = try varint(&offset)
        switch reference {
        case 0: return nil
        case 1:
            let at = offset
            let name = try string(&offset)
            if register { return try define(name, at: at) }
            guard let index = number(ofKey: name) else { throw corrupted("unknown key", at: at) }
            return index
        default: return try key(reference: reference, at: offset)
        }
    }

    /// Adds `name` to the key table, defined at byte `at`, and returns its number.
    /// - Throws: `DecodingError.dataCorrupted` when it is defined already.
    func define(_ name: String, at: Int) throws -> Int {
        guard number(ofKey: name) == nil else { throw corrupted("key \"\(name)\" defined twice", at: at) }
        keys.append(name)
        if keys.count == Self.scannedKeys + 1 {
            for (i, key) in keys.enumerated() { keyIndex[key] = i }
        } else if keys.count > Self.scannedKeys {
            keyIndex[name] = keys.count - 1
        }
        return keys.count - 1
    }

    /// The number a key reference (2 and above) names, read ending at `offset`.
    /// - Throws: `DecodingError.dataCorrupted` for a key not defined yet.
    func key(reference: UInt64, at offset: Int) throws -> Int {
        guard reference - 2 < UInt64(keys.count) else { throw corrupted("key reference \(reference - 2) before its definition", at: offset) }
        return Int(reference - 2)
    }

    /// Up to this many key names are found by a scan: an entity's handful compare faster than
    /// they hash (hashing each name into a dictionary was a tenth of a generic store's export,
    /// `perf`), as the encoder finds them (`BinaryEncodingState.scannedKeys`).
    static let scannedKeys = 16

    /// The number of the key `name`, if defined.
    func number(ofKey name: String) -> Int? {
        keys.count > Self.scannedKeys ? keyIndex[name] : keys.firstIndex(of: name)
    }

    /// Moves `offset` past one value (registering key names on the first pass).
    func skip(_ offset: inout Int, depth: Int, register: Bool) throws {
        guard depth < BinaryEntityValue.maxDepth else { throw corrupted("nesting deeper than \(BinaryEntityValue.maxDepth)", at: offset) }
        let tag = try byte(&offset)
        switch tag {
        case BinaryEntityFormat.null, BinaryEntityFormat.false, BinaryEntityFormat.true: break
        case BinaryEntityFormat.int, BinaryEntityFormat.uint: _ = try varint(&offset)
        case BinaryEntityFormat.double, BinaryEntityFormat.date: try advance(&offset, 8)
        case BinaryEntityFormat.float: try advance(&offset, 4)
        case BinaryEntityFormat.uuid: try advance(&offset, 16)
        case BinaryEntityFormat.decimalParts:
            try advance(&offset, 1)
            _ = try varint(&offset)
            _ = try varint(&offset)
        case BinaryEntityFormat.string, BinaryEntityFormat.data, BinaryEntityFormat.decimal, BinaryEntityFormat.url:
            offset += try length(&offset)
        case BinaryEntityFormat.keyed:
            while try keyReference(&offset, register: register) != nil { try skip(&offset, depth: depth + 1, register: register) }
        case BinaryEntityFormat.unkeyed:
            while true {
                guard offset < bytes.count else { throw corrupted("unterminated list", at: offset) }
                if bytes[offset] == BinaryEntityFormat.end { offset += 1; break }
                try skip(&offset, depth: depth + 1, register: register)
            }
        default: throw corrupted("unknown tag 0x\(String(tag, radix: 16))", at: offset - 1)
        }
    }

    func advance(_ offset: inout Int, _ n: Int) throws {
        guard bytes.count - offset >= n else { throw corrupted("truncated value", at: offset) }
        offset += n
    }

    func mismatch<T>(_ type: T.Type, tag: UInt8, at offset: Int, _ codingPath: @autoclosure () -> [any CodingKey]) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath(), debugDescription: "expected \(type), found tag 0x\(String(tag, radix: 16)) at byte offset \(offset)"))
    }

    func fixed64(_ offset: Int) -> UInt64 {
        bytes.withUnsafeBytes { $0.loadLittleEndian(at: offset, as: UInt64.self) }
    }

    func decodeInt(at offset: Int, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> Int64 {
        var o = offset
        let tag = try byte(&o)
        switch tag {
        case BinaryEntityFormat.int:
            return ZigZag.decode(try varint(&o))
        case BinaryEntityFormat.uint:
            let u = try varint(&o)
            guard u <= UInt64(Int64.max) else { throw mismatch(Int64.self, tag: tag, at: offset, codingPath()) }
            return Int64(u)
        default: throw mismatch(Int64.self, tag: tag, at: offset, codingPath())
        }
    }

    func decodeUInt(at offset: Int, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> UInt64 {
        var o = offset
        let tag = try byte(&o)
        switch tag {
        case BinaryEntityFormat.uint: return try varint(&o)
        case BinaryEntityFormat.int:
            let v = try decodeInt(at: offset, codingPath())
            guard v >= 0 else { throw mismatch(UInt64.self, tag: tag, at: offset, codingPath()) }
            return UInt64(v)
        default: throw mismatch(UInt64.self, tag: tag, at: offset, codingPath())
        }
    }

    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type, at offset: Int, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> T {
        if T.isSigned {
            let v = try decodeInt(at: offset, codingPath())
            guard let t = T(exactly: v) else { throw DecodingError.dataCorrupted(.init(codingPath: codingPath(), debugDescription: "\(v) does not fit \(T.self)")) }
            return t
        }
        let v = try decodeUInt(at: offset, codingPath())
        guard let t = T(exactly: v) else { throw DecodingError.dataCorrupted(.init(codingPath: codingPath(), debugDescription: "\(v) does not fit \(T.self)")) }
        return t
    }

    func decodeDouble(at offset: Int, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> Double {
        var o = offset
        let tag = try byte(&o)
        switch tag {
        case BinaryEntityFormat.double, BinaryEntityFormat.date: try advance(&o, 8); return Double(bitPattern: fixed64(offset + 1))
        case BinaryEntityFormat.float:
            try advance(&o, 4)
            return Double(bytes.withUnsafeBytes { Float(bitPattern: $0.loadLittleEndian(at: offset + 1, as: UInt32.self)) })
        case BinaryEntityFormat.int, BinaryEntityFormat.uint: return Double(try decodeInt(at: offset, codingPath()))
        default: throw mismatch(Double.self, tag: tag, at: offset, codingPath())
        }
    }

    func decodeString(at offset: Int, tag expected: UInt8 = BinaryEntityFormat.string, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> String {
        var o = offset
        let tag = try byte(&o)
        guard tag == expected else { throw mismatch(String.self, tag: tag, at: offset, codingPath()) }
        return try string(&o)
    }

    func decodeBool(at offset: Int, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> Bool {
        var o = offset
        switch try byte(&o) {
        case BinaryEntityFormat.true: return true
        case BinaryEntityFormat.false: return false
        case let tag: throw mismatch(Bool.self, tag: tag, at: offset, codingPath())
        }
    }

    func decodeValue<T: Decodable>(_ type: T.Type, at offset: Int, codingPath: @autoclosure () -> [any CodingKey]) throws -> T {
        if T.self == Date.self {
            return unsafeBitCast(Date(timeIntervalSinceReferenceDate: try decodeDouble(at: offset, codingPath())), to: T.self)
        }
        if T.self == UUID.self {
            var o = offset
            let tag = try byte(&o)
            guard tag == BinaryEntityFormat.uuid else { throw mismatch(UUID.self, tag: tag, at: offset, codingPath()) }
            try advance(&o, 16)
            let uuid = bytes.withUnsafeBytes { raw in
                // Not `UUID().uuid`: that draws a random UUID (on Linux, an open of /dev/urandom per
                // call), which made decoding a 1M-entity snapshot spend most of its time in the kernel.
                var u: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                withUnsafeMutableBytes(of: &u) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[offset + 1..<offset + 17])) }
                return UUID(uuid: u)
            }
            return unsafeBitCast(uuid, to: T.self)
        }
        if T.self == Data.self {
            var o = offset
            let tag = try byte(&o)
            guard tag == BinaryEntityFormat.data else { throw mismatch(Data.self, tag: tag, at: offset, codingPath()) }
            let n = try length(&o)
            return unsafeBitCast(Data(bytes[o..<o + n]), to: T.self)
        }
        if T.self == URL.self {
            let text = try decodeString(at: offset, tag: BinaryEntityFormat.url, codingPath())
            guard let url = URL(string: text) else { throw DecodingError.dataCorrupted(.init(codingPath: codingPath(), debugDescription: "invalid URL \(text)")) }
            return unsafeBitCast(url, to: T.self)
        }
        if T.self == Decimal.self {
            return unsafeBitCast(try decodeDecimal(at: offset, codingPath()), to: T.self)
        }
        return try T(from: BinaryEntityDecoderImpl(state: self, offset: offset, codingPath: codingPath()))
    }
}

extension BinaryDecodingState {
    /// Reads a decimal in either form the encoder writes: its parts, or its text (every decimal
    /// before the parts form existed, and those whose significand exceeds 64 bits).
    func decodeDecimal(at offset: Int, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> Decimal {
        var o = offset
        let tag = try byte(&o)
        if tag == BinaryEntityFormat.decimal {
            let text = try string(&o)
            // Earlier versions wrote NaN as its text, which `Decimal(string:)` does not parse.
            if text == "NaN" { return .nan }
            guard let decimal = Decimal(string: text, locale: decimalLocale) else {
                throw corrupted("invalid decimal \(text)", at: offset, codingPath())
            }
            return decimal
        }
        guard tag == BinaryEntityFormat.decimalParts else { throw mismatch(Decimal.self, tag: tag, at: offset, codingPath()) }
        let flags = try byte(&o)
        let exponent = ZigZag.decode(try varint(&o))
        let mantissa = try varint(&o)
        if flags == 2, exponent == 0, mantissa == 0 { return .nan }
        // Decimal's exponent is 8 bits, and the encoder never writes a negative zero (a
        // negative decimal with no significand is NaN): anything else, or an unknown flag, is
        // damage, never a value silently scaled or turned into NaN.
        guard flags & ~1 == 0, !(flags == 1 && mantissa == 0), exponent >= Int64(Int8.min), exponent <= Int64(Int8.max) else {
            throw corrupted("invalid decimal (flags \(flags), exponent \(exponent))", at: offset, codingPath())
        }
        return Decimal(sign: flags == 1 ? .minus : .plus, exponent: Int(exponent), significand: Decimal(mantissa))
    }
}

/// The locale decimals are parsed in, made once: making one per value was ~5% of a snapshot
/// open of a million entities with an amount each (measured with `perf`).
private let decimalLocale = Locale(identifier: "en_US_POSIX")

struct BinaryEntityDecoderImpl: Decoder {
    let state: BinaryDecodingState
    let offset: Int
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        var o = offset
        let tag = try state.byte(&o)
        guard tag == BinaryEntityFormat.keyed else { throw state.mismatch([String: Any].self, tag: tag, at: offset, codingPath) }
        var entries: [(key: Int, value: Int)] = []
        while let key = try state.keyReference(&o, register: false) {
            entries.append((key, o))
            try state.skip(&o, depth: codingPath.count + 1, register: false)
        }
        return KeyedDecodingContainer(KeyedContainer<Key>(state: state, entries: entries, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        var o = offset
        let tag = try state.byte(&o)
        guard tag == BinaryEntityFormat.unkeyed else { throw state.mismatch([Any].self, tag: tag, at: offset, codingPath) }
        return UnkeyedContainer(state: state, offset: o, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleContainer(state: state, offset: offset, codingPath: codingPath)
    }

    /// A class, not a struct: `KeyedDecodingContainer`'s box copies its container for every
    /// property decoded, and a struct of four references was four retains and releases each
    /// time (a sixth of a snapshot open's samples, perf); a class is one.
    final class KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let state: BinaryDecodingState
        let entries: [(key: Int, value: Int)]
        let codingPath: [any CodingKey]
        /// Where ``find(_:)`` looks first: the entry after the last one found.
        var next = 0

        init(state: BinaryDecodingState, entries: [(key: Int, value: Int)], codingPath: [any CodingKey]) {
            self.state = state
            self.entries = entries
            self.codingPath = codingPath
        }

        var allKeys: [Key] { entries.compactMap { Key(stringValue: state.keys[$0.key]) } }

        /// The offset of `key`'s value. Types decode their keys mostly in the order they were
        /// encoded, so the entry after the last one found is tried first, then the others, by
        /// name: no hashing per property (a hash lookup per property was most of a decode).
        func find(_ key: Key) -> Int? {
            let name = key.stringValue
            let count = entries.count
            var i = next
            for _ in 0..<count {
                if i >= count { i = 0 }
                if state.keys[entries[i].key] == name {
                    next = i + 1
                    return entries[i].value
                }
                i += 1
            }
            return nil
        }

        func value(_ key: Key) throws -> Int {
            guard let offset = find(key) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no value for key \"\(key.stringValue)\""))
            }
            return offset
        }

        func contains(_ key: Key) -> Bool { find(key) != nil }

        func decodeNil(forKey key: Key) throws -> Bool {
            state.bytes[try value(key)] == BinaryEntityFormat.null
        }

        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try state.decodeBool(at: value(key), codingPath + [key]) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try state.decodeString(at: value(key), codingPath + [key]) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try state.decodeDouble(at: value(key), codingPath + [key]) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try state.decodeDouble(at: value(key), codingPath + [key])) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try state.decodeInteger(type, at: value(key), codingPath + [key]) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try state.decodeInteger(type, at: value(key), codingPath + [key]) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try state.decodeInteger(type, at: value(key), codingPath + [key]) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try state.decodeInteger(type, at: value(key), codingPath + [key]) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try state.decodeInteger(type, at: value(key), codingPath + [key]) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try state.decodeInteger(type, at: value(key), codingPath + [key]) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try state.decodeInteger(type, at: value(key), codingPath + [key]) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try state.decodeInteger(type, at: value(key), codingPath + [key]) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try state.decodeInteger(type, at: value(key), codingPath + [key]) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try state.decodeInteger(type, at: value(key), codingPath + [key]) }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try state.decodeValue(type, at: value(key), codingPath: codingPath + [key])
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try BinaryEntityDecoderImpl(state: state, offset: value(key), codingPath: codingPath + [key]).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try BinaryEntityDecoderImpl(state: state, offset: value(key), codingPath: codingPath + [key]).unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder { try superDecoder(forKey: Key(stringValue: "super")!) }

        func superDecoder(forKey key: Key) throws -> any Decoder {
            BinaryEntityDecoderImpl(state: state, offset: try value(key), codingPath: codingPath + [key])
        }
    }

    struct UnkeyedContainer: UnkeyedDecodingContainer {
        let state: BinaryDecodingState
        var offset: Int
        let codingPath: [any CodingKey]
        var currentIndex = 0
        var count: Int? { nil }
        var isAtEnd: Bool { offset >= state.bytes.count || state.bytes[offset] == BinaryEntityFormat.end }

        init(state: BinaryDecodingState, offset: Int, codingPath: [any CodingKey]) {
            self.state = state
            self.offset = offset
            self.codingPath = codingPath
        }

        var path: [any CodingKey] { path(currentIndex) }

        func path(_ index: Int) -> [any CodingKey] { codingPath + [BinaryEntityEncoderImpl.IndexKey(index)] }

        /// The offset of the next element, and moves past it.
        mutating func next() throws -> Int {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(Any.self, .init(codingPath: path, debugDescription: "the list has no element \(currentIndex)"))
            }
            let at = offset
            try state.skip(&offset, depth: codingPath.count + 1, register: false)
            currentIndex += 1
            return at
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd, state.bytes[offset] == BinaryEntityFormat.null else { return false }
            _ = try next()
            return true
        }

        mutating func decode(_ type: Bool.Type) throws -> Bool { let i = currentIndex; return try state.decodeBool(at: next(), path(i)) }
        mutating func decode(_ type: String.Type) throws -> String { let i = currentIndex; return try state.decodeString(at: next(), path(i)) }
        mutating func decode(_ type: Double.Type) throws -> Double { let i = currentIndex; return try state.decodeDouble(at: next(), path(i)) }
        mutating func decode(_ type: Int.Type) throws -> Int { let i = currentIndex; return try state.decodeInteger(type, at: next(), path(i)) }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { let i = currentIndex; return try state.decodeInteger(type, at: next(), path(i)) }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { let i = currentIndex; return try state.decodeInteger(type, at: next(), path(i)) }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let i = currentIndex
            return try state.decodeValue(type, at: next(), codingPath: path(i))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            let p = path
            return try BinaryEntityDecoderImpl(state: state, offset: next(), codingPath: p).container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let p = path
            return try BinaryEntityDecoderImpl(state: state, offset: next(), codingPath: p).unkeyedContainer()
        }

        mutating func superDecoder() throws -> any Decoder {
            let p = path
            return BinaryEntityDecoderImpl(state: state, offset: try next(), codingPath: p)
        }
    }

    struct SingleContainer: SingleValueDecodingContainer {
        let state: BinaryDecodingState
        let offset: Int
        let codingPath: [any CodingKey]

        func decodeNil() -> Bool { offset < state.bytes.count && state.bytes[offset] == BinaryEntityFormat.null }
        func decode(_ type: Bool.Type) throws -> Bool { try state.decodeBool(at: offset, codingPath) }
        func decode(_ type: String.Type) throws -> String { try state.decodeString(at: offset, codingPath) }
        func decode(_ type: Double.Type) throws -> Double { try state.decodeDouble(at: offset, codingPath) }
        func decode(_ type: Float.Type) throws -> Float { Float(try state.decodeDouble(at: offset, codingPath)) }
        func decode(_ type: Int.Type) throws -> Int { try state.decodeInteger(type, at: offset, codingPath) }
        func decode(_ type: Int8.Type) throws -> Int8 { try state.decodeInteger(type, at: offset, codingPath) }
        func decode(_ type: Int16.Type) throws -> Int16 { try state.decodeInteger(type, at: offset, codingPath) }
        func decode(_ type: Int32.Type) throws -> Int32 { try state.decodeInteger(type, at: offset, codingPath) }
        func decode(_ type: Int64.Type) throws -> Int64 { try state.decodeInteger(type, at: offset, codingPath) }
        func decode(_ type: UInt.Type) throws -> UInt { try state.decodeInteger(type, at: offset, codingPath) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try state.decodeInteger(type, at: offset, codingPath) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try state.decodeInteger(type, at: offset, codingPath) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try state.decodeInteger(type, at: offset, codingPath) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try state.decodeInteger(type, at: offset, codingPath) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try state.decodeValue(type, at: offset, codingPath: codingPath) }
    }
}
