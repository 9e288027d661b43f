// Compiled with the PostgreSQL package trait (on by default; Package.swift).
#if PostgreSQL
import Foundation
public import PostgresLog
public import Testing

/// The PostgreSQL server the PostgresLog suites run against: `EVENTKERNEL_POSTGRES_URL`, which
/// `make test` sets to a private server it starts (scripts/postgres.sh). Without it, every test
/// that needs a server is skipped (cancelled, with ``skipNotice``).
public enum PostgresTestDatabase {
    /// The variable naming the server.
    public static let environmentVariable = "EVENTKERNEL_POSTGRES_URL"

    /// Why a test was skipped, as `swift test` prints it.
    public static let skipNotice: Comment = """
        skipped: EVENTKERNEL_POSTGRES_URL is not set, so the PostgreSQL suites do not run \
        (`make test` starts a private server; or `scripts/postgres.sh run swift test`, or point \
        the variable at an existing server: README, "Tests against PostgreSQL")
        """

    /// The server's URL, if one is configured.
    public static var url: String? {
        guard let url = ProcessInfo.processInfo.environment[environmentVariable], !url.isEmpty else { return nil }
        return url
    }

    /// A fresh schema name, so that concurrent tests (and processes) never share a log by accident.
    public static func freshSchema() -> String {
        "ek_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
    }

    /// The configuration for `schema` on the test server, or the current test is skipped
    /// (cancelled with ``skipNotice``) when no server is configured.
    /// - Throws: When the URL does not parse; the skip.
    public static func configuration(schema: String = freshSchema()) throws -> PostgresLog.Configuration {
        guard let url else { try Test.cancel(skipNotice) }
        var configuration = try PostgresLog.Configuration(url: url)
        configuration.schema = schema
        return configuration
    }

    /// The configuration for `schema`, or `nil` without a server (for helper processes).
    public static func configurationIfAvailable(schema: String) throws -> PostgresLog.Configuration? {
        guard let url else { return nil }
        var configuration = try PostgresLog.Configuration(url: url)
        configuration.schema = schema
        return configuration
    }

    /// Drops a test's schema (best effort: the private server is removed after the run anyway).
    public static func drop(_ configuration: PostgresLog.Configuration) async {
        try? await PostgresLog.dropSchema(configuration)
    }
}
#endif
