// The SQLite peer, through GRDB: the store a Swift developer would otherwise pick.
//
// Schema: one table, UUID primary key (16-byte blob, GRDB's encoding), dates as REAL seconds
// since 1970 (cheaper than GRDB's default text dates, so the peer is at its best), indexes on
// startDate and type, ANALYZE run. WAL mode (DatabasePool); synchronous NORMAL for the
// buffered rows, FULL for the synced rows. Queries go through cached prepared statements and
// either decode records (a FetchableRecord struct) or return raw rows.
import Activities
import ActivityWorkload
import Foundation
import GRDB

/// A FetchableRecord decoding one row into an ActivityModel.
public struct ActivityRecord: FetchableRecord, Sendable {
    public var model: ActivityModel

    public init(row: Row) throws {
        let end: Double? = row[2]
        model = ActivityModel(
            id: row[0],
            startDate: Date(timeIntervalSince1970: row[1]),
            endDate: end.map { Date(timeIntervalSince1970: $0) },
            type: ActivityType(rawValue: row[3]))
    }
}

public final class GRDBActivityStore: Sendable {
    public enum Synchronous: String, Sendable { case off = "OFF", normal = "NORMAL", full = "FULL" }

    public let pool: DatabasePool
    public let path: String

    /// Opens a WAL pool whose writer commits with `synchronous`.
    ///
    /// The pragma is set on the writer after the pool is open, and read back: GRDB's WAL set-up
    /// runs after `Configuration.prepareDatabase` and sets `synchronous = NORMAL`, so a pragma in
    /// `prepareDatabase` silently left every "FULL" peer at NORMAL, which syncs the WAL only at
    /// checkpoints (measured: 32 `fdatasync` calls for 2,000 one-row commits). Every synced
    /// comparison before this fix was against a peer that did not sync its commits.
    /// - Throws: When the writer does not report the mode asked for.
    public static func openPool(path: String, synchronous: Synchronous, configuration: Configuration = Configuration()) throws -> DatabasePool {
        let pool = try DatabasePool(path: path, configuration: configuration)
        // Outside a transaction: SQLite refuses to change the safety level inside one.
        let mode = try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous.rawValue)")
            return try Int.fetchOne(db, sql: "PRAGMA synchronous")
        }
        let expected = switch synchronous { case .off: 0; case .normal: 1; case .full: 2 }
        guard mode == expected else {
            throw DatabaseError(message: "PRAGMA synchronous is \(mode.map(String.init) ?? "unknown"), not \(synchronous.rawValue), on the writer of \(path)")
        }
        return pool
    }

    public init(path: String, synchronous: Synchronous) throws {
        self.path = path
        pool = try Self.openPool(path: path, synchronous: synchronous)
        try pool.write { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS activity (
                    id BLOB PRIMARY KEY NOT NULL,
                    startDate DOUBLE NOT NULL,
                    endDate DOUBLE,
                    type TEXT NOT NULL);
                CREATE INDEX IF NOT EXISTS activity_startDate ON activity(startDate);
                CREATE INDEX IF NOT EXISTS activity_type ON activity(type);
                """)
        }
    }

    static let insertSQL = "INSERT INTO activity (id, startDate, endDate, type) VALUES (?, ?, ?, ?)"

    static func insert(_ m: ActivityModel, _ db: Database) throws {
        try db.cachedStatement(sql: insertSQL).execute(arguments: [
            m.id, m.startDate.timeIntervalSince1970, m.endDate?.timeIntervalSince1970, m.type.rawValue,
        ])
    }

    /// Inserts the activities in one transaction.
    public func insert(_ models: [ActivityModel]) async throws {
        try await pool.write { db in
            for m in models { try Self.insert(m, db) }
        }
    }

    /// Inserts one activity in its own transaction.
    public func insert(_ model: ActivityModel) async throws {
        try await pool.write { db in try Self.insert(model, db) }
    }

    /// Applies workload operations (fixture building), in transactions of 10,000.
    public func apply<S: Sequence>(_ ops: S) throws where S.Element == ActivityOperation {
        var chunk: [ActivityOperation] = []
        func flush() throws {
            try pool.write { db in
                for op in chunk {
                    switch op {
                    case .add(let m): try Self.insert(m, db)
                    case .update(let m):
                        try db.cachedStatement(sql: "UPDATE activity SET startDate = ?, endDate = ?, type = ? WHERE id = ?")
                            .execute(arguments: [m.startDate.timeIntervalSince1970, m.endDate?.timeIntervalSince1970, m.type.rawValue, m.id])
                    case .end(let id, let at):
                        try db.cachedStatement(sql: "UPDATE activity SET endDate = ? WHERE id = ?")
                            .execute(arguments: [at.timeIntervalSince1970, id])
                    case .delete(let id):
                        try db.cachedStatement(sql: "DELETE FROM activity WHERE id = ?").execute(arguments: [id])
                    }
                }
            }
            chunk.removeAll(keepingCapacity: true)
        }
        for op in ops {
            chunk.append(op)
            if chunk.count == 10_000 { try flush() }
        }
        if !chunk.isEmpty { try flush() }
    }

    /// ANALYZE, then a truncating checkpoint so that the database file holds everything.
    public func finish() throws {
        try pool.write { db in try db.execute(sql: "ANALYZE") }
        _ = try pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
    }

    // MARK: Queries (each in its own read transaction, as an app's repository does)

    /// "7-day window, newest first, limit": `ORDER BY startDate DESC` lets SQLite walk the
    /// startDate index backwards and stop at the limit.
    public static let windowSQL = "SELECT id, startDate, endDate, type FROM activity WHERE startDate > ? AND startDate < ? ORDER BY startDate DESC LIMIT ?"
    static let windowTypesSQL = "SELECT id, startDate, endDate, type FROM activity WHERE startDate > ? AND startDate < ? AND type IN (?, ?) ORDER BY startDate DESC LIMIT ?"
    static let rangeSQL = "SELECT id, startDate, endDate, type FROM activity WHERE startDate >= ? AND startDate <= ? ORDER BY startDate"
    /// Overlap as apps write it: the start bound is all an index can use.
    static let overlapSQL = "SELECT id, startDate, endDate, type FROM activity WHERE startDate <= ? AND (endDate >= ? OR endDate IS NULL) ORDER BY startDate"

    public static func arguments(_ q: ActivityQuery) -> StatementArguments {
        var args: [(any DatabaseValueConvertible)?] = [q.afterDate?.timeIntervalSince1970 ?? -Double.infinity,
                                                       q.beforeDate?.timeIntervalSince1970 ?? Double.infinity]
        if let types = q.types { for t in types.map(\.rawValue).sorted() { args.append(t) } }
        args.append(q.limit ?? -1)
        return StatementArguments(args)
    }

    public func records(_ q: ActivityQuery) throws -> [ActivityModel] {
        try pool.read { db in
            let stmt = try db.cachedStatement(sql: q.types == nil ? Self.windowSQL : Self.windowTypesSQL)
            return try ActivityRecord.fetchAll(stmt, arguments: Self.arguments(q)).map(\.model)
        }
    }

    public func rows(_ q: ActivityQuery) throws -> [Row] {
        try pool.read { db in
            let stmt = try db.cachedStatement(sql: q.types == nil ? Self.windowSQL : Self.windowTypesSQL)
            return try Row.fetchAll(stmt, arguments: Self.arguments(q))
        }
    }

    static func rangeStatement(_ r: ActivityRangeQuery, _ db: Database) throws -> (Statement, StatementArguments) {
        switch r.kind {
        case .startingIn:
            return (try db.cachedStatement(sql: rangeSQL), [r.lowerBound.timeIntervalSince1970, r.upperBound.timeIntervalSince1970])
        case .overlapping:
            return (try db.cachedStatement(sql: overlapSQL), [r.upperBound.timeIntervalSince1970, r.lowerBound.timeIntervalSince1970])
        }
    }

    public func records(_ r: ActivityRangeQuery) throws -> [ActivityModel] {
        try pool.read { db in
            let (stmt, args) = try Self.rangeStatement(r, db)
            return try ActivityRecord.fetchAll(stmt, arguments: args).map(\.model)
        }
    }

    public func rows(_ r: ActivityRangeQuery) throws -> [Row] {
        try pool.read { db in
            let (stmt, args) = try Self.rangeStatement(r, db)
            return try Row.fetchAll(stmt, arguments: args)
        }
    }

    public func count() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM activity") ?? 0 }
    }
}

public enum GRDBFixtures {
    /// The SQLite database holding the seeded history of `n` activities (same operations as the
    /// EventKernel fixture), ANALYZEd and checkpointed. Built once, cached on disk.
    public static func database(n: Int = BenchEnv.n) throws -> String {
        let url = BenchEnv.cacheDirectory.appending(path: "grdb-v\(BenchEnv.fixtureVersion)-n\(n).sqlite")
        if FileManager.default.fileExists(atPath: url.path) { return url.path }
        let building = BenchEnv.cacheDirectory.appending(path: "building-\(getpid())-\(url.lastPathComponent)")
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: building.path + suffix) }
        let started = ContinuousClock.now
        do {
            let store = try GRDBActivityStore(path: building.path, synchronous: .off)
            try store.apply(Workload.history(n))
            try store.finish()
            try store.pool.close()
        }
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: building.path + suffix) }
        try FileManager.default.moveItem(at: building, to: url)
        FileHandle.standardError.write("fixture \(url.lastPathComponent) built in \(ContinuousClock.now - started)\n".data(using: .utf8)!)
        return url.path
    }
}
