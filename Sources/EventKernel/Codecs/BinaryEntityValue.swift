package import Foundation

/// A binary entity payload read without its type: the tree of tagged values the format
/// stores (``BinaryEntityEncoder``), for tools that show or copy events without the
/// application's code (`eventkernel export`, `history`).
///
/// Reading goes through the decoder's own state (tags, key table, limits), so this is not a
/// second parser of the format; writing goes through ``BinaryEntityEncoder`` (the value is
/// `Encodable`), so a tree read and written again decodes as the original did.
package indirect enum BinaryEntityValue: Equatable, Sendable {
    case null
    case bool(Bool)
    /// A signed integer (the `int` tag, zigzag).
    case int(Int64)
    /// An unsigned integer (the `uint` tag).
    case uint(UInt64)
    case double(Double)
    case float(Float)
    case string(String)
    case uuid(UUID)
    /// A date: seconds since the reference date (2001-01-01T00:00:00Z), as the format stores it.
    case date(Date)
    case data([UInt8])
    /// A decimal, in either of the format's forms (text or parts).
    case decimal(Decimal)
    /// A URL, as its text.
    case url(String)
    /// A keyed container: its entries in stored order.
    case keyed([(key: String, value: BinaryEntityValue)])
    /// An unkeyed container (also what `Codable` makes of a dictionary with non-string keys).
    case unkeyed([BinaryEntityValue])

    package static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.int(let a), .int(let b)): a == b
        case (.uint(let a), .uint(let b)): a == b
        case (.double(let a), .double(let b)): a.bitPattern == b.bitPattern
        case (.float(let a), .float(let b)): a.bitPattern == b.bitPattern
        case (.string(let a), .string(let b)): a == b
        case (.uuid(let a), .uuid(let b)): a == b
        case (.date(let a), .date(let b)): a.timeIntervalSinceReferenceDate.bitPattern == b.timeIntervalSinceReferenceDate.bitPattern
        case (.data(let a), .data(let b)): a == b
        case (.decimal(let a), .decimal(let b)): a.isNaN ? b.isNaN : a == b
        case (.url(let a), .url(let b)): a == b
        case (.keyed(let a), .keyed(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        case (.unkeyed(let a), .unkeyed(let b)): a == b
        default: false
        }
    }

    /// Reads a binary entity payload (starting with the format's `0xFF`) into its tree.
    /// - Throws: `DecodingError.dataCorrupted` for bytes that are not a whole, well-formed
    ///   payload (with the byte offset), as ``BinaryEntityDecoder`` does, and for a keyed
    ///   container holding a key twice (the typed decoder reads the first, a JSON reader the
    ///   last: no one answer).
    package static func decode(_ bytes: [UInt8]) throws -> BinaryEntityValue {
        // The one walker of the format's values (`walk(_:into:)`), building the tree.
        var builder = TreeBuilder()
        _ = try walk(bytes, into: &builder)
        return builder.result!
    }

    /// The deepest nesting of values the binary format reads (``BinaryDecodingState/skip``).
    package static let maxDepth = 512

    /// Whether `bytes` start as a binary entity payload does (JSON never starts so).
    package static func isBinary(_ bytes: [UInt8]) -> Bool { BinaryEntityFormat.isBinary(bytes) }

    /// Whether a binary entity payload's value is a keyed container, by its first tag alone
    /// (not checked: ``decode(_:)`` says whether the rest is whole), so that a tool skips
    /// decoding payloads that cannot be an entity.
    package static func startsKeyed(_ bytes: [UInt8]) -> Bool {
        bytes.count > 1 && isBinary(bytes) && bytes[1] == BinaryEntityFormat.keyed
    }

    /// The payload of this tree: ``BinaryEntityEncoder``'s bytes.
    /// - Throws: `EncodingError` for a URL whose text is not a URL.
    package func encoded() throws -> [UInt8] { try BinaryEntityEncoder().encode(self) }
}

/// Builds a ``BinaryEntityValue`` from a walk: the containers open so far, innermost last.
private struct TreeBuilder: BinaryEntityVisitor {
    private var open: [(keys: [String], values: [BinaryEntityValue])] = []
    private(set) var result: BinaryEntityValue?

    private mutating func put(_ value: BinaryEntityValue) {
        if open.isEmpty { result = value } else { open[open.count - 1].values.append(value) }
    }

    mutating func visitNull() { put(.null) }
    mutating func visitBool(_ value: Bool) { put(.bool(value)) }
    mutating func visitInt(_ value: Int64) { put(.int(value)) }
    mutating func visitUInt(_ value: UInt64) { put(.uint(value)) }
    mutating func visitDouble(_ value: Double) { put(.double(value)) }
    mutating func visitFloat(_ value: Float) { put(.float(value)) }
    mutating func visitString(_ value: String) { put(.string(value)) }
    mutating func visitUUID(_ value: UUID) { put(.uuid(value)) }
    mutating func visitDate(_ value: Date) { put(.date(value)) }
    mutating func visitData(_ bytes: UnsafeBufferPointer<UInt8>) { put(.data(Array(bytes))) }
    mutating func visitDecimal(_ value: Decimal) { put(.decimal(value)) }
    mutating func visitURL(_ text: String) { put(.url(text)) }
    mutating func beginKeyed() { open.append(([], [])) }
    mutating func visitKey(_ key: String) { open[open.count - 1].keys.append(key) }
    mutating func endKeyed(count: Int) {
        let container = open.removeLast()
        put(.keyed(zip(container.keys, container.values).map { (key: $0, value: $1) }))
    }
    mutating func beginUnkeyed() { open.append(([], [])) }
    mutating func endUnkeyed(count: Int) { put(.unkeyed(open.removeLast().values)) }
}

extension BinaryEntityValue: Encodable {
    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    package func encode(to encoder: any Encoder) throws {
        switch self {
        case .keyed(let entries):
            var container = encoder.container(keyedBy: Key.self)
            for entry in entries { try container.encode(entry.value, forKey: Key(entry.key)) }
        case .unkeyed(let values):
            var container = encoder.unkeyedContainer()
            for value in values { try container.encode(value) }
        default:
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .bool(let v): try container.encode(v)
            case .int(let v): try container.encode(v)
            case .uint(let v): try container.encode(v)
            case .double(let v): try container.encode(v)
            case .float(let v): try container.encode(v)
            case .string(let v): try container.encode(v)
            case .uuid(let v): try container.encode(v)
            case .date(let v): try container.encode(v)
            case .data(let v): try container.encode(Data(v))
            case .decimal(let v): try container.encode(v)
            case .url(let text):
                guard let url = URL(string: text) else {
                    throw EncodingError.invalidValue(text, .init(codingPath: encoder.codingPath, debugDescription: "\"\(text)\" is not a URL"))
                }
                try container.encode(url)
            case .keyed, .unkeyed: break
            }
        }
    }
}
