import ArgumentParser
import EventKernel
import EventLog
import Foundation
#if PostgreSQL
import PostgresLog
#endif

struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Restore a backup into a new store directory: at its end, at a position, or as recorded at a time.",
        discussion: """
            The backup is checked against its manifest first (every file's size and CRC32C). At its end the backup's \
            files are copied, snapshots included; with --position N the store holds the events below N, with \
            --as-of DATE the log's longest prefix recorded at or before DATE (what the store knew then: the rule of replay \
            --as-of, never an event recorded later), and its \
            first open rebuilds the snapshots. A restore holds whole stored batches only (each holds whole atomic appends: execute commands, \
            appendAll calls): a cut that falls inside a batch is rounded down to the batch's start, and says so on stderr \
            (in --json, requestedPosition and roundedDown). The destination must be new or empty (exit 1 otherwise); a directory \
            that holds no complete backup is exit 1, a backup file that does not match its manifest exit 3.

            Examples:
              eventkernel restore /backups/demo /tmp/demo-restored
              eventkernel restore /backups/demo --to /tmp/demo-at-1000 --position 1000
              eventkernel restore /backups/demo --to /tmp/demo-morning --as-of 2026-01-15T08:00:00Z
            """)

    @Argument(help: ArgumentHelp("The backup directory.", valueName: "BACKUP"))
    var backup: String
    @Argument(help: ArgumentHelp("The directory to restore into, new or empty (the same as --to).", valueName: "DEST"))
    var destinationArgument: String?
    @Option(name: .customLong("to"), help: ArgumentHelp("The directory to restore into.", valueName: "DIR"))
    var toOption: String?
    @Option(help: ArgumentHelp("Restore the events below this position.", valueName: "N"))
    var position: UInt64?
    @Option(name: .customLong("as-of"), help: ArgumentHelp(
        "Restore what the store knew at this time: the log's longest prefix recorded at or before it (ISO 8601; a bare date is its whole day, UTC).", valueName: "DATE"))
    var asOf: String?
    @Flag(help: "Print the result as one JSON object.")
    var json = false

    private static func url(_ path: String) -> URL { URL(filePath: path, directoryHint: .isDirectory).standardizedFileURL }

    func validate() throws {
        if let destinationArgument, let toOption, Self.url(destinationArgument) != Self.url(toOption) {
            throw ValidationError("the destination is given twice, differently: '\(destinationArgument)' and --to '\(toOption)'; give one")
        }
        guard destinationArgument != nil || toOption != nil else { throw ValidationError("Missing the destination: eventkernel restore BACKUP DEST (or --to DIR)") }
        guard position == nil || asOf == nil else { throw ValidationError("give at most one of --position N or --as-of DATE") }
    }

    func run() async throws {
        let source = Self.url(backup)
        let destination = Self.url(destinationArgument ?? toOption!)
        let point: RestorePoint
        if let position {
            point = .position(position)
        } else if let asOf {
            do { point = .recordedAtOrBefore(try ISODate.parseRecordingTimeUpperBound(asOf)) } catch { throw ToolError(.badInput, "--as-of: \(error)") }
        } else {
            point = .end
        }
        #if PostgreSQL
        if backup.hasPrefix("postgres://") || backup.hasPrefix("postgresql://") {
            let configuration = try withToolErrorsSync { try PostgresLog.Configuration(url: backup) }
            let result: RestoreResult
            do { result = try await EventStore.restore(fromPostgres: configuration, to: destination, at: point, logger: StoreLocation.logger) } catch let error as RepositoryError {
                if let logError = error.logError, logError.code == .invalidArgument { throw ToolError(.badInput, logError.description) }
                throw ToolError.from(error)
            }
            report(result, from: configuration.description, into: destination, atomicUnit: "an atomic append")
            return
        }
        #endif
        let result = try await withToolErrors(store: source) {
            do { return try await EventStore.restore(from: source, to: destination, at: point) } catch let error as RepositoryError {
                // A directory that is not a complete backup, and a destination in use, are the
                // user's input, not the backup's damage.
                if let logError = error.logError, logError.code == .invalidArgument || logError.code == .backupMismatch {
                    throw ToolError(.badInput, logError.description)
                }
                // Damage here is the backup's: `repair` (the store's advice) does not apply to it.
                if let logError = error.logError, [.corruption, .unsupportedVersion, .compression].contains(logError.code) {
                    throw ToolError(.damage, "\(logError.description); the backup is damaged: restore another backup, or take a new one from the store (`eventkernel backup --restart --yes`); `eventkernel backups list` checks every file")
                }
                throw error
            }
        }
        report(result, from: source.path, into: destination, atomicUnit: "a stored batch")
    }

    /// Prints what was restored, and on stderr what a rounded-down cut left out.
    /// - Parameter atomicUnit: What a cut never splits, in the source's words, with its article.
    private func report(_ result: RestoreResult, from source: String, into destination: URL, atomicUnit: String) {
        let end = result.nextPosition
        if result.roundedDown {
            // Said whole: group commit may have merged appends acknowledged one by one into
            // that batch, so events acknowledged before the requested position can be left out.
            let leftOut = result.requestedPosition - end
            let merged = atomicUnit == "a stored batch"
                ? ", and group commit may have merged several appends, each acknowledged on its own, into it: some of those events may have been acknowledged before the requested point"
                : ""
            Output.note("position \(result.requestedPosition) is inside \(atomicUnit) that starts at \(end): restored up to its start, \(end); the \(leftOut) event(s) at positions \(end)..<\(result.requestedPosition) are left out. It is restored whole or not at all\(merged). Restore --position \(end) to cut exactly here")
        }
        if json {
            print(Output.json(["backup": source, "store": destination.path, "position": end,
                               "requestedPosition": result.requestedPosition, "roundedDown": result.roundedDown,
                               "eventsLeftOut": result.requestedPosition - end]))
        } else {
            // Positions, not a count of events: a compacted backup's log has gaps (Docs/Forgetting.md).
            Output.note("restored positions 0..<\(end) from \(source) into \(destination.path)")
        }
    }
}
