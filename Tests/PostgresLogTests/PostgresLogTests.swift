#if PostgreSQL
import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import Logging
import PostgresLog
import PostgresNIO
import Testing

/// A log record the store would write: event `type` of stream `Item/<id>` at `version`.
func entry(_ id: String, version: UInt64, payload: [UInt8] = [1, 2, 3], at nanoseconds: Int64 = 1_700_000_000_000_000_000,
           metadata: EventMetadata = .none) -> LogEntry {
    LogEntry(timestamp: LogTimestamp(nanosecondsSince1970: nanoseconds), payload: EventEnvelope.encodeRecordPayload(
        eventType: "Item.changed", schemaVersion: 2, stream: StreamID("Item", .string(id)), entityVersion: version,
        metadata: metadata, payload: payload))
}

/// Opens a log on a fresh schema, runs `body`, closes it and drops the schema.
func withLog<R>(configure: (inout PostgresLog.Configuration) -> Void = { _ in },
                _ body: (PostgresLog, PostgresLog.Configuration) async throws -> R) async throws -> R {
    var configuration = try PostgresTestDatabase.configuration()
    configure(&configuration)
    let log = try await PostgresLog.open(configuration)
    do {
        let result = try await body(log, configuration)
        try await log.close()
        await PostgresTestDatabase.drop(configuration)
        return result
    } catch {
        try? await log.close()
        await PostgresTestDatabase.drop(configuration)
        throw error
    }
}

/// Runs one SQL statement on a connection of its own and returns the first column of each row.
func sql<T: PostgresDecodable & Sendable>(_ configuration: PostgresLog.Configuration, _ statement: String, as: T.Type) async throws -> [T] {
    try await PostgresLog.withConnection(configuration) { connection in
        var out: [T] = []
        for try await value in try await connection.query(PostgresQuery(unsafeSQL: statement), logger: Logger(label: "test")).decode(T.self) {
            out.append(value)
        }
        return out
    }
}

@Suite("PostgresLog")
struct PostgresLogTests {
    @Test("appends come back as the records the store wrote, at gap-free positions, also after a reopen")
    func appendAndReadBack() async throws {
        try await withLog { log, configuration in
            #expect(log.bounds == .empty)
            let big = (0..<5_000).map { UInt8($0 % 7) }   // compresses
            let first = [entry("a", version: 1), entry("b", version: 1, payload: big, metadata: EventMetadata(correlationID: "c-1", actor: "ana"))]
            #expect(try await log.append(first) == 0..<2)
            #expect(try await log.append([entry("a", version: 2, at: 5)]) == 2..<3)
            let records = try log.read(from: 0)
            #expect(records.map(\.position) == [0, 1, 2])
            #expect(records.map(\.payload) == (first + [entry("a", version: 2, at: 5)]).map(\.payload))
            #expect(records[2].timestamp == LogTimestamp(nanosecondsSince1970: 5))
            #expect(log.bounds.nextPosition == 3)
            #expect(log.bounds.minTimestamp == LogTimestamp(nanosecondsSince1970: 5))
            #expect(try log.read(timestampsIn: LogTimestamp(nanosecondsSince1970: 0)...LogTimestamp(nanosecondsSince1970: 10)).map(\.position) == [2])
            // The payload is stored compressed, the columns are the envelope's fields.
            #expect(try await sql(configuration, #"SELECT payload_codec FROM "\#(configuration.schema)".events ORDER BY position"#, as: Int16.self) == [0, 1, 0])
            #expect(try await sql(configuration, #"SELECT entity_id || '/' || stream_version || '/' || coalesce(actor, '-') FROM "\#(configuration.schema)".events ORDER BY position"#, as: String.self)
                    == ["a/1/-", "b/1/ana", "a/2/-"])
            let reopened = try await PostgresLog.open(configuration)
            #expect(reopened.bounds.nextPosition == 3)
            #expect(reopened.bounds.minTimestamp == LogTimestamp(nanosecondsSince1970: 5))
            #expect(try reopened.read(from: 1).map(\.payload) == records.dropFirst().map(\.payload))
            try await reopened.close()
        }
    }

    @Test("a record that is not an event, an empty batch and a closed log are refused")
    func refusals() async throws {
        try await withLog { log, _ in
            await #expect { _ = try await log.append([LogEntry(timestamp: .now(), payload: [9, 9])]) } throws: {
                ($0 as? LogError)?.code == .invalidArgument
            }
            await #expect { _ = try await log.append([LogEntry]()) } throws: { ($0 as? LogError)?.code == .invalidArgument }
            await #expect { _ = try await log.append([entry("a", version: 1), entry("a", version: 3)]) } throws: {
                ($0 as? LogError)?.code == .invalidArgument
            }
            #expect(log.bounds.nextPosition == 0)
            try await log.close()
            await #expect { _ = try await log.append([entry("a", version: 1)]) } throws: { ($0 as? LogError)?.code == .closed }
        }
    }

    @Test("a stream version taken by another instance is a conflict, and only that batch fails")
    func conflictAcrossInstances() async throws {
        try await withLog { a, configuration in
            let b = try await PostgresLog.open(configuration)
            _ = try await a.append([entry("x", version: 1), entry("x", version: 2)])
            await #expect { _ = try await b.append([entry("x", version: 2)]) } throws: { error in
                guard let error = error as? LogError, error.code == .conflict else { return false }
                return error.cause as? RepositoryError == .conflict(stream: StreamID("Item", .string("x")), expected: 1, actual: 2)
            }
            // Concurrent batches of one round: the refused one fails alone.
            let refused = Task { try await b.append([entry("x", version: 1)]) }
            let accepted = Task { try await b.append([entry("y", version: 1)]) }
            await #expect(throws: LogError.self) { _ = try await refused.value }
            #expect(try await accepted.value == 2..<3)
            try await b.close()
        }
    }

    @Test("concurrent appends of one instance share transactions; positions stay gap-free in commit order")
    func groupCommit() async throws {
        try await withLog { log, configuration in
            let positions = try await withThrowingTaskGroup(of: [LogPosition].self) { group in
                for task in 0..<64 {
                    group.addTask {
                        var mine: [LogPosition] = []
                        for round in 1...4 { mine += Array(try await log.append([entry("t\(task)", version: UInt64(round))])) }
                        return mine
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(positions.sorted() == Array(0..<256))
            let transactions = try await sql(configuration, #"SELECT count(*) FROM "\#(configuration.schema)".rounds"#, as: Int64.self)
            #expect(transactions[0] < 256)
            #expect(try log.read(from: 0).map(\.position) == Array(0..<256))
        }
    }

    @Test("an instance learns of another's appends by notification, and by polling without one")
    func following() async throws {
        try await withLog { a, configuration in
            var notified = configuration
            notified.pollInterval = .seconds(3_600)
            var polling = configuration
            polling.listensForNotifications = false
            polling.pollInterval = .milliseconds(50)
            let b = try await PostgresLog.open(notified)
            let c = try await PostgresLog.open(polling)
            let (calls, call) = AsyncStream<Void>.makeStream()
            b.setAppendedElsewhereHandler { call.yield() }
            // b hears notifications only once its LISTEN is in place.
            let listening = ContinuousClock.now + .seconds(30)
            while !b.isListening, ContinuousClock.now < listening { try await Task.sleep(for: .milliseconds(5)) }
            try #require(b.isListening)
            _ = try await a.append([entry("f", version: 1)])
            var iterator = calls.makeAsyncIterator()
            _ = await iterator.next()
            #expect(b.bounds.nextPosition == 1)
            #expect(try b.read(from: 0).map(\.payload) == [entry("f", version: 1).payload])
            let deadline = ContinuousClock.now + .seconds(10)
            while c.bounds.nextPosition < 1, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            #expect(c.bounds.nextPosition == 1)
            try await b.close()
            try await c.close()
        }
    }

    @Test("a transaction rolled back between two committed appends leaves no gap and no stalled reader")
    func rolledBackTransaction() async throws {
        try await withLog { a, configuration in
            let reader = try await PostgresLog.open(configuration)
            _ = try await a.append([entry("r", version: 1)])
            // Another writer takes the head's lock, inserts at the next position and rolls back.
            try await PostgresLog.withConnection(configuration) { connection in
                let logger = Logger(label: "test")
                let s = configuration.schema
                try await connection.query("BEGIN", logger: logger)
                try await connection.query(PostgresQuery(unsafeSQL: #"SELECT next_position FROM "\#(s)".head FOR UPDATE"#), logger: logger)
                try await connection.query(PostgresQuery(unsafeSQL: #"""
                    INSERT INTO "\#(s)".events (position, recorded_at, entity_type, entity_id_kind, entity_id, stream_version,
                        event_type, schema_version, payload_codec, payload_length, payload)
                    VALUES (1, 0, 'Item', 1, 'ghost', 1, 'Item.changed', 1, 0, 0, '')
                    """#), logger: logger)
                try await connection.query(PostgresQuery(unsafeSQL: #"UPDATE "\#(s)".head SET next_position = 2"#), logger: logger)
                try await connection.query("ROLLBACK", logger: logger)
            }
            #expect(try await a.append([entry("r", version: 2)]) == 1..<2)
            #expect(try reader.refresh().nextPosition == 2)
            #expect(try reader.read(from: 0).map(\.payload) == [entry("r", version: 1).payload, entry("r", version: 2).payload])
            try await reader.close()
        }
    }

    @Test("a connection lost during an append is settled on a new connection: not committed, so sent again, once")
    func connectionLostDuringAppend() async throws {
        try await withLog { log, configuration in
            _ = try await log.append([entry("c", version: 1)])
            let logger = Logger(label: "test")
            let s = configuration.schema
            try await PostgresLog.withConnection(configuration) { holder in
                // Hold the head's lock so that the next append waits inside its statement.
                try await holder.query("BEGIN", logger: logger)
                try await holder.query(PostgresQuery(unsafeSQL: #"SELECT next_position FROM "\#(s)".head FOR UPDATE"#), logger: logger)
                let pending = Task { try await log.append([entry("c", version: 2)]) }
                var waiting: [Int32] = []
                let deadline = ContinuousClock.now + .seconds(10)
                while waiting.isEmpty, ContinuousClock.now < deadline {
                    // Inside a transaction the statistics views are a snapshot: take a new one.
                    try await holder.query("SELECT pg_stat_clear_snapshot()", logger: logger)
                    for try await pid in try await holder.query(PostgresQuery(unsafeSQL: """
                        SELECT pid FROM pg_stat_activity
                        WHERE wait_event_type = 'Lock' AND query LIKE '%"\(s)".append_round%' AND pid <> pg_backend_pid()
                        """), logger: logger).decode(Int32.self) { waiting.append(pid) }
                    if waiting.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
                }
                try #require(waiting.count == 1)
                // The instance's session ends mid-statement: its client sees the connection drop.
                try await holder.query(PostgresQuery(unsafeSQL: "SELECT pg_terminate_backend(\(waiting[0]))"), logger: logger)
                try await Task.sleep(for: .milliseconds(50))
                try await holder.query("ROLLBACK", logger: logger)
                // The round did not commit (its session is gone): sent again, it commits once.
                #expect(try await pending.value == 1..<2)
            }
            #expect(try await sql(configuration, #"SELECT stream_version FROM "\#(s)".events ORDER BY position"#, as: Int64.self) == [1, 2])
            #expect(try log.read(from: 0).map(\.position) == [0, 1])
        }
    }

    @Test("an unreachable server fails the open at once, naming the host")
    func unreachable() async throws {
        _ = try PostgresTestDatabase.configuration()
        // A port nothing listens on: bound, then closed.
        var configuration = try PostgresLog.Configuration(url: "postgres://nobody@127.0.0.1:1/nothing?sslmode=disable")
        configuration.connectTimeout = .seconds(2)
        await #expect { _ = try await PostgresLog.open(configuration) } throws: { error in
            guard let error = error as? LogError else { return false }
            return error.code == .unavailable && error.message.contains("127.0.0.1:1")
        }
    }

    @Test("a schema written by a newer version is refused")
    func newerSchema() async throws {
        try await withLog { _, configuration in
            _ = try await sql(configuration, #"UPDATE "\#(configuration.schema)".meta SET value = '99' WHERE key = 'schema_version' RETURNING key"#, as: String.self)
            await #expect { _ = try await PostgresLog.open(configuration) } throws: { ($0 as? LogError)?.code == .unsupportedVersion }
        }
    }

    @Test("URLs parse as libpq's; the password never shows")
    func urls() throws {
        let tcp = try PostgresLog.Configuration(url: "postgres://app:s3cret@db.example:6543/events?schema=orders&sslmode=require")
        #expect(tcp.endpoint == .tcp(host: "db.example", port: 6543))
        #expect(tcp.username == "app" && tcp.password == "s3cret" && tcp.database == "events" && tcp.schema == "orders" && tcp.tls == .require)
        #expect(!tcp.description.contains("s3cret"))
        let socket = try PostgresLog.Configuration(url: "postgresql://app@/events?host=/var/run/postgresql")
        #expect(socket.endpoint == .unixSocket(path: "/var/run/postgresql/.s.PGSQL.5432"))
        #expect(throws: LogError.self) { try PostgresLog.Configuration(url: "mysql://x@y/z") }
        #expect(throws: LogError.self) { try PostgresLog.Configuration(url: "postgres://x@y/z?schema=Bad-Name") }
    }
}
#endif
