#if PostgreSQL
import EventLog
import Logging
import NIOCore
import PostgresNIO
import KernelPrimitives

/// Runs queries for callers that cannot `await`: `RecordLog`'s reads are synchronous (a store
/// replays, folds and time-travels inside locks and plain functions).
///
/// It uses connections of its own, driven by NIO futures that complete on NIO's event loop
/// threads: a caller blocked here never waits for a thread of the Swift concurrency pool, so
/// however many pool threads block in reads at once, the reads still finish (bridging to the
/// async `PostgresClient` instead could deadlock a pool whose threads all wait). Connections
/// are kept for reuse and opened on demand, one per concurrent reader.
final class BlockingReader: Sendable {
    private struct State {
        var idle: [PostgresConnection] = []
        var nextID = 1
        var closed = false
    }

    private let configuration: PostgresLog.Configuration
    private let connectionConfiguration: PostgresConnection.Configuration
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state = Locked(State())

    init(configuration: PostgresLog.Configuration, group: any EventLoopGroup, logger: Logger) throws {
        self.configuration = configuration
        self.connectionConfiguration = try configuration.connectionConfiguration()
        self.group = group
        self.logger = logger
    }

    /// Keeps `connection` (opened by the caller, e.g. at open) for later reads.
    func adopt(_ connection: PostgresConnection) {
        let keep = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.idle.append(connection)
            return true
        }
        if !keep { let _: EventLoopFuture<Void> = connection.close() }
    }

    /// Opens a connection (asynchronously: for ``PostgresLog/open(_:logger:)``).
    func connect() async throws -> PostgresConnection {
        let id = state.withLock { state -> Int in
            defer { state.nextID += 1 }
            return state.nextID
        }
        do {
            return try await PostgresConnection.connect(on: group.any(), configuration: connectionConfiguration, id: id, logger: logger)
        } catch {
            throw PostgresFailure.logError(error, while: "connecting", configuration: configuration)
        }
    }

    /// Runs `query` and returns its rows, blocking the calling thread.
    /// - Parameter what: What the query is for, for the error.
    /// - Throws: ``LogError`` (``LogError/Code/unavailable`` when the server cannot be
    ///   reached, ``LogError/Code/io`` when it refuses the query, ``LogError/Code/closed``).
    func rows(_ query: PostgresQuery, what: String) throws -> [PostgresRow] {
        let connection = try take(what: what)
        do {
            let result = try connection.query(query, logger: logger).wait()
            give(connection)
            return result.rows
        } catch {
            give(connection)
            throw PostgresFailure.logError(error, while: what, configuration: configuration)
        }
    }

    private func take(what: String) throws -> PostgresConnection {
        let (reused, id) = try state.withLock { (state) throws(LogError) -> (PostgresConnection?, Int) in
            guard !state.closed else { throw LogError(.closed, "the log is closed") }
            if let connection = state.idle.popLast() { return (connection, 0) }
            defer { state.nextID += 1 }
            return (nil, state.nextID)
        }
        if let reused { return reused }
        do {
            return try PostgresConnection.connect(on: group.any(), configuration: connectionConfiguration, id: id, logger: logger).wait()
        } catch {
            throw PostgresFailure.logError(error, while: what, configuration: configuration)
        }
    }

    /// Opens a connection of the caller's own, outside the kept ones, blocking the calling
    /// thread (a consumer's lease: its session holds the lease's lock, so it is never shared).
    /// The caller closes it.
    /// - Parameter what: What it is for, for the error.
    /// - Throws: ``LogError`` (``LogError/Code/unavailable``, ``LogError/Code/closed``).
    func dedicatedConnection(what: String) throws -> PostgresConnection {
        let id = try state.withLock { (state) throws(LogError) -> Int in
            guard !state.closed else { throw LogError(.closed, "the log is closed") }
            defer { state.nextID += 1 }
            return state.nextID
        }
        do {
            return try PostgresConnection.connect(on: group.any(), configuration: connectionConfiguration, id: id, logger: logger).wait()
        } catch {
            throw PostgresFailure.logError(error, while: what, configuration: configuration)
        }
    }

    /// Returns a connection for reuse, or closes it when it broke or the reader closed.
    private func give(_ connection: PostgresConnection) {
        let keep = !connection.isClosed && state.withLock { state -> Bool in
            guard !state.closed, state.idle.count < 4 else { return false }
            state.idle.append(connection)
            return true
        }
        // A connection must be closed before it is released (postgres-nio asserts it).
        if !keep { let _: EventLoopFuture<Void> = connection.close() }
    }

    /// Closes every kept connection; later reads fail with ``LogError/Code/closed``.
    func close() async {
        let connections = state.withLock { state -> [PostgresConnection] in
            state.closed = true
            defer { state.idle.removeAll() }
            return state.idle
        }
        for connection in connections { try? await connection.close() }
    }
}
#endif
