#if PostgreSQL
import EventLog
import Logging
package import PostgresNIO

extension PostgresLog {
    /// Runs `body` on a connection of its own to the log's server (closed afterwards): for
    /// tools and tests that need raw SQL (an open transaction holding the head's lock, a
    /// rolled-back append).
    /// - Throws: ``LogError`` when the server cannot be reached, or what `body` throws.
    package static func withConnection<R: Sendable>(
        _ configuration: Configuration, logger: Logger = Logger(label: "EventKernel.PostgresLog"),
        _ body: (PostgresConnection) async throws -> R
    ) async throws -> R {
        let reader = try BlockingReader(configuration: configuration, group: PostgresClient.defaultEventLoopGroup, logger: logger)
        let connection = try await reader.connect()
        do {
            let result = try await body(connection)
            try? await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// Drops the log's schema with everything in it: every event, irreversibly. For tests,
    /// benchmarks and tools that made a schema of their own; never call it on a log in use.
    /// - Parameter configuration: The server and the schema to drop.
    /// - Throws: ``LogError`` when the server cannot be reached or refuses.
    public static func dropSchema(_ configuration: Configuration) async throws {
        try await withConnection(configuration) { connection in
            do {
                try await connection.query(PostgresQuery(unsafeSQL: #"DROP SCHEMA IF EXISTS "\#(configuration.schema)" CASCADE"#), logger: Logger(label: "EventKernel.PostgresLog"))
            } catch {
                throw PostgresFailure.logError(error, while: "dropping the schema", configuration: configuration)
            }
        }
    }
}
#endif
