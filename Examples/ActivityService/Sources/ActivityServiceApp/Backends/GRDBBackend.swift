public import Activities
public import ActivityWorkload
import EventKernel
public import Foundation
public import GRDB
public import ServiceLifecycle
import Synchronization

/// The same service on SQLite through GRDB: the backend swap the repository pattern promises,
/// and the peer the load test measures EventKernel against.
///
/// Schema: `activity` (id BLOB primary key, dates as REAL seconds since 2001-01-01, `Date`'s own
/// representation, so a date and a cursor round-trip exactly; type; version) with an index on
/// `(startDate, id)`, the order of every query; `activity_change` (id, version, recorded-at,
/// kind, the state after the change), keyed by `(id, version)`, for history and versions that
/// keep counting after a delete. WAL mode (`DatabasePool`); `synchronous = FULL` when synced,
/// so a write returns once it is on disk, as EventKernel's synced policy does.
///
/// Every write is one transaction that checks the state and refuses bad input with the same
/// `RepositoryError` as the event-sourced repository (`ActivityModel.validate()`,
/// `ActivityQuery.validate()`); live feeds are GRDB `ValueObservation`s.
public final class GRDBBackend: ActivityBackend {
    /// The database.
    public let pool: DatabasePool
    public var name: String { "grdb" }
    private let observations = Mutex<[UUID: Task<Void, Never>]>([:])

    /// Opens (creating if needed) the database `activities.sqlite` in `directory`.
    /// - Parameters:
    ///   - directory: Where the database lives (created if needed).
    ///   - synced: `synchronous = FULL` (a write returns once on disk) or `NORMAL` (WAL: durable
    ///     at the next checkpoint, may lose the last transactions on power loss).
    /// - Throws: `DatabaseError` when the database cannot be opened or migrated.
    public init(directory: URL, synced: Bool = true) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = Configuration()
        let synchronous = synced ? "FULL" : "NORMAL"
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = \(synchronous)") }
        pool = try DatabasePool(path: directory.appending(path: "activities.sqlite").path, configuration: configuration)
        // The pool sets `synchronous = NORMAL` on its writer when it enables WAL, after
        // `prepareDatabase` ran: set it again there, or commits would not be synced (checked
        // by GRDBDurabilityTests).
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = \(synchronous)") }
        try pool.write { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS activity (
                    id BLOB PRIMARY KEY NOT NULL,
                    startDate DOUBLE NOT NULL,
                    endDate DOUBLE,
                    type TEXT NOT NULL,
                    version INTEGER NOT NULL);
                CREATE INDEX IF NOT EXISTS activity_start ON activity(startDate, id);
                CREATE TABLE IF NOT EXISTS activity_change (
                    id BLOB NOT NULL,
                    version INTEGER NOT NULL,
                    recordedAt DOUBLE NOT NULL,
                    kind TEXT NOT NULL,
                    startDate DOUBLE,
                    endDate DOUBLE,
                    type TEXT,
                    PRIMARY KEY (id, version)) WITHOUT ROWID;
                """)
        }
    }

    public var lifecycle: any Service { GRDBCloseService(backend: self) }

    /// Ends the live feeds and closes the database.
    /// - Throws: `DatabaseError` when the database cannot be closed.
    public func close() throws {
        let feeds = observations.withLock { feeds in
            defer { feeds.removeAll() }
            return Array(feeds.values)
        }
        for feed in feeds { feed.cancel() }
        try pool.close()
    }

    // MARK: Queries

    public func fetch(query: ActivityQuery) async throws -> [ActivityModel] {
        try Self.check(query)
        return try await pool.read { db in try Self.fetch(db, query) }
    }

    public func fetch(range: ActivityRangeQuery) async throws -> [ActivityModel] {
        do { try range.validate() } catch { throw RepositoryError.invalidQuery(error.message) }
        if range.types?.isEmpty == true { return [] }
        var sql: String
        var arguments: [(any DatabaseValueConvertible)?] = [range.upperBound.timeIntervalSinceReferenceDate]
        switch range.kind {
        case .startingIn:
            sql = "SELECT id, startDate, endDate, type FROM activity WHERE startDate <= ? AND startDate >= ?"
            arguments.append(range.lowerBound.timeIntervalSinceReferenceDate)
        case .overlapping:
            sql = "SELECT id, startDate, endDate, type FROM activity WHERE startDate <= ? AND (endDate >= ? OR endDate IS NULL)"
            arguments.append(range.lowerBound.timeIntervalSinceReferenceDate)
        }
        Self.appendTypes(range.types, to: &sql, &arguments)
        Self.appendOrder(range.sortOrder, limit: range.effectiveLimit, offset: 0, to: &sql, &arguments)
        let (statement, values) = (sql, StatementArguments(arguments))
        return try await pool.read { db in try Self.models(db, statement, values) }
    }

    static func check(_ query: ActivityQuery) throws {
        do { try query.validate() } catch { throw RepositoryError.invalidQuery(error.message) }
    }

    /// The one translation of an `ActivityQuery` into SQL (fetch and observe).
    static func fetch(_ db: Database, _ query: ActivityQuery) throws -> [ActivityModel] {
        if query.types?.isEmpty == true { return [] }
        var sql = "SELECT id, startDate, endDate, type FROM activity WHERE 1"
        var arguments: [(any DatabaseValueConvertible)?] = []
        if let after = query.afterDate {
            sql += " AND startDate > ?"
            arguments.append(after.timeIntervalSinceReferenceDate)
        }
        if let before = query.beforeDate {
            sql += " AND startDate < ?"
            arguments.append(before.timeIntervalSinceReferenceDate)
        }
        if let cursor = query.cursor {
            // Row values compare like the (startDate, id bytes) order, and the index serves them.
            sql += query.sortOrder == .oldestFirst ? " AND (startDate, id) > (?, ?)" : " AND (startDate, id) < (?, ?)"
            arguments.append(cursor.startDate.timeIntervalSinceReferenceDate)
            arguments.append(cursor.id)
        }
        appendTypes(query.types, to: &sql, &arguments)
        appendOrder(query.sortOrder, limit: query.effectiveLimit, offset: query.offset, to: &sql, &arguments)
        return try models(db, sql, StatementArguments(arguments))
    }

    private static func appendTypes(_ types: Set<ActivityType>?, to sql: inout String, _ arguments: inout [(any DatabaseValueConvertible)?]) {
        guard let types else { return }
        sql += " AND type IN (" + Array(repeating: "?", count: types.count).joined(separator: ", ") + ")"
        arguments.append(contentsOf: types.map(\.rawValue).sorted())
    }

    private static func appendOrder(
        _ order: ActivitySortOrder, limit: Int?, offset: Int, to sql: inout String, _ arguments: inout [(any DatabaseValueConvertible)?]
    ) {
        sql += order == .oldestFirst ? " ORDER BY startDate, id" : " ORDER BY startDate DESC, id DESC"
        sql += " LIMIT ? OFFSET ?"
        arguments.append(limit ?? -1)
        arguments.append(offset)
    }

    private static func models(_ db: Database, _ sql: String, _ arguments: StatementArguments) throws -> [ActivityModel] {
        let statement = try db.cachedStatement(sql: sql)
        let rows = try Row.fetchCursor(statement, arguments: arguments)
        var models: [ActivityModel] = []
        while let row = try rows.next() {
            let end: Double? = row[2]
            models.append(ActivityModel(
                id: row[0], startDate: Date(timeIntervalSinceReferenceDate: row[1]),
                endDate: end.map(Date.init(timeIntervalSinceReferenceDate:)), type: ActivityType(rawValue: row[3])))
        }
        return models
    }

    public func versionedActivity(id: UUID) async throws -> (activity: ActivityModel, version: UInt64)? {
        try await pool.read { db in
            try Self.current(db, id).map { ($0.model, $0.version) }
        }
    }

    public func history(of id: UUID) async throws -> [ActivityChange] {
        try await pool.read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT version, recordedAt, kind, startDate, endDate, type FROM activity_change
                WHERE id = ? ORDER BY version
                """, arguments: [id])
            return rows.map { row in
                let start: Double? = row[3], end: Double? = row[4], type: String? = row[5]
                let activity = start.map {
                    ActivityModel(id: id, startDate: Date(timeIntervalSinceReferenceDate: $0),
                                  endDate: end.map(Date.init(timeIntervalSinceReferenceDate:)), type: ActivityType(rawValue: type ?? ""))
                }
                return ActivityChange(version: row[0], recordedAt: Date(timeIntervalSinceReferenceDate: row[1]),
                                      kind: ActivityChange.Kind(rawValue: row[2]) ?? .updated, activity: activity)
            }
        }
    }

    // MARK: Writes (each one transaction: check, write the row, record the change)

    public func add(_ activity: ActivityModel) async throws {
        try activity.validate()
        try await pool.write { db in try Self.add(db, activity) }
    }

    public func update(_ activity: ActivityModel) async throws {
        try activity.validate()
        try await pool.write { db in try Self.replace(db, activity, expectedVersion: nil) }
    }

    public func update(_ activity: ActivityModel, expectedVersion: UInt64) async throws {
        try activity.validate()
        try await pool.write { db in try Self.replace(db, activity, expectedVersion: expectedVersion) }
    }

    public func end(id: UUID, at date: Date) async throws {
        try await pool.write { db in try Self.end(db, id, at: date) }
    }

    @discardableResult
    public func delete(id: UUID) async throws -> Bool {
        try await pool.write { db in try Self.delete(db, id) }
    }

    /// Applies a generated history (`eventkernel`'s workload) in one transaction: the seeding
    /// of the load test, checked as single writes are.
    public func apply(_ operations: [ActivityOperation]) async throws {
        try await pool.write { db in
            for operation in operations {
                switch operation {
                case .add(let model): try model.validate(); try Self.add(db, model)
                case .update(let model): try model.validate(); try Self.replace(db, model, expectedVersion: nil)
                case .end(let id, let date): try Self.end(db, id, at: date)
                case .delete(let id): _ = try Self.delete(db, id)
                }
            }
        }
    }

    private static func current(_ db: Database, _ id: UUID) throws -> (model: ActivityModel, version: UInt64)? {
        let statement = try db.cachedStatement(sql: "SELECT startDate, endDate, type, version FROM activity WHERE id = ?")
        guard let row = try Row.fetchOne(statement, arguments: [id]) else { return nil }
        let end: Double? = row[1]
        return (ActivityModel(id: id, startDate: Date(timeIntervalSinceReferenceDate: row[0]),
                              endDate: end.map(Date.init(timeIntervalSinceReferenceDate:)), type: ActivityType(rawValue: row[2])),
                row[3])
    }

    private static func add(_ db: Database, _ activity: ActivityModel) throws {
        guard try current(db, activity.id) == nil else { throw RepositoryError.alreadyExists(.uuid(activity.id)) }
        // A re-added id continues its versions, as its event stream does.
        let last = try UInt64.fetchOne(db.cachedStatement(sql: "SELECT MAX(version) FROM activity_change WHERE id = ?"),
                                       arguments: [activity.id]) ?? 0
        try db.cachedStatement(sql: "INSERT INTO activity (id, startDate, endDate, type, version) VALUES (?, ?, ?, ?, ?)")
            .execute(arguments: [activity.id, activity.startDate.timeIntervalSinceReferenceDate,
                                 activity.endDate?.timeIntervalSinceReferenceDate, activity.type.rawValue, last + 1])
        try record(db, .added, activity.id, version: last + 1, activity)
    }

    private static func replace(_ db: Database, _ activity: ActivityModel, expectedVersion: UInt64?) throws {
        guard let (_, version) = try current(db, activity.id) else { throw RepositoryError.notFound(.uuid(activity.id)) }
        if let expectedVersion, expectedVersion != version {
            throw RepositoryError.conflict(stream: ActivityEventCodec.stream(of: activity.id), expected: expectedVersion, actual: version)
        }
        try write(db, activity, version: version + 1)
        try record(db, .updated, activity.id, version: version + 1, activity)
    }

    private static func end(_ db: Database, _ id: UUID, at date: Date) throws {
        guard let (existing, version) = try current(db, id) else { throw RepositoryError.notFound(.uuid(id)) }
        var ended = existing
        ended.endDate = date
        try ended.validate()
        try write(db, ended, version: version + 1)
        try record(db, .ended, id, version: version + 1, ended)
    }

    private static func delete(_ db: Database, _ id: UUID) throws -> Bool {
        guard let (_, version) = try current(db, id) else { return false }
        try db.cachedStatement(sql: "DELETE FROM activity WHERE id = ?").execute(arguments: [id])
        try record(db, .deleted, id, version: version + 1, nil)
        return true
    }

    private static func write(_ db: Database, _ activity: ActivityModel, version: UInt64) throws {
        try db.cachedStatement(sql: "UPDATE activity SET startDate = ?, endDate = ?, type = ?, version = ? WHERE id = ?")
            .execute(arguments: [activity.startDate.timeIntervalSinceReferenceDate, activity.endDate?.timeIntervalSinceReferenceDate,
                                 activity.type.rawValue, version, activity.id])
    }

    private static func record(_ db: Database, _ kind: ActivityChange.Kind, _ id: UUID, version: UInt64, _ activity: ActivityModel?) throws {
        try db.cachedStatement(sql: """
            INSERT INTO activity_change (id, version, recordedAt, kind, startDate, endDate, type) VALUES (?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [id, version, Date().timeIntervalSinceReferenceDate, kind.rawValue,
                                    activity?.startDate.timeIntervalSinceReferenceDate,
                                    activity?.endDate?.timeIntervalSinceReferenceDate, activity?.type.rawValue])
    }

    // MARK: Observation

    /// A `ValueObservation` of the query (its current result at once, then each changed one,
    /// duplicates removed); ends when the consumer stops or the backend closes. A malformed
    /// query ends it at once, as the event-sourced repository's does.
    public func observe(query: ActivityQuery) -> AsyncStream<[ActivityModel]> {
        AsyncStream { continuation in
            guard (try? Self.check(query)) != nil else { return continuation.finish() }
            let key = UUID()
            let values = ValueObservation.tracking { db in try Self.fetch(db, query) }.removeDuplicates().values(in: pool)
            let task = Task {
                do { for try await result in values { continuation.yield(result) } } catch {}
                continuation.finish()
            }
            observations.withLock { $0[key] = task }
            continuation.onTermination = { [weak self] _ in
                task.cancel()
                _ = self?.observations.withLock { $0.removeValue(forKey: key) }
            }
        }
    }
}

/// Closes a ``GRDBBackend`` when the service group shuts down.
struct GRDBCloseService: Service {
    let backend: GRDBBackend

    func run() async throws {
        try? await gracefulShutdown()
        try backend.close()
    }
}
