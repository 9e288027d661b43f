/// A hand-written binary form of an entity, for a domain's hottest type: what its events and
/// snapshots store instead of the `Codable` encoding of ``EntityCodec``.
///
/// `Codable` is general and self-describing: every payload names its keys, and decoding goes
/// through keyed containers, a string per key and the runtime's generic metadata. For a type
/// written and read millions of times that is most of an append and of an open from a snapshot
/// (measured with `perf`: decoding the payload it had just encoded was a third of an append of
/// activities declared on the generic repository). A payload codec writes the fields in a fixed
/// order with no names, and it is given the entity's id instead of storing it again: the event's
/// envelope and the snapshot's row heads already hold it.
///
/// ```swift
/// let codec = EntityPayloadCodec<Reading>(
///     encode: { reading, bytes in
///         withUnsafeBytes(of: reading.value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
///     },
///     decode: { payload, id, _ in
///         guard case .uuid(let uuid) = id, payload.count == 8 else { throw ReadingPayloadError() }
///         return Reading(id: uuid, value: Double(bitPattern: UInt64(littleEndian: payload.loadUnaligned(as: UInt64.self))))
///     })
/// let readings = try EventSourcedRepository<Reading>(
///     store: store, typeName: "Reading", schema: EntitySchema(version: 1, payload: codec))
/// ```
///
/// The format is the domain's to keep: a change to it is a new schema version, and the codec
/// (``decodedVersions``) or an upcaster of the ``EntitySchema`` must go on reading every
/// version the log holds. Payloads are not self-describing, so tools that show events without
/// the application's code (`eventkernel history`) show them as bytes.
public struct EntityPayloadCodec<Entity>: Sendable {
    /// Appends an entity's payload to the bytes given.
    public typealias Encode = @Sendable (_ entity: Entity, _ bytes: inout [UInt8]) throws -> Void
    /// Decodes one payload: the bytes (valid only during the call), the entity's id, and the
    /// schema version it was written at.
    public typealias Decode = @Sendable (_ payload: UnsafeRawBufferPointer, _ id: EntityID, _ schemaVersion: UInt16) throws -> Entity

    let encode: Encode
    let decode: Decode
    /// The schema versions `decode` reads (the current one is always read).
    public let decodedVersions: Set<UInt16>

    /// Creates a payload codec.
    /// - Parameters:
    ///   - decodedVersions: Older schema versions `decode` also reads, beside the schema's
    ///     current one (versions the codec does not read go to the schema's upcasters).
    ///   - encode: Appends an entity's payload, without its id.
    ///   - decode: Decodes a payload written at a schema version it reads; an error marks the
    ///     event undecodable (``RepositoryError/undecodableEvent(_:)``, with its position).
    public init(decodedVersions: Set<UInt16> = [], encode: @escaping Encode, decode: @escaping Decode) {
        self.decodedVersions = decodedVersions
        self.encode = encode
        self.decode = decode
    }
}
