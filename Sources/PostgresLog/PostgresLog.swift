// Compiled with the PostgreSQL package trait (on by default; Package.swift).
#if PostgreSQL
public import EventLog
public import Logging
import Foundation
import NIOCore
import PostgresNIO
import KernelPrimitives

/// A ``RecordLog`` on PostgreSQL: the one log several service instances share
/// (Docs/ScaleOut.md).
///
/// ```swift
/// let log = try await PostgresLog.open(try PostgresLog.Configuration(url: "postgres://app@db:5432/app"))
/// let store = try EventStore(log: log, directory: localCacheDirectory)   // snapshots stay local
/// ```
///
/// - Positions are gap-free and follow commit order across instances: an append transaction
///   locks the log's head row before it takes positions, so a reader that saw position p
///   never later finds a new record below p, and a rolled-back transaction leaves no gap.
/// - Each instance groups its concurrent appends into one transaction (group commit); an
///   append is acknowledged once PostgreSQL committed it.
/// - Every record is an EventKernel event: the envelope's fields are columns, and a stream's
///   version is unique, which is the concurrency check between instances. An append whose
///   stream moved on in another instance fails with ``LogError/Code/conflict`` and a
///   `RepositoryError.conflict` as its cause; the `EventStore` catches up and decides again.
/// - Other instances' appends are learned through LISTEN/NOTIFY, with a poll every
///   ``Configuration/pollInterval`` so that a lost notification never stalls a follower, and
///   handed to the store (``SharedRecordLog/setAppendedElsewhereHandler(_:)``).
/// - A connection lost during an append never writes twice: the instance asks the server, on
///   a new connection, whether the transaction committed (after making sure the old session is
///   gone): committed, its appenders get their positions; not committed, it is sent once more
///   (its round id cannot commit twice); when it cannot ask, the appenders get an error that
///   says the outcome is unknown.
public final class PostgresLog: SharedRecordLog {
    /// Where the log lives.
    public let configuration: Configuration
    /// The log's identity, made when its schema was created: a copy of the log elsewhere
    /// has another.
    public let logID: String

    let logger: Logger
    let client: PostgresClient
    let reader: BlockingReader
    let view: Locked<LogView>
    let appends = Locked(AppendQueue())
    let committerBell = Doorbell()
    let followerBell = Doorbell()
    let appendedElsewhere = Locked<(@Sendable () -> Void)?>(nil)
    /// Rounds committed (or failed) whose appenders the completer has not told yet, in order.
    let completions = Locked<[Completion]>([])
    let completerBell = Doorbell()
    /// This instance's id in the notifications its appends send.
    let origin = UUID().uuidString
    let listening = Locked(false)
    private let tasks = Locked(Tasks())

    private struct Tasks {
        var client: Task<Void, Never>?
        var committer: Task<Void, Never>?
        var completer: Task<Void, Never>?
        var follower: Task<Void, Never>?
        var listener: Task<Void, Never>?
        var ticker: Task<Void, Never>?
        var closed = false
    }

    /// The table the records live in, for messages.
    var table: String { "\(configuration.schema).events" }

    /// The version the schema is at: ``PostgresSchema/currentVersion`` once prepared; lower
    /// when opened without preparing (``Configuration/preparesSchema``), the later versions'
    /// tables then missing (a version 1 schema has no consumers' tables).
    let schemaRevision: Int

    private init(configuration: Configuration, logID: String, schemaRevision: Int, head: LogView, client: PostgresClient, reader: BlockingReader, logger: Logger) {
        self.configuration = configuration
        self.logID = logID
        self.schemaRevision = schemaRevision
        self.view = Locked(head)
        self.client = client
        self.reader = reader
        self.logger = logger
    }

    /// Connects, creates or migrates the schema, and starts following the other instances.
    ///
    /// - Parameters:
    ///   - configuration: The server and schema.
    ///   - logger: Receives notices about lost connections and retries.
    /// - Returns: The log, its ``RecordLog/bounds`` covering every record committed so far.
    /// - Throws: ``LogError``: ``LogError/Code/unavailable`` naming the host when the server
    ///   cannot be reached (or refuses the login), ``LogError/Code/unsupportedVersion`` for a
    ///   schema written by a newer EventKernel, ``LogError/Code/invalidArgument`` for a bad
    ///   configuration, ``LogError/Code/io`` when the server refuses the schema statements.
    public static func open(_ configuration: Configuration, logger: Logger = Logger(label: "EventKernel.PostgresLog")) async throws -> PostgresLog {
        try configuration.validate()
        let group = PostgresClient.defaultEventLoopGroup
        let reader = try BlockingReader(configuration: configuration, group: group, logger: logger)
        // A connection of our own first: an unreachable server fails here, at once and by
        // name, rather than in a pool that retries for a minute.
        let connection = try await reader.connect()
        let logID: String
        let schemaRevision: Int
        let head: LogView
        do {
            (logID, schemaRevision) = try await PostgresSchema.prepare(on: connection, configuration: configuration, logger: logger)
            var found: (Int64, Int64?, Int64?) = (0, nil, nil)
            let rows = try await connection.query(PostgresQuery(unsafeSQL: #"SELECT next_position, min_recorded_at, max_recorded_at FROM "\#(configuration.schema)".head"#), logger: logger)
            for try await row in rows.decode((Int64, Int64?, Int64?).self) { found = row }
            head = LogView(next: LogPosition(found.0), minTimestamp: found.1.map(LogTimestamp.init(nanosecondsSince1970:)),
                           maxTimestamp: found.2.map(LogTimestamp.init(nanosecondsSince1970:)), capacity: configuration.cachedRecords)
        } catch {
            try? await connection.close()
            throw PostgresFailure.logError(error, while: "opening the log", configuration: configuration)
        }
        reader.adopt(connection)
        // The pool reports every connection it opens or drops at info level: notices and up
        // are what an operator of the log wants.
        var background = logger
        background.logLevel = max(background.logLevel, .notice)
        let client = PostgresClient(configuration: configuration.clientConfiguration(), eventLoopGroup: group, backgroundLogger: background)
        let log = PostgresLog(configuration: configuration, logID: logID, schemaRevision: schemaRevision, head: head, client: client, reader: reader, logger: logger)
        log.start()
        return log
    }

    private func start() {
        tasks.withLock { tasks in
            tasks.client = Task { await client.run() }
            tasks.committer = Task { await runCommitter() }
            tasks.completer = Task { await runCompleter() }
            tasks.follower = Task { await runFollower() }
            if configuration.listensForNotifications { tasks.listener = Task { await runListener() } }
            tasks.ticker = Task { [configuration, followerBell] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: configuration.pollInterval)
                    followerBell.ring()
                }
            }
        }
    }

    // MARK: RecordLog

    /// What this instance has learned of the log: every position below `nextPosition` is
    /// committed. Other instances may have committed more since (``refresh()`` asks).
    public var bounds: LogBounds {
        view.withLock { LogBounds(firstPosition: 0, nextPosition: $0.next, minTimestamp: $0.minTimestamp, maxTimestamp: $0.maxTimestamp) }
    }

    /// `LogAccess.shared`: every instance appends to the one log on the server.
    public var access: LogAccess { .shared }

    /// The log has no files; a store's local snapshots use the ordinary system calls.
    public var fileIO: any LogFileIO { PosixFileIO() }

    /// Appends commit when PostgreSQL commits them: there is nothing to sync.
    public func synchronize() async throws {}

    /// Commits what is queued, stops following, and closes the connections. Idempotent.
    public func close() async throws {
        let running = tasks.withLock { tasks -> Tasks? in
            guard !tasks.closed else { return nil }
            tasks.closed = true
            return tasks
        }
        guard let running else { return }
        appends.withLock { $0.closed = true }
        committerBell.close()
        await running.committer?.value
        await running.completer?.value
        running.listener?.cancel()
        running.ticker?.cancel()
        followerBell.close()
        await running.follower?.value
        await running.listener?.value
        await running.ticker?.value
        running.client?.cancel()
        await running.client?.value
        await reader.close()
    }

    // MARK: SharedRecordLog

    /// Asks the server for what other instances committed since this instance last looked,
    /// blocking the calling thread.
    /// - Returns: The new bounds.
    /// - Throws: ``LogError`` when the server cannot be read, or a position is missing
    ///   (``LogError/Code/corruption``).
    @discardableResult
    public func refresh() throws -> LogBounds {
        while true {
            let next = view.withLock { $0.next }
            let records = try readRecords(from: next, through: nil, limit: configuration.readPageSize)
            _ = try learn(records, readFrom: next)
            if records.count < configuration.readPageSize { return bounds }
        }
    }

    public func setAppendedElsewhereHandler(_ handler: (@Sendable () -> Void)?) {
        appendedElsewhere.withLock { $0 = handler }
    }
}
#endif
