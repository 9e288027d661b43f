public import Foundation

/// The identity of an entity an event is about: a UUID or a string.
///
/// UUIDs are the common case and encode in 16 bytes plus a tag; strings cover natural keys.
/// `Codable` uses the textual form; decoding a string that parses as a UUID yields ``uuid(_:)``,
/// so a given textual id always maps to the same `EntityID`.
public enum EntityID: Hashable, Sendable, Codable, CustomStringConvertible {
    /// A UUID identity.
    case uuid(UUID)
    /// A string identity.
    case string(String)

    /// Creates an id from text: a UUID when it parses as one, a string otherwise.
    public init(_ text: String) {
        if let uuid = UUID(uuidString: text) { self = .uuid(uuid) } else { self = .string(text) }
    }

    public var description: String {
        switch self {
        case .uuid(let uuid): uuid.uuidString
        case .string(let string): string
        }
    }

    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
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
    public var entityID: EntityID { EntityID(self) }
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
