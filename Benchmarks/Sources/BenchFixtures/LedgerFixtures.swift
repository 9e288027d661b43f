// The finance ledger workload (Examples/Finance's domain): N transactions over 50 accounts and
// 6 categories, random dates over two years, from a fixed seed; the EventKernel store and the
// SQLite database holding it, built once and cached on disk like the other fixtures.
import ActivityWorkload
import EventKernel
import EventLog
import Foundation
import GRDB
import Synchronization

/// The shape of Examples/Finance's `Transaction` (redeclared here: the example is not a product).
public struct LedgerTransaction: Identifiable, Codable, Sendable, Hashable {
    public var id: UUID
    public var accountID: UUID
    public var date: Date
    public var amount: Decimal
    public var category: String
    public var note: String?

    public init(id: UUID = UUID(), accountID: UUID, date: Date, amount: Decimal, category: String, note: String? = nil) {
        self.id = id; self.accountID = accountID; self.date = date; self.amount = amount; self.category = category; self.note = note
    }
}

/// The seeded ledger: `transactions(n)` is the fixture's content, in insertion order (dates are
/// random, so insertion order is not date order); `LedgerAddStream` continues it for appends.
public enum Ledger {
    public static let seed: UInt64 = 4_242
    public static let accountCount = 50
    public static let categories = ["groceries", "rent", "salary", "transport", "restaurants", "utilities"]
    /// The history spans two years ending at `BenchEnv.historyEnd`.
    public static let span: TimeInterval = 2 * 365 * 86_400
    public static var start: Date { BenchEnv.historyEnd.addingTimeInterval(-span) }

    /// The 50 account ids (fixed by the seed).
    public static let accounts: [UUID] = {
        var rng = SeededRandom(seed: seed &+ 1)
        return (0..<accountCount).map { _ in uuid(&rng) }
    }()

    static func uuid(_ rng: inout SeededRandom) -> UUID {
        let a = rng.next(), b = rng.next()
        var bytes = (UInt8(0), UInt8(0), UInt8(0), UInt8(0), UInt8(0), UInt8(0), UInt8(0), UInt8(0),
                     UInt8(0), UInt8(0), UInt8(0), UInt8(0), UInt8(0), UInt8(0), UInt8(0), UInt8(0))
        withUnsafeMutableBytes(of: &bytes) { raw in
            raw.storeBytes(of: a, toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: b, toByteOffset: 8, as: UInt64.self)
            raw[6] = (raw[6] & 0x0F) | 0x40  // version 4
            raw[8] = (raw[8] & 0x3F) | 0x80  // RFC 4122 variant
        }
        return UUID(uuid: bytes)
    }

    /// One transaction: a random account, a random second in the two years, an amount in cents
    /// (85% expenses of 1.00-500.00, 15% income of 10.00-5,000.00), a category, and a short
    /// note on one transaction in five.
    static func transaction(_ rng: inout SeededRandom, window: (start: Date, span: TimeInterval) = (Ledger.start, Ledger.span)) -> LedgerTransaction {
        let id = uuid(&rng)
        let account = accounts[Int(rng.next() % UInt64(accountCount))]
        let date = window.start.addingTimeInterval(Double(rng.next() % UInt64(window.span)))
        let category = categories[Int(rng.next() % UInt64(categories.count))]
        let income = rng.next() % 100 < 15
        let cents = income ? Int64(1_000 + rng.next() % 499_000) : -Int64(100 + rng.next() % 49_900)
        let note: String? = rng.next() % 5 == 0 ? "ref \(rng.next() % 1_000_000)" : nil
        return LedgerTransaction(id: id, accountID: account, date: date, amount: Decimal(cents: cents), category: category, note: note)
    }

    /// The ledger's `n` transactions, in insertion order.
    public static func transactions(_ n: Int) -> [LedgerTransaction] {
        var rng = SeededRandom(seed: seed)
        return (0..<n).map { _ in transaction(&rng) }
    }

    /// The EventKernel repository of the ledger, declared as Examples/Finance declares it.
    public static func repository(on store: EventStore) throws -> EventSourcedRepository<LedgerTransaction> {
        try EventSourcedRepository(
            store: store, typeName: "Transaction",
            indexes: [.on(\.accountID, \.date), .on(\.date), .on(\.category, \.date)],
            defaultOrder: [.ascending(\.date)])
    }

    /// The 7-day windows the range benchmark cycles through (16, spread over the history).
    public static let weekWindows: [ClosedRange<Date>] = (0..<16).map { k in
        let lower = start.addingTimeInterval(Double(k) * (span - 7 * 86_400) / 16).addingTimeInterval(3_600)
        return lower...lower.addingTimeInterval(7 * 86_400)
    }

    /// The page benchmark's offset: 10,000, or half the ledger when it is smaller (smoke runs).
    public static func pageOffset(_ n: Int) -> Int { min(10_000, n / 2) }
}

extension Decimal {
    /// An amount of `cents` hundredths, exactly.
    public init(cents: Int64) {
        self.init(sign: cents < 0 ? .minus : .plus, exponent: -2, significand: Decimal(cents.magnitude))
    }

    /// The amount in hundredths (exact for amounts with at most two decimals below 2^53 / 100).
    /// Through Double: `NSDecimalNumber.int64Value` costs ~270 ns, this ~50 ns.
    public var cents: Int64 {
        Int64((NSDecimalNumber(decimal: self).doubleValue * 100).rounded())
    }
}

/// An endless, thread-safe stream of new ledger transactions (another seed, dates in the
/// ledger's two years), so that appends never repeat an id.
public final class LedgerAddStream: Sendable {
    private let rng: Mutex<SeededRandom>

    public init(seed: UInt64 = 77) { rng = Mutex(SeededRandom(seed: seed)) }

    public func next(_ k: Int) -> [LedgerTransaction] {
        rng.withLock { rng in (0..<k).map { _ in Ledger.transaction(&rng) } }
    }
}

/// An open EventKernel ledger: the store and its transaction repository.
public final class EventKernelLedger: Sendable {
    public let store: EventStore
    public let transactions: EventSourcedRepository<LedgerTransaction>

    /// Opens (or creates) the ledger in `url`. Snapshots are never written by default, so cached
    /// fixtures stay as built.
    public init(_ url: URL, durability: DurabilityPolicy = .buffered, preallocate: Bool = false,
                snapshots: SnapshotPolicy = .never) throws {
        store = try EventStore.open(at: url, log: SegmentedLog.Configuration(durability: durability, preallocate: preallocate),
                                    snapshotPolicy: snapshots)
        transactions = try Ledger.repository(on: store)
    }

    public func close() async throws { try await store.close() }
}

/// The SQLite peer for the ledger, through GRDB, as a competent GRDB user writes it:
///
/// - `id` and `accountID` are 16-byte BLOBs (GRDB's own encoding of `UUID`); `id` is the
///   primary key of an ordinary rowid table (what `t.primaryKey("id", .blob)` creates).
/// - `date` is REAL seconds since 1970 (cheaper than GRDB's default text dates: the peer at its
///   best, as in the activity peer).
/// - `amount` is INTEGER cents (what finance apps store; GRDB's default for `Decimal` is TEXT,
///   larger and parsed on every read).
/// - Indexes (accountID, date), (date), (category, date): each query below is answered from
///   one of them (`EXPLAIN QUERY PLAN` checked), ANALYZE run. WAL (`DatabasePool`); synchronous
///   NORMAL for batch writes and FULL for the synced single saves. Cached prepared statements;
///   every read in its own read transaction (`pool.read`), decoding rows into `LedgerTransaction`.
public final class GRDBLedgerStore: Sendable {
    public let pool: DatabasePool

    public init(path: String, synchronous: GRDBActivityStore.Synchronous, cacheMiB: Int? = nil) throws {
        var config = Configuration()
        config.prepareDatabase { db in
            if let cacheMiB { try db.execute(sql: "PRAGMA cache_size = -\(cacheMiB * 1024)") }
        }
        pool = try GRDBActivityStore.openPool(path: path, synchronous: synchronous, configuration: config)
        try pool.write { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS ledgerTransaction (
                    id BLOB PRIMARY KEY NOT NULL,
                    accountID BLOB NOT NULL,
                    date DOUBLE NOT NULL,
                    amount INTEGER NOT NULL,
                    category TEXT NOT NULL,
                    note TEXT);
                CREATE INDEX IF NOT EXISTS ledgerTransaction_account_date ON ledgerTransaction(accountID, date);
                CREATE INDEX IF NOT EXISTS ledgerTransaction_date ON ledgerTransaction(date);
                CREATE INDEX IF NOT EXISTS ledgerTransaction_category_date ON ledgerTransaction(category, date);
                """)
        }
    }

    static let insertSQL = "INSERT INTO ledgerTransaction (id, accountID, date, amount, category, note) VALUES (?, ?, ?, ?, ?, ?)"
    static let columns = "id, accountID, date, amount, category, note"
    public static let newestSQL = "SELECT \(columns) FROM ledgerTransaction WHERE accountID = ? ORDER BY date DESC LIMIT ?"
    public static let rangeSQL = "SELECT \(columns) FROM ledgerTransaction WHERE date >= ? AND date <= ? ORDER BY date"
    public static let pageSQL = "SELECT \(columns) FROM ledgerTransaction ORDER BY date LIMIT ? OFFSET ?"
    public static let countSQL = "SELECT COUNT(*) FROM ledgerTransaction WHERE category = ?"

    static func insert(_ t: LedgerTransaction, _ db: Database) throws {
        try db.cachedStatement(sql: insertSQL).execute(arguments: [
            t.id, t.accountID, t.date.timeIntervalSince1970, t.amount.cents, t.category, t.note,
        ])
    }

    /// Inserts the transactions in one write transaction.
    public func insert(_ transactions: [LedgerTransaction]) async throws {
        try await pool.write { db in for t in transactions { try Self.insert(t, db) } }
    }

    /// Inserts one transaction in its own write transaction.
    public func insert(_ transaction: LedgerTransaction) async throws {
        try await pool.write { db in try Self.insert(transaction, db) }
    }

    /// Fixture building: synchronous inserts in transactions of 10,000.
    public func load(_ transactions: [LedgerTransaction]) throws {
        for start in stride(from: 0, to: transactions.count, by: 10_000) {
            try pool.write { db in for t in transactions[start..<min(start + 10_000, transactions.count)] { try Self.insert(t, db) } }
        }
    }

    /// ANALYZE, then a truncating checkpoint so that the database file holds everything.
    public func finish() throws {
        try pool.write { db in try db.execute(sql: "ANALYZE") }
        _ = try pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
    }

    public func newest(account: UUID, limit: Int) throws -> [LedgerTransaction] {
        try pool.read { db in try LedgerRecord.fetchAll(db.cachedStatement(sql: Self.newestSQL), arguments: [account, limit]).map(\.transaction) }
    }

    public func range(_ window: ClosedRange<Date>) throws -> [LedgerTransaction] {
        try pool.read { db in
            try LedgerRecord.fetchAll(db.cachedStatement(sql: Self.rangeSQL),
                                      arguments: [window.lowerBound.timeIntervalSince1970, window.upperBound.timeIntervalSince1970]).map(\.transaction)
        }
    }

    public func page(offset: Int, limit: Int) throws -> [LedgerTransaction] {
        try pool.read { db in try LedgerRecord.fetchAll(db.cachedStatement(sql: Self.pageSQL), arguments: [limit, offset]).map(\.transaction) }
    }

    public func count(category: String) throws -> Int {
        try pool.read { db in try Int.fetchOne(db.cachedStatement(sql: Self.countSQL), arguments: [category]) ?? 0 }
    }

    public func count() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM ledgerTransaction") ?? 0 }
    }

    /// `EXPLAIN QUERY PLAN` of each benchmark query (printed once by the benchmark, to show
    /// which index answers it).
    public func plans() throws -> [String] {
        try pool.read { db in
            let queries: [(String, StatementArguments)] = [
                (Self.newestSQL, [Ledger.accounts[0], 50]), (Self.rangeSQL, [0.0, 1.0]),
                (Self.pageSQL, [40, 10_000]), (Self.countSQL, ["rent"]),
            ]
            return try queries.map { sql, args in
                let details = try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: args).map { $0["detail"] as String }
                return "\(sql) -> \(details.joined(separator: "; "))"
            }
        }
    }
}

/// A FetchableRecord decoding one ledger row.
public struct LedgerRecord: FetchableRecord, Sendable {
    public var transaction: LedgerTransaction

    public init(row: Row) throws {
        transaction = LedgerTransaction(
            id: row[0], accountID: row[1], date: Date(timeIntervalSince1970: row[2]),
            amount: Decimal(cents: row[3]), category: row[4], note: row[5])
    }
}

public enum LedgerFixtures {
    static let version = 4  // 2: repository snapshot layout 4; 3: layout 5 (deleted versions), version table 3; 4: envelope format 3
    /// The EventKernel store's own: 5, decimals in their parts (binary entity tag 0x10). The
    /// GRDB file keeps `version`, so it is not rebuilt for a change on this side.
    static let storeVersion = 5

    /// The EventKernel ledger of `n` transactions (added with `addAll` in batches of 1,000,
    /// buffered, no preallocation), with snapshots written at the end. Built once, cached.
    public static func store(n: Int = BenchEnv.ledgerN) async throws -> URL {
        let url = BenchEnv.cacheDirectory.appending(path: "ledger-ek-v\(storeVersion)-n\(n)")
        if FileManager.default.fileExists(atPath: url.path) { return url }
        let building = BenchEnv.cacheDirectory.appending(path: "building-\(getpid())-\(url.lastPathComponent)")
        try? FileManager.default.removeItem(at: building)
        let started = ContinuousClock.now
        let ledger = try EventKernelLedger(building)
        let all = Ledger.transactions(n)
        for start in stride(from: 0, to: all.count, by: 1_000) {
            try await ledger.transactions.addAll(Array(all[start..<min(start + 1_000, all.count)]))
        }
        try await ledger.store.writeSnapshots()
        try await ledger.close()
        try? FileManager.default.removeItem(at: building.appending(path: ".lock"))
        try FileManager.default.moveItem(at: building, to: url)
        FileHandle.standardError.write("fixture \(url.lastPathComponent) built in \(ContinuousClock.now - started)\n".data(using: .utf8)!)
        return url
    }

    /// The same log without its snapshots: opening it replays everything.
    public static func replayOnlyStore(n: Int = BenchEnv.ledgerN) async throws -> URL {
        let source = try await store(n: n)
        let url = BenchEnv.cacheDirectory.appending(path: "\(source.lastPathComponent)-nosnap")
        if FileManager.default.fileExists(atPath: url.path) { return url }
        let building = BenchEnv.cacheDirectory.appending(path: "building-\(getpid())-\(url.lastPathComponent)")
        try copyTree(source, to: building, skipping: ["snapshots"])
        try FileManager.default.moveItem(at: building, to: url)
        return url
    }

    /// The SQLite ledger of the same `n` transactions, inserted in the same order in write
    /// transactions of 10,000, ANALYZEd and checkpointed (no VACUUM). Built once, cached.
    public static func database(n: Int = BenchEnv.ledgerN) throws -> String {
        let url = BenchEnv.cacheDirectory.appending(path: "ledger-grdb-v\(version)-n\(n).sqlite")
        if FileManager.default.fileExists(atPath: url.path) { return url.path }
        let building = BenchEnv.cacheDirectory.appending(path: "building-\(getpid())-\(url.lastPathComponent)")
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: building.path + suffix) }
        let started = ContinuousClock.now
        do {
            // A large page cache while building only (it is not stored in the file).
            let store = try GRDBLedgerStore(path: building.path, synchronous: .off, cacheMiB: 512)
            try store.load(Ledger.transactions(n))
            try store.finish()
            try store.pool.close()
        }
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: building.path + suffix) }
        try FileManager.default.moveItem(at: building, to: url)
        FileHandle.standardError.write("fixture \(url.lastPathComponent) built in \(ContinuousClock.now - started)\n".data(using: .utf8)!)
        return url.path
    }

    /// A private copy of the EventKernel ledger (for benchmarks that write).
    public static func storeCopy(_ label: String) async throws -> URL {
        let copy = BenchEnv.scratch(label)
        try copyTree(try await store(), to: copy)
        return copy
    }

    /// A private copy of the SQLite ledger (for benchmarks that write): its directory and path.
    public static func databaseCopy(_ label: String) throws -> (directory: URL, path: String) {
        let copy = BenchEnv.scratch(label)
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        let path = copy.appending(path: "ledger.sqlite").path
        try FileManager.default.copyItem(atPath: try database(), toPath: path)
        try flushToDisk(copy)  // as copyTree does for the EventKernel side
        return (copy, path)
    }
}
