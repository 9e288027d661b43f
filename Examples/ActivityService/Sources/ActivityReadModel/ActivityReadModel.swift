import Activities
public import EventKernel
public import EventLog
public import Foundation
public import GRDB

/// A read model of an activity store in SQLite (through GRDB), fed by a named consumer whose
/// checkpoint lives in the same database: exactly once, because each batch's changes and the
/// new checkpoint are written in one transaction (Docs/Consumers.md, "Exactly once into
/// another database").
///
/// Tables:
/// - `activity_row`: one row per live activity (id, start, UTC day of the start, type, whole
///   minutes of its duration, 0 while it runs), so that an update, an end or a delete takes
///   back exactly what the activity had added;
/// - `daily_total`: per UTC day and type, the number of activities and their total minutes
///   (a row whose count reaches 0 is removed);
/// - `checkpoint`: consumer name → the next position to apply, and that position bound to the
///   log's history (``ConsumerPosition`` as JSON), so that a log cut since (a repair, unsynced
///   events lost in a crash) is refused rather than its new events skipped.
public final class ActivityReadModel: Sendable {
    /// The database.
    public let database: DatabaseQueue
    /// The consumer's name: its row in `checkpoint`, and its name in the store.
    public let consumerName: String
    private let codec = ActivityEventCodec()

    /// Opens (creating and migrating if needed) the read model's database.
    /// - Parameters:
    ///   - path: The SQLite file.
    ///   - consumerName: The consumer's name (its checkpoint row and its name in the store).
    /// - Throws: `DatabaseError` when the database cannot be opened or migrated.
    public init(path: String, consumerName: String = "activity-read-model") throws {
        var configuration = Configuration()
        // A committed transaction is on disk before `write` returns: the checkpoint it holds
        // must survive what the store's log survives.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        database = try DatabaseQueue(path: path, configuration: configuration)
        self.consumerName = consumerName
        try Self.migrator.migrate(database)
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE activity_row (
                    id TEXT PRIMARY KEY NOT NULL, start REAL NOT NULL, day TEXT NOT NULL, type TEXT NOT NULL, minutes INTEGER NOT NULL);
                CREATE TABLE daily_total (
                    day TEXT NOT NULL, type TEXT NOT NULL, count INTEGER NOT NULL, minutes INTEGER NOT NULL,
                    PRIMARY KEY (day, type));
                CREATE TABLE checkpoint (consumer TEXT PRIMARY KEY NOT NULL, next_position INTEGER NOT NULL);
                """)
        }
        migrator.registerMigration("v2: bound position") { db in
            // NULL in a row written before: that position starts unchecked, once.
            try db.execute(sql: "ALTER TABLE checkpoint ADD COLUMN bound_position TEXT")
        }
        return migrator
    }

    // MARK: The consumer

    /// Where the consumer starts: the position after the last batch applied here (the
    /// `checkpoint` row), bound to the log's history (``ConsumerStart/checkpoint(_:)``: the
    /// consumer refuses it if the log was cut since), or the log's beginning for a new read model.
    /// - Throws: `DatabaseError`, `DecodingError` for a bound position that does not decode.
    public func start() throws -> ConsumerStart {
        let row = try database.read { db in
            try Row.fetchOne(db, sql: "SELECT next_position, bound_position FROM checkpoint WHERE consumer = ?",
                             arguments: [consumerName])
        }
        guard let row else { return .beginning }
        guard let bound: String = row["bound_position"] else { return .position(LogPosition(row["next_position"] as Int64)) }
        return .checkpoint(try JSONDecoder().decode(ConsumerPosition.self, from: Data(bound.utf8)))
    }

    /// The next position to apply, from the `checkpoint` table (`nil`: nothing applied yet).
    /// - Throws: `DatabaseError`.
    public func checkpoint() throws -> LogPosition? {
        try database.read { db in try Self.checkpoint(of: consumerName, in: db) }
    }

    /// Opens this read model's consumer on `store`, at the position the database holds, with
    /// the handler keeping the checkpoint (``CheckpointOwner/handler``) and stopping on a
    /// failing event (a read model that skipped one would be wrong).
    /// - Parameter store: The activity store.
    /// - Returns: The consumer; pass its batches to ``apply(_:from:)``.
    /// - Throws: `DatabaseError`, and what ``EventStore/consumer(named:startingAt:options:)`` throws.
    public func consumer(of store: EventStore) throws -> Consumer {
        try store.consumer(named: consumerName, startingAt: try start(),
                           options: ConsumerOptions(onFailure: .stop, checkpoint: .handler))
    }

    /// Applies a batch and moves the checkpoint past it, in one transaction: either both are
    /// in the database or neither is, so a crash at any instant leaves a read model that
    /// matches its checkpoint. Events below the stored checkpoint (delivered again) are
    /// skipped, inside the same transaction.
    /// - Parameters:
    ///   - batch: Events in position order (a batch of `consumer`).
    ///   - consumer: The consumer that delivered them (``consumer(of:)``): it binds the new
    ///     checkpoint to its log's history (``Consumer/position(after:)``).
    /// - Throws: ``ActivityReadModelError`` for an event that does not fit the read model (the
    ///   transaction is rolled back), `DatabaseError`, and what ``Consumer/position(after:)`` throws.
    public func apply(_ batch: [EventEnvelope], from consumer: Consumer) throws {
        guard let last = batch.last else { return }
        let position = try consumer.position(after: last)
        let bound = String(decoding: try JSONEncoder().encode(position), as: UTF8.self)
        try database.write { db in
            let next = try Self.checkpoint(of: consumerName, in: db) ?? 0
            for envelope in batch where envelope.position >= next {
                try apply(envelope, in: db)
            }
            if last.position + 1 > next {
                try db.execute(sql: """
                    INSERT INTO checkpoint (consumer, next_position, bound_position) VALUES (?, ?, ?)
                    ON CONFLICT (consumer) DO UPDATE SET next_position = excluded.next_position, bound_position = excluded.bound_position
                    """, arguments: [consumerName, Int64(position.next), bound])
            }
        }
    }

    private static func checkpoint(of consumer: String, in db: Database) throws -> LogPosition? {
        try Int64.fetchOne(db, sql: "SELECT next_position FROM checkpoint WHERE consumer = ?", arguments: [consumer])
            .map { LogPosition($0) }
    }

    private func apply(_ envelope: EventEnvelope, in db: Database) throws {
        let event: ActivityEvent
        do { event = try codec.decode(envelope) } catch {
            throw ActivityReadModelError(position: envelope.position, message: "undecodable event: \(error)")
        }
        let old = try Row.fetchOne(db, sql: "SELECT start, day, type, minutes FROM activity_row WHERE id = ?",
                                   arguments: [event.activityID.uuidString])
            .map { ActivityReadModelRow(start: $0["start"], day: $0["day"], type: $0["type"], minutes: $0["minutes"]) }
        let new: ActivityReadModelRow?
        switch event {
        case .added(let model):
            guard old == nil else { throw ActivityReadModelError(position: envelope.position, message: "activity \(model.id) added twice") }
            new = ActivityReadModelRow(model)
        case .updated(let model):
            guard old != nil else { throw ActivityReadModelError(position: envelope.position, message: "update of unknown activity \(model.id)") }
            new = ActivityReadModelRow(model)
        case .ended(let id, let date):
            guard var row = old else { throw ActivityReadModelError(position: envelope.position, message: "end of unknown activity \(id)") }
            row.minutes = ActivityReadModelRow.minutes(from: row.start, to: date.timeIntervalSinceReferenceDate)
            new = row
        case .deleted:
            // A delete of an unknown activity is a no-op, as in the store's projection.
            new = nil
        }
        try move(id: event.activityID, from: old, to: new, in: db)
    }

    /// Takes `old`'s contribution out of `daily_total` and puts `new`'s in.
    private func move(id: UUID, from old: ActivityReadModelRow?, to new: ActivityReadModelRow?, in db: Database) throws {
        if let old {
            try db.execute(sql: "UPDATE daily_total SET count = count - 1, minutes = minutes - ? WHERE day = ? AND type = ?",
                           arguments: [old.minutes, old.day, old.type])
            try db.execute(sql: "DELETE FROM daily_total WHERE day = ? AND type = ? AND count = 0", arguments: [old.day, old.type])
        }
        if let new {
            try db.execute(sql: """
                INSERT INTO daily_total (day, type, count, minutes) VALUES (?, ?, 1, ?)
                ON CONFLICT (day, type) DO UPDATE SET count = count + 1, minutes = minutes + excluded.minutes
                """, arguments: [new.day, new.type, new.minutes])
            try db.execute(sql: "INSERT OR REPLACE INTO activity_row (id, start, day, type, minutes) VALUES (?, ?, ?, ?, ?)",
                           arguments: [id.uuidString, new.start, new.day, new.type, new.minutes])
        } else {
            try db.execute(sql: "DELETE FROM activity_row WHERE id = ?", arguments: [id.uuidString])
        }
    }

    // MARK: Reading

    /// The `daily_total` table, ordered by day and type.
    /// - Throws: `DatabaseError`.
    public func dailyTotals() throws -> [DailyTotal] {
        try database.read { db in
            try Row.fetchAll(db, sql: "SELECT day, type, count, minutes FROM daily_total ORDER BY day, type").map {
                DailyTotal(day: $0["day"], type: $0["type"], count: $0["count"], minutes: $0["minutes"])
            }
        }
    }
}

extension ActivityReadModel {
    /// Opens the activity store in `directory` for reading only, alongside its writer if one is
    /// running: the read model never writes to the store (its checkpoint is in the database).
    /// - Parameter directory: The store's directory.
    /// - Returns: The store, with every event committed so far.
    /// - Throws: `LogError` when the directory holds no readable store, `RepositoryError`.
    public static func openStore(readingFrom directory: URL) throws -> EventStore {
        try EventStore(log: try SegmentedLog.openReadOnly(at: directory), directory: directory, snapshotPolicy: .never)
    }

    /// Applies the store's events from the database's checkpoint on, a batch at a time, each
    /// batch in one transaction with its checkpoint (``apply(_:from:)``).
    /// - Parameters:
    ///   - store: The activity store.
    ///   - following: Keep going, picking up what the store's writer appends (polled every
    ///     `pollInterval`), until the task is cancelled; `false`: return once every event the
    ///     store had when this was called is applied.
    ///   - batchSize: The most events per transaction (default, and at most, the consumer's
    ///     `readBatchSize`).
    ///   - pollInterval: How often a follower looks for new events of another process.
    /// - Returns: The checkpoint reached: the next position to apply.
    /// - Throws: ``ActivityReadModelError`` (an event that does not apply: nothing of its batch
    ///   is written), `DatabaseError`, and what ``consumer(of:)`` and the consumer's reads throw.
    @discardableResult
    public func catchUp(with store: EventStore, following: Bool = false, batchSize: Int? = nil,
                        pollInterval: Duration = .milliseconds(100)) async throws -> LogPosition {
        let consumer = try consumer(of: store)
        let end = store.nextPosition
        if !following && consumer.committed >= end { return consumer.committed }
        // Another process's appends reach a read-only store only when it refreshes.
        let poller = following ? Task {
            while !Task.isCancelled {
                _ = try? store.refresh()
                try? await Task.sleep(for: pollInterval)
            }
        } : nil
        defer { poller?.cancel() }
        for try await batch in consumer.batches(maxCount: batchSize) {
            // One transaction: the batch's changes and the new checkpoint, or neither.
            try apply(batch, from: consumer)
            if !following && batch[batch.count - 1].position + 1 >= end { break }
        }
        return try checkpoint() ?? 0
    }
}
