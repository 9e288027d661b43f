public import Foundation

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
        case (.string(let a), .string(let b)): a.utf8.elementsEqual(b.utf8)
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .uuid(let uuid):
            hasher.combine(0 as UInt8)
            hasher.combine(uuid)
        case .string(let string):
            // Byte-equal strings are canonically equal, so String's hash agrees with `==`.
            hasher.combine(1 as UInt8)
            hasher.combine(string)
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
    public mutating func writeEntityID(_ id: EntityID) {
        switch id {
        case .uuid(let uuid): writeUInt8(0); writeUUID(uuid)
        case .string(let string): writeUInt8(1); writeString(string)
        }
    }
}

extension BinaryReader {
    /// Reads an entity id written by ``BinaryWriter/writeEntityID(_:)``.
    /// - Throws: ``BinaryDecodingError`` on truncation or an unknown tag.
    public mutating func readEntityID() throws(BinaryDecodingError) -> EntityID {
        let start = offset
        switch try readUInt8() {
        case 0: return .uuid(try readUUID())
        case 1: return .string(try readString())
        case let tag: throw BinaryDecodingError(.invalidValue("unknown entity id tag \(tag)"), at: start)
        }
    }
}
