#if PostgreSQL
public import EventLog
import PostgresNIO

extension PostgresLog {
    /// Calls `body` with each record from `start` through `end`, in position order: from the
    /// instance's cache of recent records where it holds them, otherwise from the server, a
    /// page at a time (blocking the calling thread while a page is read).
    ///
    /// - Parameters:
    ///   - start: The first position.
    ///   - end: The last position, or `nil` for the end of what this instance has learned
    ///     (``RecordLog/bounds``). An explicit end beyond that reads what the server holds.
    ///   - body: Receives each record; returns whether to continue.
    /// - Throws: ``LogError``: ``LogError/Code/unavailable`` when the server cannot be reached,
    ///   ``LogError/Code/corruption`` naming the position when a row does not make an event or
    ///   a position is missing; or what `body` throws.
    /// - Complexity: O(records visited), one round trip per ``Configuration/readPageSize``
    ///   records not cached.
    public func forEachRecord(
        from start: LogPosition, through end: LogPosition?, _ body: (LogRecordView) throws -> Bool
    ) throws {
        guard let last = end ?? bounds.lastPosition else { return }
        var position = start
        while position <= last {
            let (cached, cacheStart) = view.withLock { ($0.cachedRecords(from: position, through: last), $0.cacheStart(above: position)) }
            let records: [LogRecord]
            if let cached {
                records = Array(cached)
            } else {
                let upper = cacheStart.map { min(last, $0 - 1) } ?? last
                records = try readRecords(from: position, through: upper, limit: configuration.readPageSize)
                if records.isEmpty { return }
            }
            for record in records {
                guard record.position == position else {
                    throw LogError(.corruption, "position \(position) is missing from \(table): the next row holds \(record.position)",
                                   file: table, position: position)
                }
                let more = try record.payload.withUnsafeBytes { bytes in
                    try body(LogRecordView(position: record.position, timestamp: record.timestamp, payload: bytes))
                }
                if !more { return }
                position += 1
            }
        }
    }

    /// Calls `body` with each record whose timestamp lies in `range`, in position order,
    /// read from the server a page at a time.
    /// - Throws: ``LogError`` as ``forEachRecord(from:through:_:)``, or what `body` throws.
    /// - Complexity: A scan of the table's rows from the first position (there is no index
    ///   on `recorded_at`: appends would pay for it and time travel scans positions anyway).
    public func forEachRecord(
        timestampsIn range: ClosedRange<LogTimestamp>, _ body: (LogRecordView) throws -> Bool
    ) throws {
        var position: LogPosition = 0
        while true {
            var binds = PostgresBindings(capacity: 4)
            binds.append(Int64(clamping: position))
            binds.append(range.lowerBound.nanosecondsSince1970)
            binds.append(range.upperBound.nanosecondsSince1970)
            binds.append(configuration.readPageSize)
            let rows = try reader.rows(PostgresQuery(unsafeSQL: """
                SELECT \(EventRow.selectList) FROM "\(configuration.schema)".events
                WHERE position >= $1 AND recorded_at BETWEEN $2 AND $3 ORDER BY position LIMIT $4
                """, binds: binds), what: "reading records by time")
            for row in rows {
                let record = try EventRow.record(from: row, table: table)
                let more = try record.payload.withUnsafeBytes { bytes in
                    try body(LogRecordView(position: record.position, timestamp: record.timestamp, payload: bytes))
                }
                if !more { return }
                position = record.position + 1
            }
            if rows.count < configuration.readPageSize { return }
        }
    }

    /// Reads up to `limit` records from `start` through `end` (`nil`: whatever the server
    /// holds) from the server, blocking the calling thread.
    /// - Throws: ``LogError``.
    func readRecords(from start: LogPosition, through end: LogPosition?, limit: Int) throws -> [LogRecord] {
        let rows = try reader.rows(Self.rangeQuery(schema: configuration.schema, from: start, through: end, limit: limit), what: "reading records")
        return try rows.map { try EventRow.record(from: $0, table: table) }
    }

    /// The query reading positions `start...end` (or from `start` on), at most `limit` rows.
    static func rangeQuery(schema: String, from start: LogPosition, through end: LogPosition?, limit: Int) -> PostgresQuery {
        var binds = PostgresBindings(capacity: 3)
        binds.append(Int64(clamping: start))
        binds.append(Int64(clamping: end ?? UInt64(Int64.max)))
        binds.append(limit)
        return PostgresQuery(unsafeSQL: """
            SELECT \(EventRow.selectList) FROM "\(schema)".events
            WHERE position >= $1 AND position <= $2 ORDER BY position LIMIT $3
            """, binds: binds)
    }
}
#endif
