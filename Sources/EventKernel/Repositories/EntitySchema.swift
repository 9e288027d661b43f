import Foundation
import KernelPrimitives

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
    /// The domain's hand-written payload form, when it has one: it then writes every new event
    /// and snapshot, and reads the versions it declares (see ``EntityPayloadCodec``).
    public let payloadCodec: EntityPayloadCodec<Entity>?

    private struct Decoder: Sendable {
        var one: @Sendable ([UInt8]) throws -> Entity
        var many: @Sendable ([UInt8]) throws -> [Entity]
    }
    private var decoders: [UInt16: Decoder] = [:]
    /// The field events registered (``recording(_:)``), by name.
    var fieldEvents: [String: RegisteredFieldEvent<Entity>] = [:]

    /// Creates a schema at `version` (bump it whenever `Entity`'s coding changes, and add an
    /// upcaster from the old version).
    /// - Parameters:
    ///   - version: The schema version.
    ///   - codec: How entities are written: ``EntityCodec/binary`` (compact, the default) or
    ///     ``EntityCodec/json`` (readable with any tool).
    public init(version: UInt16 = 1, codec: EntityCodec = .binary) {
        self.version = version
        self.codec = codec
        self.payloadCodec = nil
    }

    /// Creates a schema at `version` whose entities are written by a hand-written codec.
    /// - Parameters:
    ///   - version: The schema version (bump it whenever the payload's form changes, and keep
    ///     reading the old one: in the codec's `decodedVersions`, or with an upcaster).
    ///   - payload: Writes and reads the entities' payloads.
    public init(version: UInt16 = 1, payload: EntityPayloadCodec<Entity>) {
        self.version = version
        self.codec = .binary
        self.payloadCodec = payload
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

    /// The schema versions this schema reads: the current one, the payload codec's and every
    /// upcaster's.
    public var readableVersions: [UInt16] {
        Set([version] + decoders.keys + (payloadCodec?.decodedVersions ?? [])).sorted()
    }

    /// Encodes an entity at the current version.
    func encode(_ entity: Entity) throws -> [UInt8] {
        guard let payloadCodec else { return try encode(value: entity) }
        var bytes: [UInt8] = []
        try payloadCodec.encode(entity, &bytes)
        return bytes
    }

    /// Encodes entities at the current version, as one snapshot part: an array of the entity
    /// codec's, or with a payload codec the entity count and then each payload after its
    /// length (varints), in order.
    func encode(_ entities: [Entity]) throws -> [UInt8] {
        guard let payloadCodec else { return try encode(value: entities) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(entities.count * 16)
        Varint.encode(UInt64(entities.count), into: &bytes)
        var payload: [UInt8] = []
        for entity in entities {
            payload.removeAll(keepingCapacity: true)
            try payloadCodec.encode(entity, &payload)
            Varint.encode(UInt64(payload.count), into: &bytes)
            bytes.append(contentsOf: payload)
        }
        return bytes
    }

    /// Whether snapshot parts written at `schemaVersion` are a payload codec's (their entities'
    /// ids are then given to ``decodeAll(_:schemaVersion:ids:)``).
    func hasPayloadParts(schemaVersion: UInt16) -> Bool { payloadCodecReads(schemaVersion) != nil }

    /// The number of entities in a snapshot part written at `schemaVersion`, when a payload
    /// codec wrote it (its first varint); `nil` for the entity codec's parts, which say their
    /// count only once decoded.
    /// - Throws: ``BinaryDecodingError`` when the part does not start with a count.
    func payloadPartCount(_ bytes: [UInt8], schemaVersion: UInt16) throws -> Int? {
        guard payloadCodecReads(schemaVersion) != nil else { return nil }
        var offset = 0
        let count: UInt64
        do throws(Varint.Failure) { count = try Varint.decode(bytes, at: &offset) } catch {
            throw BinaryDecodingError(error == .truncated ? .truncated(needed: 1) : .malformedVarint, at: 0)
        }
        guard count <= UInt64(bytes.count) else { throw BinaryDecodingError(.invalidValue("\(count) payloads in \(bytes.count) bytes"), at: 0) }
        return Int(count)
    }

    /// Whether the payload codec reads what `schemaVersion` wrote (else the upcasters do).
    private func payloadCodecReads(_ schemaVersion: UInt16) -> EntityPayloadCodec<Entity>? {
        guard let payloadCodec, schemaVersion == version || payloadCodec.decodedVersions.contains(schemaVersion) else { return nil }
        return payloadCodec
    }

    private func encode<T: Encodable>(value: T) throws -> [UInt8] {
        switch codec {
        case .binary: try BinaryEntityEncoder().encode(value)
        case .json: Array(try JSONEncoder.deterministic().encode(value))
        }
    }

    /// Decodes either codec's bytes: the binary format's first byte is never JSON's.
    private static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        if BinaryEntityFormat.isBinary(bytes) { return try BinaryEntityDecoder().decode(type, from: bytes) }
        return try JSONDecoder().decode(type, from: Data(bytes))
    }

    /// Decodes the entity `id` written at `schemaVersion`, upcasting it.
    /// - Throws: ``EntitySchemaError`` for a version without a decoder, or the decoding error.
    func decode(_ bytes: [UInt8], schemaVersion: UInt16, id: EntityID) throws -> Entity {
        if let payloadCodec = payloadCodecReads(schemaVersion) {
            return try bytes.withUnsafeBytes { try payloadCodec.decode($0, id, schemaVersion) }
        }
        if schemaVersion == version && payloadCodec == nil { return try Self.decode(Entity.self, from: bytes) }
        guard let decoder = decoders[schemaVersion] else { throw missing(schemaVersion) }
        return try decoder.one(bytes)
    }

    /// Decodes a snapshot part (see ``encode(_:)-([Entity])``) written at `schemaVersion`,
    /// upcasting its entities; `ids` are the part's entities' ids (a payload codec's parts do
    /// not hold them), ignored by the entity codec.
    /// - Throws: ``EntitySchemaError`` for a version without a decoder, ``BinaryDecodingError``
    ///   for a part whose payloads do not match `ids`, or the decoding error.
    func decodeAll(_ bytes: [UInt8], schemaVersion: UInt16, ids: ArraySlice<EntityID>) throws -> [Entity] {
        if let payloadCodec = payloadCodecReads(schemaVersion) {
            var entities: [Entity] = []
            entities.reserveCapacity(ids.count)
            try bytes.withUnsafeBytes { raw in
                var offset = 0
                guard try payloadPartCount(bytes, schemaVersion: schemaVersion) == ids.count else {
                    throw BinaryDecodingError(.invalidValue("a part of \(ids.count) entities holds another number of payloads"), at: 0)
                }
                _ = try? Varint.decode(raw, at: &offset)
                for id in ids {
                    let start = offset
                    let length: UInt64
                    do throws(Varint.Failure) { length = try Varint.decode(raw, at: &offset) } catch {
                        throw BinaryDecodingError(error == .truncated ? .truncated(needed: 1) : .malformedVarint, at: start)
                    }
                    guard length <= UInt64(raw.count - offset) else {
                        throw BinaryDecodingError(.invalidValue("a payload of \(length) bytes in \(raw.count - offset)"), at: offset)
                    }
                    let end = offset + Int(length)
                    entities.append(try payloadCodec.decode(UnsafeRawBufferPointer(rebasing: raw[offset..<end]), id, schemaVersion))
                    offset = end
                }
                guard offset == raw.count else {
                    throw BinaryDecodingError(.invalidValue("\(raw.count - offset) bytes after \(ids.count) payloads"), at: offset)
                }
            }
            return entities
        }
        if schemaVersion == version && payloadCodec == nil { return try Self.decode([Entity].self, from: bytes) }
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
