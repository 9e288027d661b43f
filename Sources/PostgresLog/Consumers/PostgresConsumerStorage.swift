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
/// `consumer_parked` tables in the log's schema (``PostgresSchema``, version 2), and a lease
/// per consumer that one instance at a time holds.
///
/// The lease is a session-level advisory lock taken with `pg_try_advisory_lock(bigint)` on a
/// connection of its own, held for as long as the store has the consumer open. Its key is the
/// `consumers` table's OID in the high 32 bits and the consumer's row id in the low 32: both
/// are unique in the database, so no two consumers of any EventKernel log in the database
/// share a key (no hashing, no collisions). Other applications that take single-key advisory
/// locks in the same database must keep clear of these keys. The session ends when the
/// process dies (the kernel closes its socket) or the network fails (the lease connection
/// sets TCP keepalives: a dead peer is found within about 10 s), and PostgreSQL then releases
/// the lock: another instance waiting for the consumer takes it at its next try.
///
/// Every write (a commit, a reset, the parked list) runs on the lease's own session, so it
/// commits only while the lease is held: once the session is gone, the write fails with
/// ``ConsumerError/leaseLost(consumer:reason:)``, and an instance that lost its lease never
/// commits over the one that took it. Reads use the log's reading connections.
final class PostgresConsumerStorage: ConsumerStorage {
    private let log: PostgresLog
    /// The leases this store holds, by consumer: its writes go through their sessions.
    private let leases = Locked<[String: PostgresConsumerLease]>([:])

    init(log: PostgresLog) {
        self.log = log
    }

    private var schema: String { log.configuration.schema }
    /// Where the consumers live, for messages (the URL without its password, and the schema).
    var location: String { "\(log.configuration)" }

    // MARK: Reads

    func checkpoint(named name: String) throws(ConsumerError) -> ConsumerCheckpoint? {
        let rows = try read(PostgresQuery(unsafeSQL: """
            SELECT committed, committed_at, history_epoch, anchor_recorded_at, anchor_checksum
            FROM "\(schema)".consumers WHERE name = $1 AND committed IS NOT NULL
            """, binds: PostgresSchema.binds(name)), what: "reading consumer \"\(name)\"'s checkpoint")
        guard let row = rows.first else { return nil }
        do {
            let (committed, at, epoch, anchorAt, anchorChecksum) = try row.decode((Int64, Int64, Int64, Int64?, Int64?).self)
            guard committed >= 0, anchorChecksum.map({ UInt32(exactly: $0) != nil }) ?? true else {
                throw ConsumerError.databaseFailed(location: location, reason: "consumer \"\(name)\"'s row holds committed position \(committed) and anchor checksum \(anchorChecksum.map(String.init) ?? "null"): not a checkpoint")
            }
            var checkpoint = ConsumerCheckpoint(name: name, committed: LogPosition(committed),
                                                committedAt: LogTimestamp(nanosecondsSince1970: at))
            checkpoint.historyEpoch = UInt64(bitPattern: epoch)
            if let anchorAt, let anchorChecksum, let checksum = UInt32(exactly: anchorChecksum) {
                checkpoint.anchor = SnapshotAnchor(timestamp: LogTimestamp(nanosecondsSince1970: anchorAt), payloadChecksum: checksum)
            }
            return checkpoint
        } catch let error as ConsumerError {
            throw error
        } catch {
            throw .databaseFailed(location: location, reason: "consumer \"\(name)\"'s checkpoint does not decode: \(error)")
        }
    }

    func parked(named name: String) throws(ConsumerError) -> [ParkedEvent] {
        let rows = try read(PostgresQuery(unsafeSQL: """
            SELECT p.position, p.stream, p.event_type, p.error_type, p.error, p.attempts, p.parked_at
            FROM "\(schema)".consumer_parked p JOIN "\(schema)".consumers c ON c.id = p.consumer_id
            WHERE c.name = $1 ORDER BY p.position
            """, binds: PostgresSchema.binds(name)), what: "reading consumer \"\(name)\"'s parked events")
        do {
            return try rows.map { row in
                let (position, stream, eventType, errorType, error, attempts, parkedAt) =
                    try row.decode((Int64, String, String, String, String, Int32, Int64).self)
                return ParkedEvent(position: LogPosition(clamping: position), stream: stream, eventType: eventType,
                                   errorType: errorType, error: error, attempts: Int(attempts),
                                   parkedAt: LogTimestamp(nanosecondsSince1970: parkedAt))
            }
        } catch {
            throw .databaseFailed(location: location, reason: "consumer \"\(name)\"'s parked events do not decode: \(error)")
        }
    }

    func names() throws(ConsumerError) -> [String] {
        let rows = try read(PostgresQuery(unsafeSQL: """
            SELECT c.name FROM "\(schema)".consumers c
            WHERE c.committed IS NOT NULL OR EXISTS (SELECT 1 FROM "\(schema)".consumer_parked p WHERE p.consumer_id = c.id)
            ORDER BY c.name
            """), what: "listing the consumers")
        do {
            return try rows.map { try $0.decode(String.self) }
        } catch {
            throw .databaseFailed(location: location, reason: "the consumers' names do not decode: \(error)")
        }
    }

    private func read(_ query: PostgresQuery, what: String) throws(ConsumerError) -> [PostgresRow] {
        do { return try log.reader.rows(query, what: what) } catch {
            throw .databaseFailed(location: location, reason: "\(error)")
        }
    }

    // MARK: Writes, on the lease's session

    func write(_ checkpoint: ConsumerCheckpoint) throws(ConsumerError) {
        let lease = try held(checkpoint.name)
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
            throw .databaseFailed(location: location, reason: "consumer \"\(checkpoint.name)\"'s row (id \(lease.consumerID)) is gone")
        }
    }

    func writeParked(_ events: [ParkedEvent], named name: String) throws(ConsumerError) {
        let lease = try held(name)
        let sorted = events.sorted { $0.position < $1.position }
        var binds = PostgresBindings(capacity: 8)
        binds.append(lease.consumerID)
        binds.append(sorted.map { Int64(clamping: $0.position) })
        binds.append(sorted.map(\.stream))
        binds.append(sorted.map(\.eventType))
        binds.append(sorted.map(\.errorType))
        binds.append(sorted.map(\.error))
        binds.append(sorted.map { Int32(clamping: $0.attempts) })
        binds.append(sorted.map(\.parkedAt.nanosecondsSince1970))
        _ = try lease.rows(PostgresQuery(unsafeSQL: #"SELECT "\#(schema)".replace_parked($1, $2, $3, $4, $5, $6, $7, $8)"#, binds: binds),
                           what: "writing consumer \"\(name)\"'s parked events", location: location)
    }

    /// The lease this store holds on `name`, or why it cannot write for it.
    private func held(_ name: String) throws(ConsumerError) -> PostgresConsumerLease {
        guard let lease = leases.withLock({ $0[name] }), lease.isHeld else {
            throw .leaseLost(consumer: name, reason: "this instance does not hold the consumer's lease in \(location)")
        }
        return lease
    }

    // MARK: The lease

    func lock(consumer name: String) throws(ConsumerError) -> ConsumerLock? {
        let what = "taking consumer \"\(name)\"'s lease"
        let connection: PostgresConnection
        do { connection = try log.reader.dedicatedConnection(what: what) } catch {
            throw .databaseFailed(location: location, reason: "\(error)")
        }
        let logger = log.logger
        func run(_ query: PostgresQuery) throws -> [PostgresRow] { try connection.query(query, logger: logger).wait().rows }
        do {
            // Keepalives: a holder whose machine or network dies is noticed by the server, which
            // then ends the session and releases the lease, within about 10 s (ignored on a
            // Unix socket). The application name lets an operator find the holder in pg_stat_activity.
            _ = try run(PostgresQuery(unsafeSQL: """
                SELECT set_config('tcp_keepalives_idle', '5', false), set_config('tcp_keepalives_interval', '1', false),
                       set_config('tcp_keepalives_count', '5', false), set_config('application_name', $1, false)
                """, binds: PostgresSchema.binds(Self.applicationName(schema: schema, consumer: name))))
            let id = try consumerID(name, run)
            var binds = PostgresBindings(capacity: 1)
            binds.append(id)
            let taken = try run(PostgresQuery(unsafeSQL: """
                SELECT pg_try_advisory_lock(('"\(schema)".consumers'::regclass::oid::bigint << 32) | $1::bigint)
                """, binds: binds)).first?.decode(Bool.self) ?? false
            guard taken else { throw ConsumerError.inUse(consumer: name, path: "the lease in \(location)") }
            let lease = PostgresConsumerLease(consumer: name, consumerID: id, connection: connection,
                                              configuration: log.configuration, logger: logger) { [weak self] lease in
                self?.leases.withLock { leases in
                    if leases[name] === lease { leases[name] = nil }
                }
            }
            leases.withLock { $0[name] = lease }
            return ConsumerLock(lease: lease)
        } catch {
            Self.close(connection)
            if let error = error as? ConsumerError { throw error }
            throw .databaseFailed(location: location, reason: "\(PostgresFailure.logError(error, while: what, configuration: log.configuration))")
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
            throw ConsumerError.databaseFailed(location: location, reason: "consumer \"\(name)\"'s row could not be made")
        }
        return try row.decode(Int32.self)
    }

    /// The `application_name` of a lease's session (PostgreSQL keeps 63 bytes of it).
    static func applicationName(schema: String, consumer: String) -> String {
        "ek-consumer \(schema).\(consumer)"
    }

    /// Closes `connection` and waits until it is closed (off the event loop): postgres-nio
    /// asserts that a connection is closed, not closing, when it is released.
    static func close(_ connection: PostgresConnection) {
        let closing: EventLoopFuture<Void> = connection.close()
        if !connection.eventLoop.inEventLoop { try? closing.wait() }
    }
}

/// A consumer's lease: the session, on a connection of its own, that holds the consumer's
/// advisory lock. It is held until released or until the session ends; the store's writes for
/// the consumer run on it (one at a time).
final class PostgresConsumerLease: ConsumerLease {
    let consumer: String
    let consumerID: Int32
    private let connection: PostgresConnection
    private let configuration: PostgresLog.Configuration
    private let logger: Logger
    private let onRelease: @Sendable (PostgresConsumerLease) -> Void
    /// Released, or lost.
    private let gone = Locked(false)
    /// Held while a statement runs: statements on the session go one at a time.
    private let session = Locked(())

    init(consumer: String, consumerID: Int32, connection: PostgresConnection, configuration: PostgresLog.Configuration,
         logger: Logger, onRelease: @escaping @Sendable (PostgresConsumerLease) -> Void) {
        self.consumer = consumer
        self.consumerID = consumerID
        self.connection = connection
        self.configuration = configuration
        self.logger = logger
        self.onRelease = onRelease
    }

    var isHeld: Bool { !gone.withLock { $0 } && !connection.isClosed }

    /// Runs `query` on the lease's session, blocking the calling thread.
    /// - Throws: ``ConsumerError/leaseLost(consumer:reason:)`` when the session is gone (before,
    ///   or during the statement: it may have committed, as it ran while the lease was held),
    ///   ``ConsumerError/databaseFailed(location:reason:)`` when the server refuses the statement.
    func rows(_ query: PostgresQuery, what: String, location: String) throws(ConsumerError) -> [PostgresRow] {
        try session.withLock { (_) throws(ConsumerError) -> [PostgresRow] in
            guard isHeld else { throw .leaseLost(consumer: consumer, reason: "its session with \(location) ended") }
            do {
                return try connection.query(query, logger: logger).wait().rows
            } catch {
                let failure = PostgresFailure.logError(error, while: what, configuration: configuration)
                if PostgresFailure.isStatementRefusal(error), !connection.isClosed {
                    throw .databaseFailed(location: location, reason: "\(failure)")
                }
                // The session may be gone, and the lock with it: it is never used again.
                gone.withLock { $0 = true }
                PostgresConsumerStorage.close(connection)
                throw .leaseLost(consumer: consumer, reason: "its session with \(location) ended: \(failure)")
            }
        }
    }

    func release() {
        let first = gone.withLock { gone in
            defer { gone = true }
            return !gone
        }
        onRelease(self)
        guard first else { return }
        // Unlocked first, so the lease is free when the store's close returns (the server ends
        // a closed session a moment later); if that fails, the session's end releases it.
        session.withLock { _ in
            guard !connection.isClosed, !connection.eventLoop.inEventLoop else { return }
            _ = try? connection.query("SELECT pg_advisory_unlock_all()", logger: logger).wait()
        }
        PostgresConsumerStorage.close(connection)
    }
}
#endif
