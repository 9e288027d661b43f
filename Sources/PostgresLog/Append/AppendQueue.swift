#if PostgreSQL
import EventKernel
import EventLog
import Foundation
import PostgresNIO

/// One append: its records decoded into rows (on the appender's thread, when it enqueued),
/// and who to tell.
struct QueuedBatch {
    var entries: [LogEntry]
    var rows: [EventRow]
    /// Each stream of the batch, once, in order of first appearance, with its first and last
    /// version in the batch.
    var streams: [(stream: StreamID, key: StreamKey, first: Int64, last: Int64)]
    var bytes: Int
    /// How many rounds carried it whose connection was lost before they committed.
    var attempts = 0
    var completion: @Sendable (Result<Range<LogPosition>, LogError>) -> Void

    /// Decodes `entries`.
    /// - Parameter consecutiveVersions: Whether a stream's versions in the batch must follow
    ///   each other (an append's must; an imported history is taken as it is).
    /// - Throws: ``LogError`` with code ``LogError/Code/invalidArgument`` for an empty batch, a
    ///   record that is not an event, or a stream whose versions in the batch are not consecutive.
    init(entries: [LogEntry], compression: CompressionCodec, consecutiveVersions: Bool = true,
         completion: @escaping @Sendable (Result<Range<LogPosition>, LogError>) -> Void) throws(LogError) {
        guard !entries.isEmpty else { throw LogError(.invalidArgument, "an append needs at least one record") }
        self.entries = entries
        self.completion = completion
        rows = []
        rows.reserveCapacity(entries.count)
        streams = []
        bytes = 0
        var seen: [StreamKey: Int] = [:]
        for (index, entry) in entries.enumerated() {
            let row = try EventRow(entry: entry, index: index, compression: compression)
            let key = row.streamKey
            if let known = seen[key] {
                guard !consecutiveVersions || row.streamVersion == streams[known].last + 1 else {
                    throw LogError(.invalidArgument, "record \(index) of the batch has version \(row.streamVersion) of its stream after version \(streams[known].last): versions in a batch must follow each other")
                }
                streams[known].last = row.streamVersion
            } else {
                seen[key] = streams.count
                streams.append((row.stream, key, row.streamVersion, row.streamVersion))
            }
            bytes += row.payload.readableBytes + row.entityID.utf8.count + row.eventType.utf8.count + 64
            rows.append(row)
        }
    }
}

/// The appends waiting for the committer.
struct AppendQueue {
    var batches: [QueuedBatch] = []
    var closed = false

    /// Takes the next round: the queued batches in order, up to the limits (at least one).
    mutating func takeRound(maximumRecords: Int, maximumBytes: Int) -> [QueuedBatch]? {
        guard !batches.isEmpty else { return nil }
        var records = 0, bytes = 0, count = 0
        for batch in batches {
            if count > 0, records + batch.rows.count > maximumRecords || bytes + batch.bytes > maximumBytes { break }
            records += batch.rows.count
            bytes += batch.bytes
            count += 1
        }
        let round = Array(batches.prefix(count))
        batches.removeFirst(count)
        return round
    }
}

/// A round's outcome, for the completer: each batch's positions or error.
struct Completion {
    var batches: [QueuedBatch]
    var results: [Result<Range<LogPosition>, LogError>]
}

/// A round's batches as the arguments of `append_round(...)`.
struct AppendRound {
    let id: UUID
    let batches: [QueuedBatch]
    /// The round's distinct streams (1-based in the query), with their identities for errors.
    private(set) var streams: [StreamID] = []

    init(_ batches: [QueuedBatch]) {
        self.id = UUID()
        self.batches = batches
    }

    /// The call: the round's id, 21 arrays, and `origin` (the instance, named in the
    /// notification so that it can skip its own).
    mutating func query(schema: String, origin: String) -> PostgresQuery {
        var index: [StreamKey: Int32] = [:]
        var sType: [String] = [], sKind: [Int16] = [], sID: [String] = []
        var cBatch: [Int32] = [], cStream: [Int32] = [], cFirst: [Int64] = [], cLast: [Int64] = []
        let count = batches.reduce(0) { $0 + $1.rows.count }
        var rBatch: [Int32] = [], rOffset: [Int32] = [], rStream: [Int32] = [], rVersion: [Int64] = []
        var rEventType: [String] = [], rSchemaVersion: [Int32] = [], rMeta: [Int16] = []
        var rCorrelation: [String] = [], rActor: [String] = [], rRecordedAt: [Int64] = []
        var rCodec: [Int16] = [], rLength: [Int32] = [], rPayload: [ByteBuffer] = []
        rBatch.reserveCapacity(count); rOffset.reserveCapacity(count); rStream.reserveCapacity(count)
        rVersion.reserveCapacity(count); rEventType.reserveCapacity(count); rSchemaVersion.reserveCapacity(count)
        rMeta.reserveCapacity(count); rCorrelation.reserveCapacity(count); rActor.reserveCapacity(count)
        rRecordedAt.reserveCapacity(count); rCodec.reserveCapacity(count); rLength.reserveCapacity(count)
        rPayload.reserveCapacity(count)
        func streamIndex(_ key: StreamKey, _ stream: StreamID) -> Int32 {
            if let known = index[key] { return known }
            streams.append(stream)
            sType.append(key.type.value); sKind.append(key.kind); sID.append(key.id.value)
            let new = Int32(streams.count)
            index[key] = new
            return new
        }
        for (b, batch) in batches.enumerated() {
            let batchNumber = Int32(b + 1)
            for stream in batch.streams {
                cBatch.append(batchNumber)
                cStream.append(streamIndex(stream.key, stream.stream))
                cFirst.append(stream.first)
                cLast.append(stream.last)
            }
            for (offset, row) in batch.rows.enumerated() {
                rBatch.append(batchNumber)
                rOffset.append(Int32(offset))
                rStream.append(index[row.streamKey]!)
                rVersion.append(row.streamVersion)
                rEventType.append(row.eventType)
                rSchemaVersion.append(row.schemaVersion)
                rMeta.append((row.correlationID != nil ? 1 : 0) | (row.actor != nil ? 2 : 0))
                rCorrelation.append(row.correlationID ?? "")
                rActor.append(row.actor ?? "")
                rRecordedAt.append(row.recordedAt)
                rCodec.append(row.codec)
                rLength.append(row.length)
                rPayload.append(row.payload)
            }
        }
        var binds = PostgresBindings(capacity: 23)
        binds.append(id)
        binds.append(batches.map { Int32($0.rows.count) })
        binds.append(sType); binds.append(sKind); binds.append(sID)
        binds.append(cBatch); binds.append(cStream); binds.append(cFirst); binds.append(cLast)
        binds.append(rBatch); binds.append(rOffset); binds.append(rStream); binds.append(rVersion)
        binds.append(rEventType); binds.append(rSchemaVersion); binds.append(rMeta)
        binds.append(rCorrelation); binds.append(rActor); binds.append(rRecordedAt)
        binds.append(rCodec); binds.append(rLength); binds.append(rPayload)
        binds.append(origin)
        let placeholders = (1...23).map { "$\($0)" }.joined(separator: ", ")
        return PostgresQuery(unsafeSQL: #"SELECT out_batch, out_first, out_stream, out_expected, out_actual FROM "\#(schema)".append_round(\#(placeholders))"#, binds: binds)
    }
}
#endif
