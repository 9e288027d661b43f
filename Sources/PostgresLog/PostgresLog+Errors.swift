#if PostgreSQL
import EventLog
import PostgresNIO

/// How a failure of the server or of the connection to it becomes a ``LogError``: one place,
/// so every operation names the server and keeps the driver's error as the cause.
enum PostgresFailure {
    /// Whether `error` is the server refusing a statement (severity ERROR: the statement's
    /// transaction rolled back, the session lives on), rather than the session or the
    /// connection ending (FATAL or PANIC, a dropped connection), after which a statement in
    /// flight may or may not have committed.
    static func isStatementRefusal(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError, error.code == .server else { return false }
        let severity = error.serverInfo?[.severity] ?? "ERROR"
        return severity != "FATAL" && severity != "PANIC"
    }

    /// The SQLSTATE of a server error (`23505` for a unique violation).
    static func sqlState(_ error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// A ``LogError`` for `error`, met while doing `what` on the log at `configuration`.
    /// Server errors are ``LogError/Code/io`` with the server's message and SQLSTATE;
    /// everything else (refused, timed out, dropped connections, a closed pool) is
    /// ``LogError/Code/unavailable`` naming the host.
    static func logError(_ error: any Error, while what: String, configuration: PostgresLog.Configuration) -> LogError {
        if let error = error as? LogError { return error }
        let table = "\(configuration.schema).events"
        if let psql = error as? PSQLError {
            if psql.code == .server, let info = psql.serverInfo {
                let state = info[.sqlState] ?? "?"
                var message = "\(what): PostgreSQL at \(configuration.endpoint) refused it (SQLSTATE \(state)): \(info[.message] ?? "no message")"
                if let detail = info[.detail] { message += "; \(detail)" }
                return LogError(.io, message, file: table, cause: PostgresDriverError(error))
            }
            let underlying = psql.underlying.map { ": \($0)" } ?? ""
            return LogError(.unavailable, "\(what): cannot reach PostgreSQL at \(configuration.endpoint) (\(psql.code)\(underlying))",
                            file: table, cause: PostgresDriverError(error))
        }
        return LogError(.unavailable, "\(what): cannot reach PostgreSQL at \(configuration.endpoint) (\(error))", file: table, cause: PostgresDriverError(error))
    }
}

/// A driver's error kept as a ``LogError``'s cause. (`PSQLError` is `@unchecked Sendable`,
/// the pool's errors are `Sendable`; this box lets the cause hold either without a cast.)
public struct PostgresDriverError: Error, @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The error as the driver threw it; `String(reflecting:)` of a `PSQLError` shows the
    /// server's fields.
    public let error: any Error

    init(_ error: any Error) { self.error = error }

    public var description: String { "\(error)" }
    public var debugDescription: String { String(reflecting: error) }
}
#endif
