#if PostgreSQL
public import EventKernel
import EventLog
public import Foundation
public import Logging

extension EventStore {
    /// Opens a store over a PostgreSQL log that several service instances share
    /// (Docs/ScaleOut.md): every projection and repository works as on the local log, and
    /// what other instances commit is folded in as it arrives (observations see it).
    ///
    /// ```swift
    /// let store = try await EventStore.open(postgres: try PostgresLog.Configuration(url: url),
    ///                                       snapshotsIn: URL(filePath: "/var/cache/app/events"))
    /// ```
    /// - Parameters:
    ///   - configuration: The server and schema.
    ///   - directory: This instance's own directory for snapshots (a cache keyed by position:
    ///     a restart replays only the tail from the server). One directory per instance;
    ///     `nil`: no snapshots, a restart replays the whole log.
    ///   - snapshotPolicy: When snapshots are written.
    ///   - logger: Receives the log's and the store's notices.
    /// - Throws: ``RepositoryError/storage(_:)`` keeping the `LogError` (for example
    ///   `unavailable` naming the host), and what ``EventStore/init(log:directory:projections:snapshotPolicy:logger:)``
    ///   throws.
    public static func open(
        postgres configuration: PostgresLog.Configuration, snapshotsIn directory: URL? = nil,
        snapshotPolicy: SnapshotPolicy = .default, logger: Logger = Logger(label: "EventKernel.EventStore")
    ) async throws -> EventStore {
        let log: PostgresLog
        do {
            if let directory { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) }
            log = try await PostgresLog.open(configuration, logger: logger)
        } catch let error as LogError {
            throw RepositoryError.storage(StorageFailure(error))
        } catch {
            throw RepositoryError.storage(StorageFailure("creating the snapshot directory failed", cause: error))
        }
        do {
            return try EventStore(log: log, directory: directory, snapshotPolicy: snapshotPolicy, logger: logger)
        } catch {
            try? await log.close()
            throw error
        }
    }
}
#endif
