#if PostgreSQL
public import EventKernel
import EventLog
public import Foundation
public import Logging

extension EventStore {
    /// Restores the store a PostgreSQL log holds into a new store directory: at its end, at a
    /// position, or as it stood at a recording time (``RestorePoint``), as a restore from a
    /// backup does. The log is read, never written: instances may go on appending (a restore
    /// at ``RestorePoint/end`` holds the log as it was when the restore began).
    ///
    /// Whole atomic appends only: a point inside one (an `execute` command, an `appendAll`) is
    /// rounded down to its start (``RestoreResult/roundedDown``), by the boundaries the log's
    /// rounds record (``PostgresLog/batches(endingAtOrBefore:atMost:)``). The records keep their
    /// positions and recording times; snapshots are not carried (the store's first open
    /// replays). Everything is written into a sibling `<destination>.restoring-XXXX`, synced
    /// and renamed into place when whole.
    /// - Parameters:
    ///   - configuration: The server and schema.
    ///   - destination: A new or empty directory.
    ///   - point: Where to cut: ``RestorePoint/end`` by default.
    ///   - logger: Receives the log's notices.
    /// - Returns: The restored store's next position, and the one the point asked for.
    /// - Throws: ``RepositoryError/storage(_:)`` wrapping a `LogError`: `unavailable` naming the
    ///   host, `invalidArgument` for a destination that is not empty or a position past the
    ///   log's end, `corruption` for a record or a round that does not read, `io`.
    public static func restore(
        fromPostgres configuration: PostgresLog.Configuration, to destination: URL, at point: RestorePoint = .end,
        logger: Logger = Logger(label: "EventKernel.EventStore")
    ) async throws -> RestoreResult {
        var readOnly = configuration
        readOnly.preparesSchema = false
        let log: PostgresLog
        do { log = try await PostgresLog.open(readOnly, logger: logger) } catch let error as LogError {
            throw RepositoryError.storage(StorageFailure(error))
        }
        do {
            let end = log.bounds.nextPosition
            let requested: LogPosition
            switch point {
            case .end:
                requested = end
            case .position(let position):
                guard position <= end else {
                    throw RepositoryError.storage(StorageFailure(LogError(.invalidArgument, "position \(position) is past the end of \(configuration), \(end)", position: position)))
                }
                requested = position
            case .recordedAtOrBefore(let limit):
                requested = try lastPosition(in: log, recordedAtOrBefore: limit).map { $0 + 1 } ?? 0
            }
            let batches: [Range<LogPosition>]
            do { batches = try await log.batches(endingAtOrBefore: requested) } catch let error as LogError {
                throw RepositoryError.storage(StorageFailure(error))
            }
            let result = try await restore(records: log, in: batches, requestedPosition: requested, to: destination)
            try await log.close()
            return result
        } catch {
            try? await log.close()
            throw error
        }
    }
}
#endif
