public import Foundation
package import KernelPrimitives

/// The identity of an entity within its type: a UUID or a string.
///
/// UUIDs are the common case and encode in 16 bytes plus a tag; strings cover natural keys and
/// ids numbered per table. Two ids are equal only when they are the same case with the same
/// value: string ids compare **byte for byte** (their UTF-8), never folded by case or Unicode
/// normalization, and a string that happens to spell a UUID stays a string id. An entity's full
/// identity in a store is its stream, ``StreamID``: entity type plus this id.
public enum EntityID: Hashable, Sendable, Codable, CustomStringConvertible {
    /// A UUID identity.
    case uuid(UUID)
    /// A string identity, compared byte for byte.
    case string(String)

    /// Parses text as typed by a person (the CLI's `history <id>`): a UUID when it parses as
    /// one, a string otherwise. Programs that hold a `String` id use ``string(_:)`` (or
    /// `String.entityID`), which never reinterprets the text.
    public init(parsing text: String) {
        if let uuid = UUID(uuidString: text) { self = .uuid(uuid) } else { self = .string(text) }
    }

    public var description: String {
        switch self {
        case .uuid(let uuid): uuid.uuidString
        case .string(let string): string
        }
    }

    public static func == (lhs: EntityID, rhs: EntityID) -> Bool {
        switch (lhs, rhs) {
        case (.uuid(let a), .uuid(let b)): a == b
        case (.string(let a), .string(let b)): a.hasSameUTF8(as: b)
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .uuid(let uuid):
            // Two words, not sixteen byte feeds: this hash is in every append's hot path.
            let u = uuid.uuid
            hasher.combine(UInt64(u.0) | UInt64(u.1) << 8 | UInt64(u.2) << 16 | UInt64(u.3) << 24
                | UInt64(u.4) << 32 | UInt64(u.5) << 40 | UInt64(u.6) << 48 | UInt64(u.7) << 56)
            hasher.combine(UInt64(u.8) | UInt64(u.9) << 8 | UInt64(u.10) << 16 | UInt64(u.11) << 24
                | UInt64(u.12) << 32 | UInt64(u.13) << 40 | UInt64(u.14) << 48 | UInt64(u.15) << 56)
        case .string(let string):
            // The bytes, as `==` compares them (String's own hash normalizes: slower, and
            // coarser than needed).
            hasher.combine(1 as UInt8)
            var string = string
            string.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    private enum CodingKeys: String, CodingKey { case uuid, string }

    /// Decodes `{"uuid": "…"}` or `{"string": "…"}`: the case is kept, so a string id that
    /// spells a UUID reads back as the same string id.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let uuid = try container.decodeIfPresent(UUID.self, forKey: .uuid) {
            self = .uuid(uuid)
        } else {
            self = .string(try container.decode(String.self, forKey: .string))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .uuid(let uuid): try container.encode(uuid, forKey: .uuid)
        case .string(let string): try container.encode(string, forKey: .string)
        }
    }
}

/// A type that names an entity: repositories key entities by `EntityID`.
public protocol EntityIDConvertible: Hashable, Sendable {
    /// This value as an ``EntityID``.
    var entityID: EntityID { get }
}

extension EntityID: EntityIDConvertible {
    public var entityID: EntityID { self }
}

extension UUID: EntityIDConvertible {
    public var entityID: EntityID { .uuid(self) }
}

extension String: EntityIDConvertible {
    /// The string as a string id, exactly (see ``EntityID``).
    public var entityID: EntityID { .string(self) }
}

extension Int: EntityIDConvertible {
    /// The decimal text as a string id: `100` is `.string("100")`.
    public var entityID: EntityID { .string(String(self)) }
}

extension BinaryWriter {
    /// Writes an entity id: tag 0 and 16 bytes for a UUID, tag 1 and a string otherwise.
    package mutating func writeEntityID(_ id: EntityID) {
        switch id {
        case .uuid(let uuid): writeUInt8(0); writeUUID(uuid)
        case .string(let string): writeUInt8(1); writeString(string)
        }
    }
}

extension BinaryReader {
    /// Reads an entity id written by `BinaryWriter.writeEntityID(_:)`.
    /// - Throws: ``BinaryDecodingError`` on truncation or an unknown tag.
    package mutating func readEntityID() throws(BinaryDecodingError) -> EntityID {
        let start = offset
        switch try readUInt8() {
        case 0: return .uuid(try readUUID())
        case 1: return .string(try readString())
        case let tag: throw BinaryDecodingError(.invalidValue("unknown entity id tag \(tag)"), at: start)
        }
    }
}
