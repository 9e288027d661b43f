#if PostgreSQL
public import EventLog
import Foundation
import PostgresNIO

extension PostgresLog {
    /// The log's positions below `end` cut into ranges that no atomic append straddles, each
    /// of at most `maximum` records unless one append alone holds more: how a copy or a
    /// restore writes this log into a directory without ever holding half of an `execute`
    /// command or an `appendAll`.
    ///
    /// The boundaries are the first positions of the appends every committed round recorded
    /// (the `rounds` table: a round's `batch_firsts`; a copy into this log records each copied
    /// chunk as one), and the log's end. The ranges end at the greatest boundary at or below
    /// `end`: a position inside an append is rounded down to its start.
    /// - Parameters:
    ///   - end: The position to stop at (one past the last record wanted).
    ///   - maximum: The most records a range gathers from consecutive appends.
    /// - Returns: Contiguous ranges from 0; empty when no append ends at or below `end`.
    /// - Throws: ``LogError``: ``LogError/Code/corruption`` when the rounds do not start at
    ///   position 0 (the table was edited), ``LogError/Code/unavailable`` and
    ///   ``LogError/Code/io`` when the server cannot be read.
    /// - Complexity: One query, sorting the log's appends on the server; O(appends) here, with
    ///   memory for the ranges only.
    public func batches(endingAtOrBefore end: LogPosition, atMost maximum: Int = 4_096) async throws -> [Range<LogPosition>] {
        precondition(maximum > 0)
        let schema = configuration.schema
        let logger = self.logger
        let table = "\(schema).rounds"
        return try await withLease("reading the rounds' batch boundaries") { connection in
            var head: Int64 = 0
            for try await next in try await connection.query(PostgresQuery(unsafeSQL: #"SELECT next_position FROM "\#(schema)".head"#), logger: logger).decode(Int64.self) {
                head = next
            }
            var binds = PostgresBindings(capacity: 1)
            binds.append(Int64(min(end, LogPosition(max(0, head)))))
            let starts = try await connection.query(PostgresQuery(unsafeSQL: """
                SELECT DISTINCT f FROM "\(schema)".rounds r CROSS JOIN LATERAL unnest(r.batch_firsts) AS f
                 WHERE f IS NOT NULL AND f <= $1 ORDER BY f
                """, binds: binds), logger: logger).decode(Int64.self)
            var gathering = BatchGathering(atMost: maximum)
            var first = true
            var previous: LogPosition = 0
            for try await start in starts {
                let boundary = LogPosition(start)
                if first {
                    guard boundary == 0 else {
                        throw LogError(.corruption, "the first append the rounds of \(table) record starts at position \(boundary), not 0", file: table, position: 0)
                    }
                    first = false
                } else {
                    gathering.add(endingAt: boundary)
                }
                previous = boundary
            }
            // The log's end is a boundary too: no round starts there.
            if !first, end >= LogPosition(head), LogPosition(head) > previous { gathering.add(endingAt: LogPosition(head)) }
            let ranges = gathering.finished()
            return ranges
        }
    }
}
#endif
