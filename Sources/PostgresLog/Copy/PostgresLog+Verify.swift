#if PostgreSQL
public import EventLog
import Foundation
import PostgresNIO

extension PostgresLog {
    /// What ``verify()`` found.
    public struct Verification: Sendable {
        /// The records read.
        public var records: UInt64 = 0
        /// Payload bytes as stored, and before compression.
        public var storedPayloadBytes: Int64 = 0
        public var uncompressedPayloadBytes: Int64 = 0
        /// Damage, each with the position it concerns (empty: intact).
        public var problems: [LogError] = []
        /// Whether nothing was found.
        public var isIntact: Bool { problems.isEmpty }
    }

    /// Reads every row in position order and checks what the log promises: positions
    /// contiguous from 0 up to the head's next position, every row a well-formed event (its
    /// id, codec and payload, which must decompress to its recorded length), and the head's
    /// timestamp range. Blocks the calling thread; reads a page at a time.
    /// - Returns: What was found; a damaged row is reported and the scan goes on.
    /// - Throws: ``LogError`` when the server cannot be read.
    /// - Complexity: O(records).
    public func verify() throws -> Verification {
        var report = Verification()
        let schema = configuration.schema
        let head = try reader.rows(PostgresQuery(unsafeSQL: #"SELECT next_position, min_recorded_at, max_recorded_at FROM "\#(schema)".head"#), what: "verifying")
        guard let headRow = head.first else {
            report.problems.append(LogError(.corruption, "the head row of \(schema) is missing", file: "\(schema).head"))
            return report
        }
        let (next, minimum, maximum) = try headRow.decode((Int64, Int64?, Int64?).self)
        var expected: Int64 = 0
        var seenMin: Int64?, seenMax: Int64?
        while true {
            var binds = PostgresBindings(capacity: 2)
            binds.append(expected)
            binds.append(configuration.readPageSize)
            let rows = try reader.rows(PostgresQuery(unsafeSQL: """
                SELECT \(EventRow.selectList) FROM "\(schema)".events WHERE position >= $1 ORDER BY position LIMIT $2
                """, binds: binds), what: "verifying")
            for row in rows {
                let position = try row.makeRandomAccess()[0].decode(Int64.self)
                if position != expected {
                    report.problems.append(LogError(.corruption, "positions \(expected)..<\(position) are missing from \(table)", file: table, position: UInt64(max(0, expected))))
                }
                expected = position + 1
                report.records += 1
                do {
                    let (record, stored) = try EventRow.recordAndStoredSize(from: row, table: table)
                    report.storedPayloadBytes += Int64(stored)
                    report.uncompressedPayloadBytes += Int64(record.payload.count)
                    seenMin = min(seenMin ?? record.timestamp.nanosecondsSince1970, record.timestamp.nanosecondsSince1970)
                    seenMax = max(seenMax ?? record.timestamp.nanosecondsSince1970, record.timestamp.nanosecondsSince1970)
                } catch let error as LogError {
                    report.problems.append(error)
                }
            }
            if rows.count < configuration.readPageSize { break }
        }
        if expected != next {
            report.problems.append(LogError(.corruption, "the head says the next position is \(next), but the rows end at \(expected)", file: "\(schema).head", position: UInt64(max(0, min(expected, next)))))
        }
        if report.records > 0, minimum != seenMin || maximum != seenMax {
            report.problems.append(LogError(.corruption, "the head's recorded-at range \(minimum.map(String.init) ?? "-")...\(maximum.map(String.init) ?? "-") is not the rows' \(seenMin.map(String.init) ?? "-")...\(seenMax.map(String.init) ?? "-") (nanoseconds)", file: "\(schema).head"))
        }
        if schemaRevision >= 2 { try verifyConsumers(next: next, into: &report) }
        return report
    }

    /// Checks the consumers' rows (schema version 2) as a consumer reads them: committed
    /// positions and parked positions within the log, anchor checksums that fit 32 bits,
    /// attempts not negative. Each bad row is a problem naming the consumer.
    private func verifyConsumers(next: Int64, into report: inout Verification) throws {
        let schema = configuration.schema
        let consumers = "\(schema).consumers", parked = "\(schema).consumer_parked"
        var binds = PostgresBindings(capacity: 1)
        binds.append(next)
        for row in try reader.rows(PostgresQuery(unsafeSQL: """
            SELECT name, committed, anchor_checksum FROM "\(schema)".consumers
            WHERE committed < 0 OR committed > $1 OR anchor_checksum < 0 OR anchor_checksum > 4294967295 ORDER BY name
            """, binds: binds), what: "verifying the consumers") {
            let (name, committed, checksum) = try row.decode((String, Int64?, Int64?).self)
            report.problems.append(LogError(.corruption, "consumer \"\(name)\"'s row holds committed position \(committed.map(String.init) ?? "null") and anchor checksum \(checksum.map(String.init) ?? "null") (the log's next position is \(next))", file: consumers))
        }
        for row in try reader.rows(PostgresQuery(unsafeSQL: """
            SELECT c.name, p.position, p.attempts FROM "\(schema)".consumer_parked p JOIN "\(schema)".consumers c ON c.id = p.consumer_id
            WHERE p.position < 0 OR p.position >= $1 OR p.attempts < 0 ORDER BY c.name, p.position
            """, binds: binds), what: "verifying the consumers") {
            let (name, position, attempts) = try row.decode((String, Int64, Int32).self)
            report.problems.append(LogError(.corruption, "consumer \"\(name)\" has a parked event at position \(position) with \(attempts) attempts (the log's next position is \(next))", file: parked))
        }
    }

    /// Facts about the log for `eventkernel inspect`, read from the server.
    public struct Statistics: Sendable {
        public var schemaVersion: Int
        public var createdAt: String?
        public var events: Int64
        public var streams: Int64
        public var transactions: Int64
        public var eventTypes: [(name: String, count: Int64)]
        public var storedPayloadBytes: Int64
        public var uncompressedPayloadBytes: Int64
        /// The events table with its indexes and out-of-line storage.
        public var tableBytes: Int64
        public var firstRecordedAt: LogTimestamp?
        public var lastRecordedAt: LogTimestamp?
    }

    /// Reads ``Statistics`` (several aggregate queries over the whole table). Blocks.
    /// - Throws: ``LogError`` when the server cannot be read.
    public func statistics() throws -> Statistics {
        let s = configuration.schema
        func one(_ sql: String) throws -> PostgresRow {
            let rows = try reader.rows(PostgresQuery(unsafeSQL: sql), what: "inspecting")
            guard let row = rows.first else { throw LogError(.io, "no answer to an inspection query", file: table) }
            return row
        }
        let meta = try reader.rows(PostgresQuery(unsafeSQL: #"SELECT key, value FROM "\#(s)".meta"#), what: "inspecting")
        var facts: [String: String] = [:]
        for row in meta {
            let (key, value) = try row.decode((String, String).self)
            facts[key] = value
        }
        let (events, stored, uncompressed) = try one(#"SELECT count(*), coalesce(sum(octet_length(payload)), 0)::bigint, coalesce(sum(payload_length), 0)::bigint FROM "\#(s)".events"#).decode((Int64, Int64, Int64).self)
        let streams = try one(#"SELECT count(*) FROM (SELECT DISTINCT entity_type, entity_id_kind, entity_id FROM "\#(s)".events) AS streams"#).decode(Int64.self)
        let transactions = try one(#"SELECT count(*) FROM "\#(s)".rounds"#).decode(Int64.self)
        let bytes = try one(#"SELECT pg_total_relation_size('"\#(s)".events')"#).decode(Int64.self)
        let (first, last) = try one(#"SELECT min_recorded_at, max_recorded_at FROM "\#(s)".head"#).decode((Int64?, Int64?).self)
        var types: [(String, Int64)] = []
        for row in try reader.rows(PostgresQuery(unsafeSQL: #"SELECT event_type, count(*) FROM "\#(s)".events GROUP BY event_type ORDER BY 2 DESC, 1"#), what: "inspecting") {
            types.append(try row.decode((String, Int64).self))
        }
        return Statistics(
            schemaVersion: Int(facts["schema_revision"] ?? facts["schema_version"] ?? "") ?? 0, createdAt: facts["created_at"], events: events, streams: streams,
            transactions: transactions, eventTypes: types, storedPayloadBytes: stored, uncompressedPayloadBytes: uncompressed,
            tableBytes: bytes, firstRecordedAt: first.map(LogTimestamp.init(nanosecondsSince1970:)),
            lastRecordedAt: last.map(LogTimestamp.init(nanosecondsSince1970:)))
    }
}
#endif
