#if PostgreSQL
import EventKernel
import EventLog
import Foundation
import NIOCore
import PostgresNIO
import KernelPrimitives

/// One event as the `events` table holds it: the envelope's fields as columns, the payload
/// compressed as the local log compresses.
///
/// Why columns and not the record's bytes: the stream and its version must be columns for the
/// unique index that is the cross-instance concurrency check, and an operator reading the
/// table with `psql` should see events, not blobs. Why here and not in `LogEntry`: EventLog
/// stays bytes in, bytes out. The envelope's layout has one definition,
/// `EventEnvelope+Encoding.swift` in EventKernel: a row is made by decoding a record with
/// `EventEnvelope(recordPayload:position:timestamp:)` and a record is made back from a row
/// with `EventEnvelope.encodeRecordPayload`, so nothing here knows the byte layout, and a
/// record read back is the one the store would have written (Docs/ScaleOut.md, "The schema").
struct EventRow: Sendable {
    /// The stream, as EventKernel names it.
    var stream: StreamID
    var recordedAt: Int64
    var entityType: String
    /// 0: a UUID id (its canonical text in ``entityID``); 1: a string id.
    var entityIDKind: Int16
    var entityID: String
    var streamVersion: Int64
    var eventType: String
    var schemaVersion: Int32
    var correlationID: String?
    var actor: String?
    var codec: Int16
    /// The payload's length before compression.
    var length: Int32
    /// The payload as stored (compressed when ``codec`` says so).
    var payload: ByteBuffer

    /// The columns a read selects, in ``init(row:schema:)``'s order.
    static let selectList = "position, recorded_at, entity_type, entity_id_kind, entity_id, stream_version, event_type, schema_version, correlation_id, actor, payload_codec, payload_length, payload"

    /// The stream, as the unique index keys it.
    var streamKey: StreamKey { StreamKey(type: ExactString(entityType), kind: entityIDKind, id: ExactString(entityID)) }

    /// Decodes a record the store encoded.
    /// - Parameters:
    ///   - entry: The record to append.
    ///   - index: Its index in the batch, for the error.
    ///   - compression: How to store the payload.
    /// - Throws: ``LogError`` with code ``LogError/Code/invalidArgument`` when the record is not
    ///   an event envelope (a `PostgresLog` stores events, not arbitrary bytes).
    init(entry: LogEntry, index: Int, compression: CompressionCodec) throws(LogError) {
        let envelope: EventEnvelope
        do {
            envelope = try EventEnvelope(recordPayload: entry.payload, position: 0, timestamp: entry.timestamp)
        } catch {
            throw LogError(.invalidArgument, "record \(index) of the batch is not an EventKernel event envelope (a PostgresLog stores events): \(error)", cause: error)
        }
        guard envelope.entityVersion <= UInt64(Int64.max), envelope.payload.count <= Int(Int32.max) else {
            throw LogError(.tooLarge, "record \(index) of the batch has a stream version or payload size beyond what the table holds")
        }
        for text in [envelope.eventType, envelope.stream.entityType, envelope.stream.entityID.description,
                     envelope.metadata.correlationID ?? "", envelope.metadata.actor ?? ""] where text.utf8.contains(0) {
            throw LogError(.invalidArgument, "record \(index) of the batch has a NUL character in its event type, stream or metadata, which PostgreSQL text cannot hold")
        }
        stream = envelope.stream
        recordedAt = entry.timestamp.nanosecondsSince1970
        entityType = envelope.stream.entityType
        switch envelope.stream.entityID {
        case .uuid(let uuid):
            entityIDKind = 0
            entityID = uuid.uuidString
        case .string(let string):
            entityIDKind = 1
            entityID = string
        }
        streamVersion = Int64(envelope.entityVersion)
        eventType = envelope.eventType
        schemaVersion = Int32(envelope.schemaVersion)
        correlationID = envelope.metadata.correlationID
        actor = envelope.metadata.actor
        length = Int32(envelope.payload.count)
        (codec, payload) = try Self.store(envelope.payload, compression: compression)
    }

    /// Payloads shorter than this are stored as they are: LZ4 almost never shrinks them, and
    /// trying costs every append.
    static let smallestCompressed = 128

    /// The payload as stored: LZ4 when it shrinks (as the segmented log stores a batch).
    private static func store(_ bytes: [UInt8], compression: CompressionCodec) throws(LogError) -> (Int16, ByteBuffer) {
        if compression == .lz4, bytes.count >= smallestCompressed {
            var compressed: [UInt8] = []
            let size: Int
            do throws(CompressionError) {
                size = try bytes.withBytes { (source) throws(CompressionError) in try LZ4Block.compress(source, appendingTo: &compressed) }
            } catch {
                throw LogError(error)
            }
            if size < bytes.count { return (Int16(CompressionCodec.lz4.rawValue), ByteBuffer(bytes: compressed)) }
        }
        return (Int16(CompressionCodec.none.rawValue), ByteBuffer(bytes: bytes))
    }

    /// Reads a row selected with ``selectList``.
    /// - Throws: ``LogError`` with code ``LogError/Code/corruption`` naming the position when
    ///   the row does not make an event.
    static func record(from row: PostgresRow, table: String) throws -> LogRecord {
        try recordAndStoredSize(from: row, table: table).record
    }

    /// ``record(from:table:)``, and the payload's size as stored.
    static func recordAndStoredSize(from row: PostgresRow, table: String) throws -> (record: LogRecord, stored: Int) {
        let (position, recordedAt, entityType, kind, entityID, version, eventType, schemaVersion, correlationID, actor, codec, length, stored) =
            try row.decode((Int64, Int64, String, Int16, String, Int64, String, Int32, String?, String?, Int16, Int32, ByteBuffer).self)
        func damaged(_ what: String) -> LogError {
            LogError(.corruption, "the row at position \(position) of \(table) \(what)", file: table, position: position >= 0 ? UInt64(position) : nil)
        }
        guard position >= 0, version >= 0, (0...Int32(UInt16.max)).contains(schemaVersion), length >= 0 else {
            throw damaged("has a negative position, version or length, or a schema version beyond 65535")
        }
        let id: EntityID
        switch kind {
        case 0:
            guard let uuid = UUID(uuidString: entityID) else { throw damaged("has entity id kind 0 (UUID) but id \"\(entityID)\"") }
            id = .uuid(uuid)
        case 1: id = .string(entityID)
        default: throw damaged("has an unknown entity id kind \(kind)")
        }
        let payload: [UInt8]
        switch codec {
        case Int16(CompressionCodec.none.rawValue):
            guard stored.readableBytes == Int(length) else { throw damaged("holds \(stored.readableBytes) payload bytes where it records \(length)") }
            payload = Array(stored.readableBytesView)
        case Int16(CompressionCodec.lz4.rawValue):
            var bytes = [UInt8](repeating: 0, count: Int(length))
            do {
                try stored.withUnsafeReadableBytes { source in
                    try bytes.withUnsafeMutableBytes { destination in try LZ4Block.decompress(source, into: destination) }
                }
            } catch {
                throw damaged("has a payload that does not decompress to its \(length) bytes: \(error)")
            }
            payload = bytes
        default:
            throw damaged("has an unknown payload codec \(codec)")
        }
        let bytes = EventEnvelope.encodeRecordPayload(
            eventType: eventType, schemaVersion: UInt16(schemaVersion), stream: StreamID(entityType, id),
            entityVersion: UInt64(version), metadata: EventMetadata(correlationID: correlationID, actor: actor),
            payload: payload)
        return (LogRecord(position: UInt64(position), timestamp: LogTimestamp(nanosecondsSince1970: recordedAt), payload: bytes), stored.readableBytes)
    }
}

/// A stream as the table's unique index keys it: compared byte for byte, as PostgreSQL
/// compares text and as EventKernel compares ids (`String`'s `==` would merge canonically
/// equivalent spellings into one stream).
struct StreamKey: Hashable, Sendable {
    var type: ExactString
    var kind: Int16
    var id: ExactString
}
#endif
