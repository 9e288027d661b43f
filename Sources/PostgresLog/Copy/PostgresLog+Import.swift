#if PostgreSQL
public import EventLog
import Foundation
import Logging
import PostgresNIO

extension PostgresLog {
    /// Appends records at the positions they already have: moving a store from another log
    /// (`eventkernel copy`), keeping positions, timestamps, streams and versions.
    ///
    /// The records must continue the log exactly: the first at the log's next position, the
    /// rest following it. They go in as one transaction under the head's lock, without the
    /// version checks of an append (a store's history is taken as it is; stream versions stay
    /// unique), and other instances are notified as for an append.
    ///
    /// - Parameter records: Records the event store encoded, contiguous.
    /// - Throws: ``LogError``: ``LogError/Code/invalidArgument`` when they do not continue the
    ///   log (nothing is written) or a record is not an event; ``LogError/Code/conflict`` when a
    ///   stream version is taken already; ``LogError/Code/unavailable``, ``LogError/Code/io``.
    /// - Complexity: O(records), one transaction.
    public func importRecords(_ records: [LogRecord]) async throws {
        guard let first = records.first else { return }
        for (offset, record) in records.enumerated() where record.position != first.position + LogPosition(offset) {
            throw LogError(.invalidArgument, "records to import must be contiguous: position \(record.position) follows \(first.position + LogPosition(offset) - 1)")
        }
        let batch = try QueuedBatch(entries: records.map { LogEntry(timestamp: $0.timestamp, payload: $0.payload) },
                                    compression: configuration.compression, consecutiveVersions: false) { _ in }
        let schema = configuration.schema
        let logger = self.logger
        let stamps = batch.rows.map(\.recordedAt)
        try await withLease("importing records") { connection in
            try await connection.query("BEGIN", logger: logger)
            do {
                var head: Int64 = -1
                for try await next in try await connection.query(PostgresQuery(unsafeSQL: #"SELECT next_position FROM "\#(schema)".head FOR UPDATE"#), logger: logger).decode(Int64.self) {
                    head = next
                }
                guard head == Int64(first.position) else {
                    throw LogError(.invalidArgument, "the records start at position \(first.position) but the log in \(self.configuration) continues at \(head): a copy goes into an empty log (or continues one exactly)")
                }
                var binds = PostgresBindings(capacity: 14)
                binds.append(records.map { Int64($0.position) })
                binds.append(stamps)
                binds.append(batch.rows.map(\.entityType))
                binds.append(batch.rows.map(\.entityIDKind))
                binds.append(batch.rows.map(\.entityID))
                binds.append(batch.rows.map(\.streamVersion))
                binds.append(batch.rows.map(\.eventType))
                binds.append(batch.rows.map(\.schemaVersion))
                binds.append(batch.rows.map { Int16(($0.correlationID != nil ? 1 : 0) | ($0.actor != nil ? 2 : 0)) })
                binds.append(batch.rows.map { $0.correlationID ?? "" })
                binds.append(batch.rows.map { $0.actor ?? "" })
                binds.append(batch.rows.map(\.codec))
                binds.append(batch.rows.map(\.length))
                binds.append(batch.rows.map(\.payload))
                try await connection.query(PostgresQuery(unsafeSQL: """
                    INSERT INTO "\(schema)".events (position, recorded_at, entity_type, entity_id_kind, entity_id, stream_version,
                        event_type, schema_version, correlation_id, actor, payload_codec, payload_length, payload)
                    SELECT r.pos, r.at, r.t, r.k, r.i, r.v, r.et, r.sv,
                           CASE WHEN r.m & 1 <> 0 THEN r.c END, CASE WHEN r.m & 2 <> 0 THEN r.a END, r.codec, r.len, r.p
                      FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::smallint[], $5::text[], $6::bigint[], $7::text[],
                                  $8::integer[], $9::smallint[], $10::text[], $11::text[], $12::smallint[], $13::integer[], $14::bytea[])
                           AS r(pos, at, t, k, i, v, et, sv, m, c, a, codec, len, p)
                    """, binds: binds), logger: logger)
                let next = first.position + LogPosition(records.count)
                var head2 = PostgresBindings(capacity: 4)
                head2.append(Int64(next))
                head2.append(stamps.min()!)
                head2.append(stamps.max()!)
                try await connection.query(PostgresQuery(unsafeSQL: """
                    UPDATE "\(schema)".head SET next_position = $1, min_recorded_at = LEAST(min_recorded_at, $2),
                        max_recorded_at = GREATEST(max_recorded_at, $3)
                    """, binds: head2), logger: logger)
                var round = PostgresBindings(capacity: 3)
                round.append(UUID())
                round.append(Int64(first.position))
                round.append(Int32(records.count))
                try await connection.query(PostgresQuery(unsafeSQL: """
                    INSERT INTO "\(schema)".rounds (round_id, first_position, record_count, batch_firsts) VALUES ($1, $2, $3, ARRAY[$2])
                    """, binds: round), logger: logger)
                var notify = PostgresBindings(capacity: 2)
                notify.append(self.configuration.channel)
                notify.append("\(next) \(self.origin)")
                try await connection.query(PostgresQuery(unsafeSQL: "SELECT pg_notify($1, $2)", binds: notify), logger: logger)
                try await connection.query("COMMIT", logger: logger)
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                if PostgresFailure.sqlState(error) == "23505" {
                    throw LogError(.conflict, "importing records into \(self.configuration): a stream version is taken already", file: self.table, cause: PostgresDriverError(error))
                }
                throw PostgresFailure.logError(error, while: "importing records", configuration: self.configuration)
            }
        }
        view.withLock { _ = $0.learn(records) }
    }
}
#endif
