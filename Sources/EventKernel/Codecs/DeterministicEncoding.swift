import Foundation

/// The one rule that makes EventKernel's encodings of a value the same bytes in every process:
/// `Dictionary` and `Set` iterate in an order seeded per process (Swift's hashing), so the
/// entity coders write them in their keys' (elements') sorted order instead. Snapshots written
/// twice at the same position are then byte-identical, which incremental backups and content
/// hashes rely on (Docs/FileFormat.md, "Snapshot bodies").
///
/// Only the order changes: a sorted dictionary is written in the container Swift's own
/// `Dictionary.encode(to:)` uses for its key type, so every decoder reads it unchanged.
/// Dictionaries whose keys are not `Comparable` (and sets of non-`Comparable` elements) keep
/// their iteration order.
protocol DeterministicallyEncodable {
    /// Encodes the value as its `Encodable` conformance does, in sorted order.
    func encodeDeterministically(to encoder: any Encoder) throws
}

/// A coding key for any string or integer, as `Dictionary`'s own coding uses.
struct DeterministicCodingKey: CodingKey {
    let stringValue: String
    let intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue; self.intValue = nil }
    init(intValue: Int) { self.stringValue = String(intValue); self.intValue = intValue }
    init(_ key: any CodingKey) { self.stringValue = key.stringValue; self.intValue = key.intValue }
}

extension Dictionary: DeterministicallyEncodable where Key: Encodable & Comparable, Value: Encodable {
    func encodeDeterministically(to encoder: any Encoder) throws {
        let sorted = self.sorted { $0.key < $1.key }
        // The same containers, in the same order of preference, as `Dictionary.encode(to:)`.
        if Key.self == String.self {
            var container = encoder.container(keyedBy: DeterministicCodingKey.self)
            for (key, value) in sorted { try container.encode(value, forKey: DeterministicCodingKey(stringValue: key as! String)) }
        } else if Key.self == Int.self {
            var container = encoder.container(keyedBy: DeterministicCodingKey.self)
            for (key, value) in sorted { try container.encode(value, forKey: DeterministicCodingKey(intValue: key as! Int)) }
        } else if Key.self is any CodingKeyRepresentable.Type {
            var container = encoder.container(keyedBy: DeterministicCodingKey.self)
            for (key, value) in sorted {
                try container.encode(value, forKey: DeterministicCodingKey((key as! any CodingKeyRepresentable).codingKey))
            }
        } else {
            var container = encoder.unkeyedContainer()
            for (key, value) in sorted {
                try container.encode(key)
                try container.encode(value)
            }
        }
    }
}

extension Set: DeterministicallyEncodable where Element: Encodable & Comparable {
    func encodeDeterministically(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        for element in self.sorted() { try container.encode(element) }
    }
}

extension JSONEncoder {
    /// A JSON encoder that writes the same bytes for the same value in every process: object
    /// keys sorted (which covers dictionaries with string and integer keys).
    static func deterministic() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }
}

extension EntityID {
    /// The order snapshots write ids in, the same in every process: UUIDs before strings,
    /// UUIDs by their 16 bytes, strings by their UTF-8 bytes (as ``==`` compares them).
    static func canonicallyPrecedes(_ a: EntityID, _ b: EntityID) -> Bool {
        switch (a, b) {
        case (.uuid(let x), .uuid(let y)):
            return withUnsafeBytes(of: x.uuid) { xs in withUnsafeBytes(of: y.uuid) { ys in xs.lexicographicallyPrecedes(ys) } }
        case (.string(let x), .string(let y)):
            return x.utf8.lexicographicallyPrecedes(y.utf8)
        case (.uuid, .string): return true
        case (.string, .uuid): return false
        }
    }
}
