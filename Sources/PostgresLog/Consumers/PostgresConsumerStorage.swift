// Compiled with the PostgreSQL package trait (on by default; Package.swift).
#if PostgreSQL
package import EventKernel
import EventLog
import Logging
import NIOCore
import PostgresNIO
import KernelPrimitives

extension PostgresLog: ConsumerStorageSource {
    /// The consumers of a store over this log keep their positions and parked events in the
    /// log's schema, where every instance sees them, and one instance at a time holds each
    /// (Docs/Consumers.md, "On PostgreSQL").
    package func makeConsumerStorage() -> any ConsumerStorage { PostgresConsumerStorage(log: self) }
}

/// The named consumers of the stores over one PostgreSQL log: rows of the `consumers` and
/// `consumer_parked` tables in the log's schema (``PostgresSchema``, version 2; 3 for retry
/// requests), and a lease
/// per consumer that one instance at a time holds.
///
/// The lease is a session-level advisory lock taken with `pg_try_advisory_lock(bigint)` on a
/// connection of its own, held for as long as the store has the consumer open. Its key is the
/// `consumers` table's OID in the high 32 bits and the consumer's row id in the low 32: both
/// are unique in the database, so no two consumers of any EventKernel log in the database
/// share a key (no hashing, no collisions). Other applications that take single-key advisory
/// locks in the same database must keep clear of these keys. The session ends when the
/// process dies (the kernel closes its socket) or the network fails (the lease session sets
/// TCP keepalives and `tcp_user_timeout`: a dead peer is found within about 10 s, whether the
/// link was idle or had data in flight), and PostgreSQL then releases the lock: another
/// instance waiting for the consumer takes it at its next try.
///
/// Taking the lease bumps the consumer's `lease_epoch` (the fencing token,
/// ``Consumer/leaseEpoch``). Every write (a commit, a reset, the parked list) runs on the
/// session of the lease its writer holds (never another lease taken later under the same
/// name), so it commits only while that lease is held: once the session is gone, the write
/// fails with ``ConsumerError/leaseLost(consumer:reason:)``. The holder confirms its lease
/// with the server before it hands out a batch (at most about once a second), so a holder
/// whose session ended stops within a batch even when it writes nothing. Every statement on
/// the lease's session is bounded (`statement_timeout` on the server, and a deadline after
/// which the client closes the connection, which ends the lease): nothing waits for TCP to
/// give up. Reads use the log's reading connections.
///
/// Texts of parked events are stored with `\` and NUL escaped (`\\`, `\0`): PostgreSQL's
/// text columns refuse NUL, which an error's description may hold.
final class PostgresConsumerStorage: ConsumerStorage {
    private let log: PostgresLog

    init(log: PostgresLog) {
        self.log = log
    }

    private var schema: String { log.configuration.schema }
    /// Whether the log's schema has the consumers' tables: a log opened without migrating
    /// (a read-only tool) may be at version 1, which has none, and so no consumers.
    private var hasTables: Bool { log.schemaRevision >= 2 }
    /// Whether parked events have their retry request (version 3); a log read as it is may be
    /// at version 2, whose lists hold none.
    private var hasRetryRequests: Bool { log.schemaRevision >= 3 }
    /// Where the consumers live, for messages (the URL without its password, and the schema).
    package var location: String { "\(log.configuration)" }

    /// How long the server lets a statement on a lease's session run.
    static let statementTimeout = "10s"
    /// How long the client waits for one: past it, the connection is closed (the lease is
    /// lost) rather than held waiting for TCP to give up, with the consumer's state locked.
    static let statementDeadline = TimeAmount.seconds(15)

    /// The typed cause of a database failure met while doing `what`.
    static func failure(_ error: any Error, while what: String, configuration: PostgresLog.Configuration) -> ConsumerDatabaseFailure {
        let logError = PostgresFailure.logError(error, while: what, configuration: configuration)
        let state = PostgresFailure.sqlState(error) ?? logError.cause.flatMap { PostgresFailure.sqlState(($0 as? PostgresDriverError)?.error ?? $0) }
        return ConsumerDatabaseFailure(code: logError.code, sqlState: state, message: "\(logError)")
    }

    // MARK: Reads

    func checkpoint(named name: String) throws(ConsumerError) -> ConsumerCheckpoint? {
        guard hasTables else { return nil }
        let rows = try read(PostgresQuery(unsafeSQL: """
            SELECT committed, committed_at, history_epoch, anchor_recorded_at, anchor_checksum
            FROM "\(schema)".consumers WHERE name = $1 AND committed IS NOT NULL
            """, binds: PostgresSchema.binds(name)), what: "reading consumer \"\(name)\"'s checkpoint")
        guard let row = rows.first else { return nil }
        let decoded: (Int64, Int64, Int64, Int64?, Int64?)
        do { decoded = try row.decode((Int64, Int64, Int64, Int64?, Int64?).self) } catch {
            throw .damagedRow(location: location, consumer: name, reason: "its checkpoint does not decode: \(error)")
        }
        let (committed, at, epoch, anchorAt, anchorChecksum) = decoded
        guard committed >= 0, anchorChecksum.map({ UInt32(exactly: $0) != nil }) ?? true else {
            throw .damagedRow(location: location, consumer: name, reason: "it holds committed position \(committed) and anchor checksum \(anchorChecksum.map(String.init) ?? "null"): not a checkpoint")
        }
        var checkpoint = ConsumerCheckpoint(name: name, committed: LogPosition(committed),
                                            committedAt: LogTimestamp(nanosecondsSince1970: at))
        checkpoint.historyEpoch = UInt64(bitPattern: epoch)
        if let anchorAt, let anchorChecksum, let checksum = UInt32(exactly: anchorChecksum) {
            checkpoint.anchor = SnapshotAnchor(timestamp: LogTimestamp(nanosecondsSince1970: anchorAt), payloadChecksum: checksum)
        }
        return checkpoint
    }

    func parked(named name: String) throws(ConsumerError) -> [ParkedEvent] {
        guard hasTables else { return [] }
        let rows = try read(PostgresQuery(unsafeSQL: """
            SELECT p.position, p.stream, p.event_type, p.error_type, p.error, p.attempts, p.parked_at, \(hasRetryRequests ? "p.retry_requested" : "false")
            FROM "\(schema)".consumer_parked p JOIN "\(schema)".consumers c ON c.id = p.consumer_id
            WHERE c.name = $1 ORDER BY p.position
            """, binds: PostgresSchema.binds(name)), what: "reading consumer \"\(name)\"'s parked events")
        var events: [ParkedEvent] = []
        for row in rows {
            let decoded: (Int64, String, String, String, String, Int32, Int64, Bool)
            do { decoded = try row.decode((Int64, String, String, String, String, Int32, Int64, Bool).self) } catch {
                throw .damagedRow(location: location, consumer: name, reason: "a parked event does not decode: \(error)")
            }
            let (position, stream, eventType, errorType, error, attempts, parkedAt, retryRequested) = decoded
            guard position >= 0, attempts >= 0 else {
                throw .damagedRow(location: location, consumer: name, reason: "a parked event holds position \(position) and \(attempts) attempts")
            }
            events.append(ParkedEvent(position: LogPosition(position), stream: Self.unescape(stream), eventType: Self.unescape(eventType),
                                      errorType: Self.unescape(errorType), error: Self.unescape(error), attempts: Int(attempts),
                                      parkedAt: LogTimestamp(nanosecondsSince1970: parkedAt), retryRequested: retryRequested))
        }
        return events
    }

    func names() throws(ConsumerError) -> [String] {
        guard hasTables else { return [] }
        let rows = try read(PostgresQuery(unsafeSQL: """
            SELECT c.name FROM "\(schema)".consumers c
            WHERE c.committed IS NOT NULL OR EXISTS (SELECT 1 FROM "\(schema)".consumer_parked p WHERE p.consumer_id = c.id)
            ORDER BY c.name
            """), what: "listing the consumers")
        do {
            return try rows.map { try $0.decode(String.self) }
        } catch {
            throw .damagedRow(location: location, consumer: "?", reason: "the consumers' names do not decode: \(error)")
        }
    }

    private func read(_ query: PostgresQuery, what: String) throws(ConsumerError) -> [PostgresRow] {
        do { return try log.reader.rows(query, what: what) } catch {
            throw .databaseFailed(location: location, cause: Self.failure(error, while: what, configuration: log.configuration))
        }
    }

    /// `text` with `\` and NUL escaped: PostgreSQL's text columns refuse NUL.
    static func escape(_ text: String) -> String {
        guard text.contains(where: { $0 == "\\" || $0 == "\u{0}" }) else { return text }
        var escaped = ""
        for character in text {
            switch character {
            case "\\": escaped += "\\\\"
            case "\u{0}": escaped += "\\0"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    /// The text ``escape(_:)`` was given.
    static func unescape(_ text: String) -> String {
        guard text.contains("\\") else { return text }
        var plain = ""
        var escaping = false
        for character in text {
            if escaping {
                plain.append(character == "0" ? "\u{0}" : character)
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else {
                plain.append(character)
            }
        }
        return plain
    }

    // MARK: Writes, on the writer's lease's session

    func write(_ checkpoint: ConsumerCheckpoint, under lock: ConsumerLock?) throws(ConsumerError) {
        let lease = try Self.lease(lock, of: checkpoint.name, in: location)
        var binds = PostgresBindings(capacity: 6)
        binds.append(lease.consumerID)
        binds.append(Int64(clamping: checkpoint.committed))
        binds.append(checkpoint.committedAt.nanosecondsSince1970)
        binds.append(Int64(bitPattern: checkpoint.historyEpoch))
        binds.append(checkpoint.anchor?.timestamp.nanosecondsSince1970)
        binds.append(checkpoint.anchor.map { Int64($0.payloadChecksum) })
        let rows = try lease.rows(PostgresQuery(unsafeSQL: """
            UPDATE "\(schema)".consumers SET committed = $2, committed_at = $3, history_epoch = $4,
                anchor_recorded_at = $5, anchor_checksum = $6
            WHERE id = $1 RETURNING id
            """, binds: binds), what: "committing consumer \"\(checkpoint.name)\"", location: location)
        guard rows.count == 1 else {
            throw .damagedRow(location: location, consumer: checkpoint.name, reason: "its row (id \(lease.consumerID)) is gone")
        }
    }

    func writeParked(_ events: [ParkedEvent], named name: String, under lock: ConsumerLock?) throws(ConsumerError) {
        let lease = try Self.lease(lock, of: name, in: location)
        let sorted = events.sorted { $0.position < $1.position }
        var binds = PostgresBindings(capacity: 9)
        binds.append(lease.consumerID)
        binds.append(sorted.map { Int64(clamping: $0.position) })
        binds.append(sorted.map { Self.escape($0.stream) })
        binds.append(sorted.map { Self.escape($0.eventType) })
        binds.append(sorted.map { Self.escape($0.errorType) })
        binds.append(sorted.map { Self.escape($0.error) })
        binds.append(sorted.map { Int32(clamping: $0.attempts) })
        binds.append(sorted.map(\.parkedAt.nanosecondsSince1970))
        // A writer's log is migrated at open (a store prepares its schema); one opened without
        // that may be at version 2, whose function keeps no requests: a list with one is
        // refused rather than written without it.
        let statement: String
        if hasRetryRequests {
            binds.append(sorted.map(\.retryRequested))
            statement = #"SELECT "\#(schema)".replace_parked($1, $2, $3, $4, $5, $6, $7, $8, $9)"#
        } else if !sorted.contains(where: \.retryRequested) {
            statement = #"SELECT "\#(schema)".replace_parked($1, $2, $3, $4, $5, $6, $7, $8)"#
        } else {
            throw .databaseFailed(location: location, cause: ConsumerDatabaseFailure(
                code: .unsupportedVersion, sqlState: nil,
                message: "the log's schema is at version \(log.schemaRevision), which keeps no retry requests: open it with schema preparation to migrate it to version \(PostgresSchema.currentVersion)"))
        }
        _ = try lease.rows(PostgresQuery(unsafeSQL: statement, binds: binds),
                           what: "writing consumer \"\(name)\"'s parked events", location: location)
    }

    /// The lease `lock` holds on consumer `name`, or why its holder cannot write for it: the
    /// writer's own lease, so a handle whose lease ended never writes through a later one.
    private static func lease(_ lock: ConsumerLock?, of name: String, in location: String) throws(ConsumerError) -> PostgresConsumerLease {
        guard let lease = lock?.lease as? PostgresConsumerLease, lease.consumer == name, lease.isHeld else {
            throw .leaseLost(consumer: name, reason: "the writer does not hold the consumer's lease in \(location)")
        }
        return lease
    }

    // MARK: The lease

    func lock(consumer name: String) throws(ConsumerError) -> ConsumerLock? {
        let what = "taking consumer \"\(name)\"'s lease"
        let connection: PostgresConnection
        do { connection = try log.reader.dedicatedConnection(what: what) } catch {
            // No session to be had (down, restarting, out of connections, refusing logins for
            // now): unavailable, whatever the server said, so a standby waits and tries again.
            let failure = Self.failure(error, while: what, configuration: log.configuration)
            throw .databaseFailed(location: location, cause: ConsumerDatabaseFailure(code: failure.code == .closed ? .closed : .unavailable,
                                                                                   sqlState: failure.sqlState, message: failure.message))
        }
        let logger = log.logger
        func run(_ query: PostgresQuery) throws -> [PostgresRow] { try Self.wait(connection.query(query, logger: logger), on: connection).rows }
        do {
            // Keepalives and tcp_user_timeout: a holder whose machine or network dies is noticed
            // by the server, which then ends the session and releases the lease, within about
            // 10 s, even with unacknowledged data outstanding (ignored on a Unix socket). The
            // statement timeout bounds every statement the lease runs. The application name
            // lets an operator find the holder in pg_stat_activity.
            _ = try run(PostgresQuery(unsafeSQL: """
                SELECT set_config('tcp_keepalives_idle', '5', false), set_config('tcp_keepalives_interval', '1', false),
                       set_config('tcp_keepalives_count', '5', false), set_config('tcp_user_timeout', '10000', false),
                       set_config('statement_timeout', '\(Self.statementTimeout)', false), set_config('application_name', $1, false)
                """, binds: PostgresSchema.binds(Self.applicationName(schema: schema, consumer: name))))
            let id = try consumerID(name, run)
            var binds = PostgresBindings(capacity: 1)
            binds.append(id)
            // The id is positive (a CHECK): masked to 32 bits all the same, so the table's OID
            // alone fills the high half.
            let taken = try run(PostgresQuery(unsafeSQL: """
                SELECT pg_try_advisory_lock(('"\(schema)".consumers'::regclass::oid::bigint << 32) | ($1::bigint & 4294967295))
                """, binds: binds)).first?.decode(Bool.self) ?? false
            guard taken else { throw ConsumerError.inUse(consumer: name, path: "the lease in \(location)") }
            guard let epoch = try run(PostgresQuery(unsafeSQL: """
                UPDATE "\(schema)".consumers SET lease_epoch = lease_epoch + 1 WHERE id = $1 RETURNING lease_epoch
                """, binds: binds)).first?.decode(Int64.self) else {
                throw ConsumerError.damagedRow(location: location, consumer: name, reason: "its row (id \(id)) is gone")
            }
            let lease = PostgresConsumerLease(consumer: name, consumerID: id, epoch: epoch, schema: schema, connection: connection,
                                              configuration: log.configuration, logger: logger)
            return ConsumerLock(lease: lease)
        } catch {
            Self.close(connection)
            if let error = error as? ConsumerError { throw error }
            throw .databaseFailed(location: location, cause: Self.failure(error, while: what, configuration: log.configuration))
        }
    }

    /// The consumer's row id, the row made if it is new (a second instance making it at once
    /// finds the first one's).
    private func consumerID(_ name: String, _ run: (PostgresQuery) throws -> [PostgresRow]) throws -> Int32 {
        let select = PostgresQuery(unsafeSQL: #"SELECT id FROM "\#(schema)".consumers WHERE name = $1"#, binds: PostgresSchema.binds(name))
        if let row = try run(select).first { return try row.decode(Int32.self) }
        _ = try run(PostgresQuery(unsafeSQL: #"INSERT INTO "\#(schema)".consumers (name) VALUES ($1) ON CONFLICT (name) DO NOTHING"#,
                                  binds: PostgresSchema.binds(name)))
        guard let row = try run(select).first else {
            throw ConsumerError.damagedRow(location: location, consumer: name, reason: "its row could not be made")
        }
        return try row.decode(Int32.self)
    }

    /// The `application_name` of a lease's session (PostgreSQL keeps 63 bytes of it).
    static func applicationName(schema: String, consumer: String) -> String {
        "ek-consumer \(schema).\(consumer)"
    }

    /// Waits for a statement on a lease's connection for at most ``statementDeadline``, then
    /// closes the connection (failing the statement): a dead peer must not hold the caller,
    /// and the locks it holds, until TCP gives up.
    static func wait<Value: Sendable>(_ future: EventLoopFuture<Value>, on connection: PostgresConnection) throws -> Value {
        let deadline = connection.eventLoop.scheduleTask(in: statementDeadline) { let _: EventLoopFuture<Void> = connection.close() }
        defer { deadline.cancel() }
        return try future.wait()
    }

    /// Closes `connection` and waits until it is closed (off the event loop): postgres-nio
    /// asserts that a connection is closed, not closing, when it is released.
    static func close(_ connection: PostgresConnection) {
        let closing: EventLoopFuture<Void> = connection.close()
        if !connection.eventLoop.inEventLoop { try? closing.wait() }
    }
}

/// A consumer's lease: the session, on a connection of its own, that holds the consumer's
/// advisory lock. It is held until released or until the session ends; its holder's writes
/// for the consumer run on it (one at a time).
final class PostgresConsumerLease: ConsumerLease {
    let consumer: String
    let consumerID: Int32
    let epoch: Int64
    private let schema: String
    private let connection: PostgresConnection
    private let configuration: PostgresLog.Configuration
    private let logger: Logger
    /// Released, or lost.
    private let gone = Locked(false)
    /// When the server last confirmed the lease (or granted it).
    private let confirmed = Locked(ContinuousClock.now)
    /// Held while a statement runs: statements on the session go one at a time.
    private let session = Locked(())
    /// A confirmation this recent stands.
    static let confirmationInterval = Duration.seconds(1)

    init(consumer: String, consumerID: Int32, epoch: Int64, schema: String, connection: PostgresConnection,
         configuration: PostgresLog.Configuration, logger: Logger) {
        self.consumer = consumer
        self.consumerID = consumerID
        self.epoch = epoch
        self.schema = schema
        self.connection = connection
        self.configuration = configuration
        self.logger = logger
    }

    var isHeld: Bool { !gone.withLock { $0 } && !connection.isClosed }

    private var location: String { "\(configuration)" }

    func confirm() throws(ConsumerError) {
        if ContinuousClock.now - confirmed.withLock({ $0 }) < Self.confirmationInterval, isHeld { return }
        var binds = PostgresBindings(capacity: 1)
        binds.append(consumerID)
        let held = try rows(PostgresQuery(unsafeSQL: """
            SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
                AND classid = '"\(schema)".consumers'::regclass::oid AND objid::bigint = $1::bigint AND objsubid = 1)
            """, binds: binds), what: "confirming consumer \"\(consumer)\"'s lease", location: location)
        let stillHeld = (try? held.first?.decode(Bool.self)) ?? false
        guard stillHeld else {
            // Unlocked on a live session (by hand, or pg_advisory_unlock_all): it is never used again.
            loseSession()
            throw .leaseLost(consumer: consumer, reason: "its session with \(location) no longer holds the lock")
        }
        confirmed.withLock { $0 = .now }
    }

    /// Runs `query` on the lease's session, blocking the calling thread (for at most
    /// ``PostgresConsumerStorage/statementDeadline``).
    /// - Throws: ``ConsumerError/leaseLost(consumer:reason:)`` when the session is gone (before,
    ///   or during the statement: it may have committed, as it ran while the lease was held),
    ///   ``ConsumerError/databaseFailed(location:cause:)`` when the server refuses the statement.
    func rows(_ query: PostgresQuery, what: String, location: String) throws(ConsumerError) -> [PostgresRow] {
        try session.withLock { (_) throws(ConsumerError) -> [PostgresRow] in
            guard isHeld else { throw .leaseLost(consumer: consumer, reason: "its session with \(location) ended") }
            do {
                return try PostgresConsumerStorage.wait(connection.query(query, logger: logger), on: connection).rows
            } catch {
                let failure = PostgresConsumerStorage.failure(error, while: what, configuration: configuration)
                if PostgresFailure.isStatementRefusal(error), !connection.isClosed {
                    throw .databaseFailed(location: location, cause: failure)
                }
                // The session may be gone, and the lock with it: it is never used again.
                loseSession()
                throw .leaseLost(consumer: consumer, reason: "its session with \(location) ended: \(failure)")
            }
        }
    }

    private func loseSession() {
        gone.withLock { $0 = true }
        PostgresConsumerStorage.close(connection)
    }

    func release() {
        let first = gone.withLock { gone in
            defer { gone = true }
            return !gone
        }
        guard first else { return }
        // Unlocked first, so the lease is free when the store's close returns (the server ends
        // a closed session a moment later); if that fails, the session's end releases it.
        session.withLock { _ in
            guard !connection.isClosed, !connection.eventLoop.inEventLoop else { return }
            _ = try? PostgresConsumerStorage.wait(connection.query("SELECT pg_advisory_unlock_all()", logger: logger), on: connection)
        }
        PostgresConsumerStorage.close(connection)
    }
}
#endif
