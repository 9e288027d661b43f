public import EventLog

/// What a named consumer reports when it cannot go on: each case says what and where.
public enum ConsumerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The name is not a file-name-safe token (1 to 128 of `A-Z a-z 0-9 . _ -`, not starting with `.`).
    case invalidName(String, reason: String)
    /// A consumer file failed its checks (format, checksum, name): nothing in it is used.
    case damagedFile(path: String, reason: String)
    /// Reading or writing a consumer file failed.
    case fileFailed(path: String, reason: String)
    /// The committed position is past the end of the log (after a repair or a truncation):
    /// the consumer does not deliver until it is reset (``Consumer/reset(to:)``, `eventkernel consumers reset`).
    case checkpointAheadOfLog(consumer: String, committed: LogPosition, logEnd: LogPosition)
    /// The checkpoint was written against another history of the log: the event it was
    /// committed after is no longer the one at that position (the log was cut by a repair or
    /// a torn tail, or lost unsynced events in a crash, and may have grown again since). The
    /// consumer does not deliver until it is reset: delivering would skip the events that now
    /// stand where the lost ones were.
    case checkpointOffHistory(consumer: String, committed: LogPosition, reason: String)
    /// Another user has the consumer open: this process (a second `consumer(named:)` with
    /// other options) or another (an application, `eventkernel tail --consumer`).
    case inUse(consumer: String, path: String)
    /// The consumer is open on this store with other options (a name is one consumer).
    case openWithOtherOptions(consumer: String)
    /// A position given to commit, reset or start at lies outside what the log holds.
    case positionOutOfRange(consumer: String, position: LogPosition, logEnd: LogPosition)
    /// The handler failed on the event at `position` on every attempt and the consumer is set
    /// to stop on failure: everything before `position` is committed, nothing from it on.
    case handlerFailed(consumer: String, position: LogPosition, attempts: Int, errorType: String, error: String)
    /// No parked event of the consumer has this position.
    case notParked(consumer: String, position: LogPosition)
    /// This instance no longer holds the consumer's lease (on a log several instances share:
    /// its session with the database ended): nothing more it handled is committed, since
    /// another instance may be processing the consumer now. Open the consumer again
    /// (``EventStore/consumer(named:startingAt:options:waitingForLease:)``) to go on.
    case leaseLost(consumer: String, reason: String)
    /// The database that keeps the consumers of a shared log could not be read or written
    /// (`location`: the server and schema; `cause`: the log's error code and the server's
    /// SQLSTATE, to tell an unreachable server from a refused statement).
    case databaseFailed(location: String, cause: ConsumerDatabaseFailure)
    /// The consumer has a checkpoint or parked events in the store directory's `consumers/`
    /// (kept there by an earlier build) but none where the store keeps its consumers now (a
    /// shared log's database, `location`): starting it afresh would deliver from its start
    /// again, or skip. Carry its position over (`eventkernel consumers reset --postgres URL
    /// NAME --to POSITION`, or ``Consumer/reset(to:)``) and remove the files.
    case checkpointElsewhere(consumer: String, path: String, location: String)
    /// A consumer's row in a shared log's database holds what no EventKernel writes (a
    /// negative position, a checksum out of range): nothing in it is used. The database's
    /// counterpart of ``damagedFile(path:reason:)``.
    case damagedRow(location: String, consumer: String, reason: String)

    public var description: String {
        switch self {
        case .invalidName(_, let reason): "invalid consumer name: \(reason)"
        case .damagedFile(let path, let reason): "the consumer file \(path) is damaged: \(reason); reset the consumer (eventkernel consumers reset) to write a new one"
        case .fileFailed(let path, let reason): "the consumer file \(path) could not be read or written: \(reason)"
        case .checkpointAheadOfLog(let consumer, let committed, let end):
            "consumer \"\(consumer)\" committed position \(committed), past the log's end (\(end)): the log lost events it had handled (a repair or a truncation); reset it (eventkernel consumers reset STORE \(consumer) --to POSITION) to go on"
        case .checkpointOffHistory(let consumer, let committed, let reason):
            "consumer \"\(consumer)\" committed position \(committed) in another history of the log: \(reason); the events now at its position were never delivered to it: reset it (eventkernel consumers reset STORE \(consumer) --to POSITION) to go on"
        case .inUse(let consumer, let path):
            "consumer \"\(consumer)\" is in use by another holder of \(path) (an application or an eventkernel command, in this or another process): stop it first"
        case .openWithOtherOptions(let consumer):
            "consumer \"\(consumer)\" is already open on this store with other options: a name is one consumer"
        case .positionOutOfRange(let consumer, let position, let end):
            "position \(position) is past the log's end (\(end)) for consumer \"\(consumer)\""
        case .handlerFailed(let consumer, let position, let attempts, let type, let error):
            "consumer \"\(consumer)\" stopped: its handler failed on the event at position \(position) \(attempts) time\(attempts == 1 ? "" : "s") (\(type): \(error)); everything before it is committed"
        case .notParked(let consumer, let position): "consumer \"\(consumer)\" has no parked event at position \(position)"
        case .leaseLost(let consumer, let reason):
            "consumer \"\(consumer)\" lost its lease (\(reason)): nothing more is committed by this instance; another may be processing it now: open the consumer again to go on"
        case .databaseFailed(let location, let cause): "the consumers' tables at \(location) could not be read or written: \(cause)"
        case .checkpointElsewhere(let consumer, let path, let location):
            "consumer \"\(consumer)\" has a checkpoint or parked events in \(path) but none in \(location), where this store keeps its consumers: carry its position over (eventkernel consumers reset --postgres URL \(consumer) --to POSITION) and remove its files there"
        case .damagedRow(let location, let consumer, let reason):
            "consumer \"\(consumer)\"'s row in \(location) is damaged: \(reason); reset the consumer (eventkernel consumers reset) to write a new one"
        }
    }
}

/// Why a shared log's database failed a consumer's read or write, as values a caller can act on.
public struct ConsumerDatabaseFailure: Hashable, Sendable, CustomStringConvertible {
    /// The log's error code (`LogError.Code`): `.unavailable` or `.closed` when the server
    /// could not be reached (try again later), `.io` when it refused the statement.
    public let code: LogError.Code
    /// The server's SQLSTATE when it refused the statement (`57014`: canceled by a timeout).
    public let sqlState: String?
    /// The whole message: what was being done, where, and what the server or driver said.
    public let message: String

    /// A failure with `code`, the server's `sqlState` if any, and `message`.
    public init(code: LogError.Code, sqlState: String?, message: String) {
        self.code = code
        self.sqlState = sqlState
        self.message = message
    }

    /// Whether the database could not be reached (rather than refusing what was asked).
    public var isUnavailable: Bool { code == .unavailable || code == .closed }

    public var description: String { message }
}
