import Foundation
import KernelPrimitives

/// The compact binary form of any `Codable` value, used for generic repositories' event
/// payloads and snapshots (``EntitySchema``'s default codec).
///
/// Why our own coder: nothing in the allowed packages encodes `Codable` compactly, and JSON
/// spends most of an entity's bytes on quotes, key names and UUIDs as 36-character text. This
/// format is self-describing like JSON (so adding an optional property needs no schema bump,
/// and a changed property type is an error, never a misread value) but:
/// - every value has a one-byte tag and a binary body: integers as zigzag varints, doubles as
///   8 bytes, UUIDs as 16, dates as a double;
/// - each key name is written once per payload and referenced by number afterwards, so an
///   array of a million entities (a snapshot) pays for its key names once.
///
/// Layout: the byte `0xFF` (never the first byte of JSON, so old JSON payloads are still
/// recognised), then one value. A keyed container is its tag, then `(key, value)` pairs, then
/// key reference 0; a key reference is 1 followed by a new name (varint length, UTF-8) or
/// `n + 2` for the n-th name already seen. An unkeyed container is its tag, then values, then
/// the end tag. Containers are written as the values are encoded (no intermediate tree), which
/// needs them filled in order, as synthesized `Codable` code does; a container written to after
/// a later sibling was started is refused with an `EncodingError`.
public struct BinaryEntityEncoder: Sendable {
    /// Creates an encoder.
    public init() {}

    /// Encodes `value`.
    /// - Throws: `EncodingError` when the value's `encode(to:)` fills containers out of order.
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let state = BinaryEncodingState()
        state.bytes.append(BinaryEntityFormat.magic)
        try state.encodeValue(value, level: 0, codingPath: [])
        state.close(above: 0)
        return state.bytes
    }
}

/// Tags and constants shared by the encoder and the decoder.
enum BinaryEntityFormat {
    static let magic: UInt8 = 0xFF
    static let null: UInt8 = 0x00
    static let `false`: UInt8 = 0x01
    static let `true`: UInt8 = 0x02
    static let int: UInt8 = 0x03
    static let uint: UInt8 = 0x04
    static let double: UInt8 = 0x05
    static let float: UInt8 = 0x06
    static let string: UInt8 = 0x07
    static let uuid: UInt8 = 0x08
    static let date: UInt8 = 0x09
    static let data: UInt8 = 0x0A
    static let keyed: UInt8 = 0x0B
    static let unkeyed: UInt8 = 0x0C
    static let decimal: UInt8 = 0x0D
    static let url: UInt8 = 0x0E
    static let end: UInt8 = 0x0F
    /// A decimal as its parts: a flags byte (bit 0: negative; bit 1: NaN, with exponent and
    /// significand 0), the exponent as a zigzag varint and the significand as an unsigned
    /// varint. Written for NaN and every decimal whose significand fits 64 bits (any amount of
    /// money); the others keep the text form (`decimal`).
    static let decimalParts: UInt8 = 0x10

    static func isBinary(_ bytes: [UInt8]) -> Bool { bytes.first == magic }
}

/// The encoder's shared state: the output, the key table and the stack of open containers.
final class BinaryEncodingState {
    var bytes: [UInt8] = []
    /// The key names written so far, in order (a key's reference is its index): looked up by a
    /// scan while there are few (an entity's handful: hashing each name was a tenth of an
    /// encode), through `keyIndex` once there are many.
    var keyNames: [String] = []
    var keyIndex: [String: Int] = [:]
    /// The open containers, innermost last: their ids and whether each is keyed.
    var open: [(id: Int, keyed: Bool)] = []
    var nextID = 0

    init() { bytes.reserveCapacity(128) }

    func writeVarint(_ value: UInt64) {
        Varint.encode(value, into: &bytes)
    }

    func writeString(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            writeVarint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    func writeKey(_ key: String) {
        if let index = knownKey(key) {
            writeVarint(UInt64(index + 2))
        } else {
            if keyNames.count == Self.scannedKeys { for (i, name) in keyNames.enumerated() { keyIndex[name] = i } }
            if keyNames.count >= Self.scannedKeys { keyIndex[key] = keyNames.count }
            keyNames.append(key)
            bytes.append(1)
            writeString(key)
        }
    }

    /// Up to this many key names are found by a scan.
    static let scannedKeys = 16

    private func knownKey(_ key: String) -> Int? {
        if keyNames.count > Self.scannedKeys { return keyIndex[key] }
        return keyNames.firstIndex(of: key)
    }

    /// Ends every container nested deeper than `level`.
    func close(above level: Int) {
        while open.count > level {
            let container = open.removeLast()
            bytes.append(container.keyed ? 0 : BinaryEntityFormat.end)
        }
    }

    /// Opens a container at `level` (the caller's depth).
    func openContainer(keyed: Bool, level: Int) -> Int {
        close(above: level)
        nextID += 1
        open.append((nextID, keyed))
        bytes.append(keyed ? BinaryEntityFormat.keyed : BinaryEntityFormat.unkeyed)
        return nextID
    }

    /// Checks that the container `id` at `level` is still open, and ends its children.
    /// `codingPath` is made only for the error (building it for every property was an array
    /// allocation per value encoded).
    func prepareWrite(container id: Int, level: Int, codingPath: @autoclosure () -> [any CodingKey]) throws {
        guard level > 0, open.count >= level, open[level - 1].id == id else {
            throw EncodingError.invalidValue(id, .init(codingPath: codingPath(), debugDescription:
                "the binary coder writes containers in order, and this one was already closed by a later sibling; fill containers in order or use the JSON codec"))
        }
        close(above: level)
    }

    /// Encodes one value at `level` (the depth its containers open at minus one). The types
    /// with a tag of their own are recognised by their metatype (a dynamic cast per value was
    /// a tenth of an encode); `codingPath` is made only for a value encoded through an encoder.
    func encodeValue<T: Encodable>(_ value: T, level: Int, codingPath: @autoclosure () -> [any CodingKey]) throws {
        if T.self == Date.self {
            bytes.append(BinaryEntityFormat.date)
            writeDouble(unsafeBitCast(value, to: Date.self).timeIntervalSinceReferenceDate)
        } else if T.self == UUID.self {
            bytes.append(BinaryEntityFormat.uuid)
            withUnsafeBytes(of: unsafeBitCast(value, to: UUID.self).uuid) { bytes.append(contentsOf: $0) }
        } else if T.self == Decimal.self {
            writeDecimal(unsafeBitCast(value, to: Decimal.self))
        } else if T.self == Data.self {
            let v = unsafeBitCast(value, to: Data.self)
            bytes.append(BinaryEntityFormat.data)
            writeVarint(UInt64(v.count))
            bytes.append(contentsOf: v)
        } else if T.self == URL.self {
            bytes.append(BinaryEntityFormat.url)
            writeString(unsafeBitCast(value, to: URL.self).absoluteString)
        } else {
            let before = bytes.count
            let encoder = BinaryEntityEncoderImpl(state: self, level: level, codingPath: codingPath())
            // Dictionaries and sets in sorted order: the same value, the same bytes in every
            // process (DeterministicEncoding.swift).
            if let unordered = value as? any DeterministicallyEncodable {
                try unordered.encodeDeterministically(to: encoder)
            } else {
                try value.encode(to: encoder)
            }
            close(above: level)
            // A value that encoded nothing is an empty keyed container, as JSON's `{}`.
            if bytes.count == before { bytes.append(BinaryEntityFormat.keyed); bytes.append(0) }
        }
    }

    /// Writes `value` as its parts when its significand fits 64 bits, else as its text.
    ///
    /// Why parts: printing a decimal and parsing it back cost about 0.8 and 1 µs (swift-foundation
    /// divides the 128-bit significand by ten per digit, and parses through a locale), most of a
    /// ledger entity's encode and a tenth of a snapshot open; the parts cost tens of
    /// nanoseconds each way. The significand is read through `NSDecimalNumber` (Decimal's own
    /// fields are not public on Linux) and checked by converting it back, so a value it cannot
    /// represent exactly takes the text form rather than a rounded one.
    /// NaN has a flag of its own: its text, "NaN", is not something `Decimal(string:)` parses.
    func writeDecimal(_ value: Decimal) {
        if value.isNaN {
            bytes.append(contentsOf: [BinaryEntityFormat.decimalParts, 2, 0, 0])
            return
        }
        let significand = value.significand
        let mantissa = NSDecimalNumber(decimal: significand).uint64Value
        if Decimal(mantissa) == significand {
            bytes.append(BinaryEntityFormat.decimalParts)
            bytes.append(value.sign == .minus ? 1 : 0)
            let exponent = Int64(value.exponent)
            writeVarint(ZigZag.encode(exponent))
            writeVarint(mantissa)
            return
        }
        bytes.append(BinaryEntityFormat.decimal)
        writeString(value.description)
    }

    func writeDouble(_ d: Double) {
        bytes.appendLittleEndian(d.bitPattern)
    }

    func writeInt(_ v: Int64) {
        bytes.append(BinaryEntityFormat.int)
        writeVarint(ZigZag.encode(v))
    }

    func writeUInt(_ v: UInt64) {
        bytes.append(BinaryEntityFormat.uint)
        writeVarint(v)
    }
}

struct BinaryEntityEncoderImpl: Encoder {
    let state: BinaryEncodingState
    let level: Int
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let id = state.openContainer(keyed: true, level: level)
        return KeyedEncodingContainer(KeyedContainer<Key>(state: state, id: id, level: level + 1, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let id = state.openContainer(keyed: false, level: level)
        return UnkeyedContainer(state: state, id: id, level: level + 1, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleContainer(state: state, level: level, codingPath: codingPath)
    }

    struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let state: BinaryEncodingState
        let id: Int
        let level: Int
        let codingPath: [any CodingKey]

        func begin(_ key: Key) throws {
            try state.prepareWrite(container: id, level: level, codingPath: codingPath + [key])
            state.writeKey(key.stringValue)
        }

        mutating func encodeNil(forKey key: Key) throws { try begin(key); state.bytes.append(BinaryEntityFormat.null) }
        mutating func encode(_ value: Bool, forKey key: Key) throws { try begin(key); state.bytes.append(value ? BinaryEntityFormat.true : BinaryEntityFormat.false) }
        mutating func encode(_ value: String, forKey key: Key) throws { try begin(key); state.bytes.append(BinaryEntityFormat.string); state.writeString(value) }
        mutating func encode(_ value: Double, forKey key: Key) throws { try begin(key); state.bytes.append(BinaryEntityFormat.double); state.writeDouble(value) }
        mutating func encode(_ value: Float, forKey key: Key) throws { try begin(key); state.bytes.append(BinaryEntityFormat.float); state.bytes.appendLittleEndian(value.bitPattern) }
        mutating func encode(_ value: Int, forKey key: Key) throws { try begin(key); state.writeInt(Int64(value)) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { try begin(key); state.writeInt(Int64(value)) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { try begin(key); state.writeInt(Int64(value)) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { try begin(key); state.writeInt(Int64(value)) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { try begin(key); state.writeInt(value) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { try begin(key); state.writeUInt(UInt64(value)) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { try begin(key); state.writeUInt(UInt64(value)) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { try begin(key); state.writeUInt(UInt64(value)) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { try begin(key); state.writeUInt(UInt64(value)) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { try begin(key); state.writeUInt(value) }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            try begin(key)
            try state.encodeValue(value, level: level, codingPath: codingPath + [key])
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            // A closed container cannot report the error here (this method cannot throw): the
            // nested container's first write will.
            try? begin(key)
            return BinaryEntityEncoderImpl(state: state, level: level, codingPath: codingPath + [key]).container(keyedBy: keyType)
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            try? begin(key)
            return BinaryEntityEncoderImpl(state: state, level: level, codingPath: codingPath + [key]).unkeyedContainer()
        }

        mutating func superEncoder() -> any Encoder { superEncoder(forKey: Key(stringValue: "super")!) }

        mutating func superEncoder(forKey key: Key) -> any Encoder {
            try? begin(key)
            return BinaryEntityEncoderImpl(state: state, level: level, codingPath: codingPath + [key])
        }
    }

    struct IndexKey: CodingKey {
        var stringValue: String { "Index \(intValue!)" }
        var intValue: Int?
        init(_ index: Int) { intValue = index }
        init?(stringValue: String) { nil }
        init?(intValue: Int) { self.intValue = intValue }
    }

    struct UnkeyedContainer: UnkeyedEncodingContainer {
        let state: BinaryEncodingState
        let id: Int
        let level: Int
        let codingPath: [any CodingKey]
        var count = 0

        init(state: BinaryEncodingState, id: Int, level: Int, codingPath: [any CodingKey]) {
            self.state = state
            self.id = id
            self.level = level
            self.codingPath = codingPath
        }

        mutating func begin() throws {
            try state.prepareWrite(container: id, level: level, codingPath: codingPath + [IndexKey(count)])
            count += 1
        }

        mutating func encodeNil() throws { try begin(); state.bytes.append(BinaryEntityFormat.null) }
        mutating func encode(_ value: Bool) throws { try begin(); state.bytes.append(value ? BinaryEntityFormat.true : BinaryEntityFormat.false) }
        mutating func encode(_ value: String) throws { try begin(); state.bytes.append(BinaryEntityFormat.string); state.writeString(value) }
        mutating func encode(_ value: Double) throws { try begin(); state.bytes.append(BinaryEntityFormat.double); state.writeDouble(value) }
        mutating func encode(_ value: Int) throws { try begin(); state.writeInt(Int64(value)) }
        mutating func encode(_ value: Int64) throws { try begin(); state.writeInt(value) }
        mutating func encode(_ value: UInt64) throws { try begin(); state.writeUInt(value) }
        mutating func encode<T: Encodable>(_ value: T) throws {
            try begin()
            try state.encodeValue(value, level: level, codingPath: codingPath + [IndexKey(count - 1)])
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            try? begin()
            return BinaryEntityEncoderImpl(state: state, level: level, codingPath: codingPath).container(keyedBy: keyType)
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            try? begin()
            return BinaryEntityEncoderImpl(state: state, level: level, codingPath: codingPath).unkeyedContainer()
        }

        mutating func superEncoder() -> any Encoder {
            try? begin()
            return BinaryEntityEncoderImpl(state: state, level: level, codingPath: codingPath)
        }
    }

    struct SingleContainer: SingleValueEncodingContainer {
        let state: BinaryEncodingState
        let level: Int
        let codingPath: [any CodingKey]

        mutating func encodeNil() throws { state.bytes.append(BinaryEntityFormat.null) }
        mutating func encode(_ value: Bool) throws { state.bytes.append(value ? BinaryEntityFormat.true : BinaryEntityFormat.false) }
        mutating func encode(_ value: String) throws { state.bytes.append(BinaryEntityFormat.string); state.writeString(value) }
        mutating func encode(_ value: Double) throws { state.bytes.append(BinaryEntityFormat.double); state.writeDouble(value) }
        mutating func encode(_ value: Float) throws { state.bytes.append(BinaryEntityFormat.float); state.bytes.appendLittleEndian(value.bitPattern) }
        mutating func encode(_ value: Int) throws { state.writeInt(Int64(value)) }
        mutating func encode(_ value: Int8) throws { state.writeInt(Int64(value)) }
        mutating func encode(_ value: Int16) throws { state.writeInt(Int64(value)) }
        mutating func encode(_ value: Int32) throws { state.writeInt(Int64(value)) }
        mutating func encode(_ value: Int64) throws { state.writeInt(value) }
        mutating func encode(_ value: UInt) throws { state.writeUInt(UInt64(value)) }
        mutating func encode(_ value: UInt8) throws { state.writeUInt(UInt64(value)) }
        mutating func encode(_ value: UInt16) throws { state.writeUInt(UInt64(value)) }
        mutating func encode(_ value: UInt32) throws { state.writeUInt(UInt64(value)) }
        mutating func encode(_ value: UInt64) throws { state.writeUInt(value) }
        mutating func encode<T: Encodable>(_ value: T) throws {
            try state.encodeValue(value, level: level, codingPath: codingPath)
        }
    }
}
