import Activities
import EventKernel
import EventLog
import Foundation

/// The exit statuses of `eventkernel` (documented in Docs/CLI.md).
enum ToolExit: Int32 {
    /// Success.
    case ok = 0
    /// Usage error or bad input (bad flag, malformed import line, unknown id, ...).
    case badInput = 1
    /// The store is missing, not a store, or locked by another writer.
    case storeUnavailable = 2
    /// Damage found (verify, or a damaged log refusing to open).
    case damage = 3
    /// An I/O or other storage failure.
    case io = 4
    /// Stopped by SIGINT at a clean boundary (128 + 2, the shell's convention).
    case interrupted = 130
    /// Stopped by SIGTERM at a clean boundary (128 + 15).
    case terminated = 143
}

/// An error the tool reports as `eventkernel: error: <message>` with an exit status.
struct ToolError: Error, CustomStringConvertible {
    var exit: ToolExit
    var message: String
    init(_ exit: ToolExit, _ message: String) {
        self.exit = exit
        self.message = message
    }
    var description: String { message }

    /// Maps library errors to the tool's exit statuses and messages.
    static func from(_ error: any Error, store: URL? = nil) -> ToolError {
        switch error {
        case let error as ToolError:
            return error
        case let error as LogError:
            switch error.code {
            case .locked:
                if let file = error.file, let store,
                   URL(filePath: (file as NSString).deletingLastPathComponent).standardizedFileURL.path != store.standardizedFileURL.path {
                    // Another directory's lock (a backup's destination): its own message says whose.
                    return ToolError(.storeUnavailable, error.description)
                }
                let dir = store ?? URL(filePath: (error.file as NSString?)?.deletingLastPathComponent ?? ".")
                let pid = StoreLocation.lockHolder(of: dir).map { " (pid \($0))" } ?? ""
                return ToolError(.storeUnavailable, "store \(dir.path) is locked by another writer\(pid); stop it, or use a read-only command (query, export, verify, inspect, tail)")
            case .notAStore:
                return ToolError(.storeUnavailable, error.description)
            case .corruption, .unsupportedVersion, .compression:
                return ToolError(.damage, "\(error.description); run `eventkernel verify` for details, `eventkernel repair --yes` to cut the log at the damage")
            case .invalidArgument, .tooLarge:
                return ToolError(.badInput, error.description)
            case .unavailable:
                return ToolError(.storeUnavailable, error.description)
            case .backupMismatch:
                return ToolError(.badInput, error.description)
            default:
                return ToolError(.io, error.description)
            }
        case let error as RepositoryError:
            switch error {
            case .storage(let failure):
                // The log's own error underneath decides (damage is exit 3 wherever it surfaces),
                // with its file, offset and position in the message.
                if let logError = failure.logError { return from(logError, store: store) }
                if failure.cause is BinaryDecodingError {
                    return ToolError(.damage, "\(error.description); run `eventkernel verify` for details")
                }
                return ToolError(.io, error.description)
            case .undecodableEvent:
                return ToolError(.damage, error.description)
            case .closed: return ToolError(.io, error.description)
            // The tool's own use of the API, not the input: a bug, never "bad input".
            case .misuse: return ToolError(.io, error.description)
            // Every case is spelled out so that a new one needs a decision here.
            case .notFound, .alreadyExists, .conflict, .validationFailed, .invalidQuery, .limitExceeded, .streamPurged:
                return ToolError(.badInput, error.description)
            }
        case let error as ActivityQueryError:
            return ToolError(.badInput, error.description)
        case let error as ConsumerError:
            switch error {
            case .damagedFile, .damagedRow, .checkpointAheadOfLog, .checkpointOffHistory: return ToolError(.damage, error.description)
            case .fileFailed, .handlerFailed: return ToolError(.io, error.description)
            case .databaseFailed(_, let cause) where !cause.isUnavailable: return ToolError(.io, error.description)
            case .inUse, .openWithOtherOptions, .leaseLost, .databaseFailed: return ToolError(.storeUnavailable, error.description)
            case .invalidName, .positionOutOfRange, .notParked, .checkpointElsewhere: return ToolError(.badInput, error.description)
            }
        default:
            return ToolError(.io, "\(error)")
        }
    }
}
