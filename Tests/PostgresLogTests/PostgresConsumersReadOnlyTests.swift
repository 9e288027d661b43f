#if PostgreSQL
import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import PostgresLog
import Testing

/// Runs the built `eventkernel` with `arguments` to completion: its exit status and output.
private func eventkernel(_ arguments: String...) throws -> (status: Int32, stdout: String, stderr: String) {
    let temp = TemporaryDirectory("ek-pg-cli")
    let out = temp.file("stdout"), err = temp.file("stderr")
    _ = FileManager.default.createFile(atPath: out.path, contents: nil)
    _ = FileManager.default.createFile(atPath: err.path, contents: nil)
    let process = Process()
    process.executableURL = builtExecutable("eventkernel")
    process.arguments = arguments
    process.standardOutput = try FileHandle(forWritingTo: out)
    process.standardError = try FileHandle(forWritingTo: err)
    process.standardInput = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return (process.terminationStatus, (try? String(contentsOf: out, encoding: .utf8)) ?? "", (try? String(contentsOf: err, encoding: .utf8)) ?? "")
}

/// The URL of the test server with `schema`.
private func url(schema: String) throws -> String {
    let base = try #require(PostgresTestDatabase.url)
    return base + (base.contains("?") ? "&" : "?") + "schema=\(schema)"
}

/// `eventkernel consumers --postgres` commands that only read leave the log's schema as it is.
@Suite("eventkernel consumers on PostgreSQL: reading never migrates")
struct PostgresConsumersReadOnlyTests {
    @Test("consumers list and parked --postgres only read: a version 1 log is not migrated (no consumers: list exits 0, parked of a name 1); a mistyped schema is refused, not created")
    func readOnlyCommandsDoNotMigrate() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let s = configuration.schema
        try await PostgresLog.open(configuration).close()
        try await backToSchemaVersionOne(configuration)

        let listed = try eventkernel("consumers", "list", "--postgres", try url(schema: s))
        #expect(listed.status == 0 && listed.stdout.contains("no consumers"), "\(listed.stderr)")
        // No consumer "mail": exit 1, saying so (as on a directory), and nothing migrated.
        let parked = try eventkernel("consumers", "parked", "--postgres", try url(schema: s), "mail", "--json")
        #expect(parked.status == 1 && parked.stderr.contains("no consumer named \"mail\""), "\(parked.stderr)")
        #expect(try await sql(configuration, "SELECT count(*) FROM pg_tables WHERE schemaname = '\(s)' AND tablename = 'consumers'", as: Int64.self) == [0])
        #expect(try await sql(configuration, #"SELECT value FROM "\#(s)".meta WHERE key = 'schema_version'"#, as: String.self) == ["1"])

        // A schema that holds no log: refused (not an empty log made, nor "no consumers" with exit 0).
        let missing = try eventkernel("consumers", "list", "--postgres", try url(schema: s + "_typo"))
        #expect(missing.status != 0 && missing.stderr.contains("no EventKernel log"), "\(missing.stderr)")
        #expect(try await sql(configuration, "SELECT count(*) FROM pg_namespace WHERE nspname = '\(s)_typo'", as: Int64.self) == [0])
    }

    @Test("a version 2 log read as it is lists parked events with no retry request; a store that does not migrate it refuses to write a request and still skips")
    func versionTwoLogKeepsNoRequests() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let s = configuration.schema
        try await parkOneEvent(configuration, of: 3, failing: 1)
        try await backToSchemaVersionTwo(configuration)

        let listed = try eventkernel("consumers", "parked", "--postgres", try url(schema: s), "mail", "--json")
        #expect(listed.status == 0 && listed.stdout.contains("\"retry_requested\":false"), "\(listed.stdout)\(listed.stderr)")
        #expect(try await sql(configuration, #"SELECT value FROM "\#(s)".meta WHERE key = 'schema_revision'"#, as: String.self) == ["2"])

        var asItIs = configuration
        asItIs.preparesSchema = false
        let store = try await EventStore.open(postgres: asItIs)
        let again = try store.consumer(named: "mail")
        #expect(try again.parked().map(\.position) == [1])
        #expect { try again.requestRetry(ofParkedAt: 1) } throws: { error in
            guard case ConsumerError.databaseFailed(_, let cause) = error else { return false }
            return cause.code == .unsupportedVersion && cause.message.contains("version 2")
        }
        #expect(try again.parked().map(\.retryRequested) == [false])
        try again.skipParked(at: 1)
        #expect(try again.parked().isEmpty)
        try await store.close()
    }

    @Test("two instances migrating a version 1 log at once both open it; a migration failing partway changes nothing")
    func migrationIsAtomic() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let s = configuration.schema
        try await PostgresLog.open(configuration).close()
        try await backToSchemaVersionOne(configuration)
        async let first = PostgresLog.open(configuration)
        async let second = PostgresLog.open(configuration)
        let (a, b) = try await (first, second)
        try await a.close()
        try await b.close()
        #expect(try await sql(configuration, #"SELECT value FROM "\#(s)".meta WHERE key = 'schema_revision'"#, as: String.self) == ["3"])

        // A table in the way of the migration's second statement: the open fails, and the first
        // statement's table is rolled back with it.
        try await backToSchemaVersionOne(configuration)
        _ = try await sql(configuration, #"CREATE TABLE "\#(s)".consumer_parked (x integer)"#, as: String.self)
        await #expect(throws: LogError.self) { try await PostgresLog.open(configuration).close() }
        #expect(try await sql(configuration, "SELECT count(*) FROM pg_tables WHERE schemaname = '\(s)' AND tablename = 'consumers'", as: Int64.self) == [0])
        #expect(try await sql(configuration, #"SELECT value FROM "\#(s)".meta WHERE key = 'schema_version'"#, as: String.self) == ["1"])
        _ = try await sql(configuration, #"DROP TABLE "\#(s)".consumer_parked"#, as: String.self)
        try await PostgresLog.open(configuration).close()
        #expect(try await sql(configuration, #"SELECT value FROM "\#(s)".meta WHERE key = 'schema_revision'"#, as: String.self) == ["3"])
    }

    @Test("consumers list --postgres: a damaged row is a problem of its consumer (exit 3, as a damaged file)")
    func damagedRowExitsThree() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let store = try await EventStore.open(postgres: configuration)
        _ = try store.consumer(named: "mail")
        try await store.close()
        _ = try await sql(configuration, #"UPDATE "\#(configuration.schema)".consumers SET committed = -3 WHERE name = 'mail' RETURNING id"#, as: Int32.self)
        let listed = try eventkernel("consumers", "list", "--postgres", try url(schema: configuration.schema))
        #expect(listed.status == 3, "\(listed.stdout) \(listed.stderr)")
        #expect(listed.stdout.contains("damaged"))
    }
}
#endif
