public import EventKernel
import EventLog
import Foundation
public import PostgresLog
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
    /// The PostgreSQL log, for ``StoreBackend/postgres``.
    public let postgres: PostgresLog.Configuration?

    init(_ backend: StoreBackend) throws {
        self.backend = backend
        directory = TemporaryDirectory("backend-\(backend.rawValue)")
        postgres = backend == .postgres ? try PostgresTestDatabase.configuration() : nil
    }

    /// Opens a store on the log: for the local log, the one writer of its directory (close
    /// the previous store first); for PostgreSQL, another instance of the shared log.
    /// - Parameter snapshots: Whether the store keeps snapshots in ``directory``.
    /// - Throws: What opening throws.
    public func open(projections: [any Projection] = [], snapshotPolicy: SnapshotPolicy = .never, snapshots: Bool = true) async throws -> EventStore {
        let store: EventStore
        if let postgres {
            store = try await EventStore.open(postgres: postgres, snapshotsIn: snapshots ? directory.url : nil, snapshotPolicy: snapshotPolicy)
        } else {
            store = try EventStore(log: try SegmentedLog.open(at: directory.url), directory: snapshots ? directory.url : nil,
                                   snapshotPolicy: snapshotPolicy)
        }
        for projection in projections { try store.register(projection) }
        return store
    }

    /// Removes the PostgreSQL schema (the directory goes when this is released).
    public func remove() async {
        if let postgres { await PostgresTestDatabase.drop(postgres) }
    }
}
