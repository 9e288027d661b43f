import Foundation

/// How a generic repository's entity is stored, version by version: the schema version written
/// into every event, and upcasters that turn what older versions wrote into today's entity.
///
/// Upcasters run wherever stored entities are read: replay at open, snapshot restore, time
/// travel. They never rewrite the log, so the history stays what was written, forever.
///
/// ```swift
/// struct AccountV1: Decodable { var id: UUID; var name: String }
/// let schema = EntitySchema<Account>(version: 2)
///     .upcasting(from: 1, decoding: AccountV1.self) { Account(id: $0.id, name: $0.name, currency: "EUR") }
/// let accounts = try EventSourcedRepository<Account>(store: store, typeName: "Account", schema: schema)
/// ```
///
/// See Docs/ChangingEntities.md.
public struct EntitySchema<Entity: Codable & Sendable>: Sendable {
    /// The schema version written with every new event.
    public let version: UInt16
    /// How new events and snapshots are written. Reading recognises both (a binary payload
    /// starts with a byte JSON never does), so switching codecs needs no migration.
    public let codec: EntityCodec

    private struct Decoder: Sendable {
        var one: @Sendable ([UInt8]) throws -> Entity
        var many: @Sendable ([UInt8]) throws -> [Entity]
    }
    private var decoders: [UInt16: Decoder] = [:]

    /// Creates a schema at `version` (bump it whenever `Entity`'s coding changes, and add an
    /// upcaster from the old version).
    /// - Parameters:
    ///   - version: The schema version.
    ///   - codec: How entities are written: ``EntityCodec/binary`` (compact, the default) or
    ///     ``EntityCodec/json`` (readable with any tool).
    public init(version: UInt16 = 1, codec: EntityCodec = .binary) {
        self.version = version
        self.codec = codec
    }

    /// Returns a schema that also reads entities written at `oldVersion`, decoded as `Old`
    /// and converted by `upcast`.
    /// - Parameters:
    ///   - oldVersion: An older schema version (below ``version``).
    ///   - type: The `Decodable` shape that version wrote.
    ///   - upcast: Converts an old value into today's entity.
    public func upcasting<Old: Decodable & Sendable>(
        from oldVersion: UInt16, decoding type: Old.Type, _ upcast: @escaping @Sendable (Old) throws -> Entity
    ) -> Self {
        precondition(oldVersion < version, "an upcaster goes from an older version (\(oldVersion)) to the current one (\(version))")
        var copy = self
        copy.decoders[oldVersion] = Decoder(
            one: { try upcast(Self.decode(Old.self, from: $0)) },
            many: { try Self.decode([Old].self, from: $0).map(upcast) })
        return copy
    }

    /// The schema versions this schema reads: the current one and every upcaster's.
    public var readableVersions: [UInt16] { ([version] + decoders.keys).sorted() }

    /// Encodes an entity at the current version.
    func encode(_ entity: Entity) throws -> [UInt8] { try encode(value: entity) }

    /// Encodes entities at the current version, as one array.
    func encode(_ entities: [Entity]) throws -> [UInt8] { try encode(value: entities) }

    private func encode<T: Encodable>(value: T) throws -> [UInt8] {
        switch codec {
        case .binary: try BinaryEntityEncoder().encode(value)
        case .json: Array(try JSONEncoder().encode(value))
        }
    }

    /// Decodes either codec's bytes: the binary format's first byte is never JSON's.
    private static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        if BinaryEntityFormat.isBinary(bytes) { return try BinaryEntityDecoder().decode(type, from: bytes) }
        return try JSONDecoder().decode(type, from: Data(bytes))
    }

    /// Decodes an entity written at `schemaVersion`, upcasting it.
    /// - Throws: ``EntitySchemaError`` for a version without a decoder, or the decoding error.
    func decode(_ bytes: [UInt8], schemaVersion: UInt16) throws -> Entity {
        if schemaVersion == version { return try Self.decode(Entity.self, from: bytes) }
        guard let decoder = decoders[schemaVersion] else { throw missing(schemaVersion) }
        return try decoder.one(bytes)
    }

    /// Decodes an array of entities written at `schemaVersion`, upcasting them.
    func decodeAll(_ bytes: [UInt8], schemaVersion: UInt16) throws -> [Entity] {
        if schemaVersion == version { return try Self.decode([Entity].self, from: bytes) }
        guard let decoder = decoders[schemaVersion] else { throw missing(schemaVersion) }
        return try decoder.many(bytes)
    }

    private func missing(_ schemaVersion: UInt16) -> EntitySchemaError {
        EntitySchemaError(entity: String(describing: Entity.self), found: schemaVersion, current: version, readable: readableVersions)
    }
}

/// How a generic repository writes entities into events and snapshots.
public enum EntityCodec: Sendable, Hashable {
    /// ``BinaryEntityEncoder``'s compact, self-describing binary form (the default).
    case binary
    /// JSON, readable by any tool (`eventkernel history` shows payloads either way).
    case json
}

/// A stored entity was written at a schema version the repository's ``EntitySchema`` cannot
/// read: no upcaster from it, or newer than this build.
public struct EntitySchemaError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The entity type.
    public var entity: String
    /// The schema version found.
    public var found: UInt16
    /// The schema's current version.
    public var current: UInt16
    /// The versions the schema reads.
    public var readable: [UInt16]

    public var description: String {
        if found > current {
            return "\(entity) schema version \(found) is newer than this build's (\(current)); open the store with the code that wrote it"
        }
        return "\(entity) schema version \(found) has no upcaster (current \(current), readable \(readable.map(String.init).joined(separator: ", "))); add .upcasting(from: \(found), decoding: ...) to the repository's EntitySchema"
    }
}
