public import EventKernel
import EventLog
import Foundation
#if PostgreSQL
public import PostgresLog
#endif
public import Testing

/// The logs the store and repository suites run against, one suite body for both: the local
/// segmented log (a fresh directory) and the PostgreSQL log (a fresh schema on the test
/// server; skipped with ``PostgresTestDatabase/skipNotice`` when none is configured).
public enum StoreBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case local, postgres

    public var testDescription: String { rawValue }

    /// Opens a store on a fresh log of this kind, runs `body`, then closes the store (and, for
    /// PostgreSQL, drops the schema), whether `body` succeeded or not.
    /// - Parameters:
    ///   - projections: Registered at open.
    ///   - snapshotPolicy: Snapshots go to a fresh local directory in both cases.
    ///   - body: Receives the store and where it lives (to open it again).
    /// - Throws: What opening or `body` throws; the skip.
    public func withStore<R>(
        projections: [any Projection] = [], snapshotPolicy: SnapshotPolicy = .never,
        _ body: (EventStore, BackendLocation) async throws -> R
    ) async throws -> R {
        let location = try BackendLocation(self)
        let store = try await location.open(projections: projections, snapshotPolicy: snapshotPolicy)
        do {
            let result = try await body(store, location)
            try await store.close()
            await location.remove()
            return result
        } catch {
            try? await store.close()
            await location.remove()
            throw error
        }
    }
}

/// Where a test's log lives: a directory, or a schema on the test server (with a directory
/// for its snapshots).
public final class BackendLocation: Sendable {
    public let backend: StoreBackend
    /// The local log's directory, or the PostgreSQL instance's snapshot directory.
    public let directory: TemporaryDirectory
    #if PostgreSQL
    /// The PostgreSQL log, for ``StoreBackend/postgres``.
    public let postgres: PostgresLog.Configuration?
    #endif

    init(_ backend: StoreBackend) throws {
        self.backend = backend
        directory = TemporaryDirectory("backend-\(backend.rawValue)")
        #if PostgreSQL
        postgres = backend == .postgres ? try PostgresTestDatabase.configuration() : nil
        #else
        if backend == .postgres { try Test.cancel(withoutPostgreSQL) }
        #endif
    }

    /// Opens a store on the log: for the local log, the one writer of its directory (close
    /// the previous store first); for PostgreSQL, another instance of the shared log.
    /// - Parameter snapshots: Whether the store keeps snapshots in ``directory``.
    /// - Throws: What opening throws.
    public func open(projections: [any Projection] = [], snapshotPolicy: SnapshotPolicy = .never, snapshots: Bool = true) async throws -> EventStore {
        let store: EventStore
        #if PostgreSQL
        if let postgres {
            store = try await EventStore.open(postgres: postgres, snapshotsIn: snapshots ? directory.url : nil, snapshotPolicy: snapshotPolicy)
            for projection in projections { try store.register(projection) }
            return store
        }
        #endif
        store = try EventStore(log: try SegmentedLog.open(at: directory.url), directory: snapshots ? directory.url : nil,
                               snapshotPolicy: snapshotPolicy)
        for projection in projections { try store.register(projection) }
        return store
    }

    /// Removes the PostgreSQL schema (the directory goes when this is released).
    public func remove() async {
        #if PostgreSQL
        if let postgres { await PostgresTestDatabase.drop(postgres) }
        #endif
    }
}

/// Why a PostgreSQL case is skipped in a build without the PostgreSQL trait (the sanitizer runs).
public let withoutPostgreSQL: Comment = "skipped: built without the PostgreSQL package trait (scripts/sanitizers.sh builds so)"

/// The shared logs the multi-instance suites run against, one suite body for both: a log in
/// memory shared by the instances of this process (``SharedMemoryServer``), and a PostgreSQL
/// log (a fresh schema; skipped without a server or the trait).
public enum SharedBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory, postgres

    public var testDescription: String { rawValue }

    /// Opens one store per element of `notified` over one fresh shared log, runs `body`, and
    /// closes them (and drops the schema).
    /// - Parameters:
    ///   - notified: Per instance, whether it learns of the others' commits by itself; one that
    ///     does not learns only when it asks (`refresh()`, a conflict) or commits.
    ///   - body: Receives the stores.
    /// - Throws: What opening or `body` throws; the skip.
    public func withInstances<R>(_ notified: [Bool], _ body: ([EventStore]) async throws -> R) async throws -> R {
        var stores: [EventStore] = []
        var cleanup: @Sendable () async -> Void = {}
        switch self {
        case .memory:
            let server = SharedMemoryServer()
            for listens in notified { stores.append(try EventStore(log: SharedMemoryLog(server, notified: listens), snapshotPolicy: .never)) }
        case .postgres:
            #if PostgreSQL
            let configuration = try PostgresTestDatabase.configuration()
            cleanup = { await PostgresTestDatabase.drop(configuration) }
            for listens in notified {
                var instance = configuration
                if !listens {
                    instance.listensForNotifications = false
                    instance.pollInterval = .seconds(3_600)
                }
                stores.append(try await EventStore.open(postgres: instance, snapshotPolicy: .never))
            }
            #else
            try Test.cancel(withoutPostgreSQL)
            #endif
        }
        do {
            let result = try await body(stores)
            for store in stores { try await store.close() }
            await cleanup()
            return result
        } catch {
            for store in stores { try? await store.close() }
            await cleanup()
            throw error
        }
    }
}
