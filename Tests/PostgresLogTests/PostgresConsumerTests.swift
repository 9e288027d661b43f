#if PostgreSQL
import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import PostgresLog
import Testing

/// Appends `count` events to `store`, to streams `Counted/e0`, `Counted/e1`, ... (each call from `e0`).
func appendCounted(_ store: EventStore, _ count: Int) async throws {
    try await appendDistinctEvents(store, count)
}

/// The session name a consumer's lease takes (`PostgresConsumerStorage.applicationName`): how a
/// test finds the lease's session to end it.
func leaseSession(_ configuration: PostgresLog.Configuration, _ consumer: String) -> String {
    "ek-consumer \(configuration.schema).\(consumer)"
}

struct HandlerFailure: Error {}

/// The argument types of `replace_parked` at schema version 2 (version 3 adds `boolean[]`):
/// how a test names either function to drop it.
let replaceParkedVersion2 = "integer, bigint[], text[], text[], text[], text[], integer[], bigint[]"

/// Appends `count` events to the log `configuration` names, and runs consumer "mail" (one
/// attempt per event) over them, its handler failing on the event at `failing`, which is parked;
/// then closes the store.
func parkOneEvent(_ configuration: PostgresLog.Configuration, of count: Int, failing: LogPosition) async throws {
    let store = try await EventStore.open(postgres: configuration)
    try await appendCounted(store, count)
    let consumer = try store.consumer(named: "mail", options: ConsumerOptions(retry: RetryPolicy(maxAttempts: 1), commitInterval: .zero))
    try await runUntil(consumer, seen: Seen(), { consumer.committed == UInt64(count) }) { batch in
        if batch.contains(where: { $0.position == failing }) { throw HandlerFailure() }
    }
    try await store.close()
}

/// Takes the log's schema back to version 2, as a build of then left it: no retry requests.
func backToSchemaVersionTwo(_ configuration: PostgresLog.Configuration) async throws {
    let s = configuration.schema
    _ = try await sql(configuration, #"DROP FUNCTION "\#(s)".replace_parked(\#(replaceParkedVersion2), boolean[])"#, as: String.self)
    _ = try await sql(configuration, #"ALTER TABLE "\#(s)".consumer_parked DROP COLUMN retry_requested"#, as: String.self)
    _ = try await sql(configuration, #"UPDATE "\#(s)".meta SET value = '2' WHERE key = 'schema_revision' RETURNING key"#, as: String.self)
}

/// Takes the log's schema back to version 1, as a build of then left it: no consumers' tables
/// or functions, no `schema_revision`.
func backToSchemaVersionOne(_ configuration: PostgresLog.Configuration) async throws {
    let s = configuration.schema
    _ = try await sql(configuration, #"DROP FUNCTION "\#(s)".replace_parked(\#(replaceParkedVersion2))"#, as: String.self)
    _ = try await sql(configuration, #"DROP FUNCTION "\#(s)".replace_parked(\#(replaceParkedVersion2), boolean[])"#, as: String.self)
    _ = try await sql(configuration, #"DROP TABLE "\#(s)".consumer_parked, "\#(s)".consumers"#, as: String.self)
    _ = try await sql(configuration, #"DELETE FROM "\#(s)".meta WHERE key = 'schema_revision' RETURNING key"#, as: String.self)
    _ = try await sql(configuration, #"UPDATE "\#(s)".meta SET value = '1' WHERE key = 'schema_version' RETURNING key"#, as: String.self)
}

/// Issue 29, item 6: named consumers on PostgreSQL: the committed position and the parked
/// events live in the shared database, and one instance at a time holds a consumer (a lease).
@Suite("Consumers on PostgreSQL: shared checkpoint and parked events, one holder at a time")
struct PostgresConsumerTests {
    @Test("the committed position and the parked events live in the database: another store instance opens the consumer where the first left it")
    func checkpointAndParkedSurviveReopen() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let first = try await EventStore.open(postgres: configuration)
        try await appendCounted(first, 10)
        let consumer = try first.consumer(named: "mail", options: ConsumerOptions(
            retry: RetryPolicy(maxAttempts: 1), commitInterval: .zero))
        let run = Task {
            try await consumer.run { batch in
                if batch.contains(where: { $0.position == 3 }) { throw HandlerFailure() }
            }
        }
        #expect(try await eventually { consumer.committed == 10 })
        run.cancel()
        try await run.value
        #expect(try consumer.parked().map(\.position) == [3])
        #expect(try first.consumerNames() == ["mail"])
        try await first.close()

        // Another instance: a start of `.end` is not used, the stored position is.
        let second = try await EventStore.open(postgres: configuration)
        #expect(try second.consumerNames() == ["mail"])
        let again = try second.consumer(named: "mail", startingAt: .end)
        #expect(again.committed == 10)
        let parked = try again.parked()
        #expect(parked.map(\.position) == [3])
        #expect(parked.first?.errorType.hasSuffix("HandlerFailure") == true)
        #expect(parked.first?.attempts == 1)
        // Retried from the second instance: handled, it leaves the shared list.
        #expect(try await again.retryParked { _ in }.isEmpty)
        try again.reset(to: .position(4))
        try await second.close()

        let third = try await EventStore.open(postgres: configuration)
        let last = try third.consumer(named: "mail")
        #expect(last.committed == 4)
        #expect(try last.parked().isEmpty)
        // A consumer never committed to is listed once it has a position (written at creation).
        _ = try third.consumer(named: "audit", startingAt: .end)
        #expect(try third.consumerNames() == ["audit", "mail"])
        #expect(try third.consumer(named: "audit").committed == 10)
        try await third.close()
    }

    @Test("a stored checkpoint whose anchor no longer matches the log is refused, as a file's is")
    func checkpointBoundToHistory() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let store = try await EventStore.open(postgres: configuration)
        try await appendCounted(store, 6)
        try await store.consumer(named: "mail").commit(through: 3)
        try await store.close()
        // As if the event at 3 were another one (the log's history is not the one committed in).
        let changed = try await sql(configuration, #"UPDATE "\#(configuration.schema)".consumers SET anchor_checksum = (anchor_checksum + 1) % 4294967296 WHERE name = 'mail' RETURNING name"#, as: String.self)
        #expect(changed == ["mail"])

        let reopened = try await EventStore.open(postgres: configuration)
        let consumer = try reopened.consumer(named: "mail")
        await #expect {
            try await consumer.commit(through: 4)
        } throws: { error in
            guard case .checkpointOffHistory(let name, let committed, _) = error as? ConsumerError else { return false }
            return name == "mail" && committed == 4
        }
        // A reset binds it again.
        try consumer.reset(to: .position(5))
        try await consumer.commit(through: 5)
        #expect(try await sql(configuration, #"SELECT committed FROM "\#(configuration.schema)".consumers WHERE name = 'mail'"#, as: Int64.self) == [6])
        try await reopened.close()
    }

    @Test("one store instance holds a consumer at a time; one waiting for it takes it within seconds of the holder's close")
    func oneHolderThenTakeoverAfterClose() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let a = try await EventStore.open(postgres: configuration)
        let b = try await EventStore.open(postgres: configuration)
        try await appendCounted(a, 8)
        let held = try a.consumer(named: "index")
        #expect {
            _ = try b.consumer(named: "index")
        } throws: { error in
            guard case .inUse(let name, let path) = error as? ConsumerError else { return false }
            return name == "index" && path.contains(configuration.schema)
        }
        // Another consumer is not held by it.
        _ = try b.consumer(named: "other")

        let taken = TestFlag()
        let waiting = Task {
            let consumer = try await b.consumer(named: "index", waitingForLease: .milliseconds(100))
            taken.set()
            return consumer
        }
        try await Task.sleep(for: .milliseconds(800))
        #expect(!taken.isSet, "took a consumer another instance holds")
        try await held.commit(through: 4)
        let closed = ContinuousClock.now
        try await a.close()
        let consumer = try await waiting.value
        // Seconds, not the 15 minutes a dead session's TCP keepalive could take: a bound a loaded
        // 2-core CI machine keeps (the waiting instance opens a connection per try, each a new
        // server backend; the whole suite in parallel made one takeover take 5.4 s).
        #expect(ContinuousClock.now - closed < .seconds(30))
        #expect(consumer.committed == 5)
        try await b.close()
    }

    @Test("a store that lost its lease commits nothing more: its commit and its run throw leaseLost; the new holder's position stands")
    func commitAfterLosingTheLeaseIsRefused() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let a = try await EventStore.open(postgres: configuration)
        // b learns of a's appends only when it asks (no notifications, no polls): the position
        // a committed is past b's view, which must not count as a checkpoint ahead of the log.
        var deaf = configuration
        deaf.listensForNotifications = false
        deaf.pollInterval = .seconds(3600)
        let b = try await EventStore.open(postgres: deaf)
        try await appendCounted(a, 10)
        let held = try a.consumer(named: "mail")
        try await held.commit(through: 2)

        // The holder's session ends (its connection dropped, or an operator ended it).
        let ended = try await sql(configuration, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '\(leaseSession(configuration, "mail"))'", as: Bool.self)
        #expect(ended == [true])
        let taken = try await b.consumer(named: "mail", waitingForLease: .milliseconds(50))
        #expect(taken.committed == 3)
        // It delivers from there: the position is not taken for one ahead of the log.
        var events = taken.events().makeAsyncIterator()
        #expect(try await events.next()?.position == 3)
        try await taken.commit(through: 7)

        await #expect {
            try await held.commit(through: 5)
        } throws: { error in
            guard case .leaseLost(let name, _) = error as? ConsumerError else { return false }
            return name == "mail"
        }
        await #expect {
            try await held.run { _ in Issue.record("a store without the lease handled an event") }
        } throws: { error in
            guard case .leaseLost = error as? ConsumerError else { return false }
            return true
        }
        #expect {
            try held.reset(to: .position(0))
        } throws: { error in
            guard case .leaseLost = error as? ConsumerError else { return false }
            return true
        }
        #expect(try await sql(configuration, #"SELECT committed FROM "\#(configuration.schema)".consumers WHERE name = 'mail'"#, as: Int64.self) == [8])

        // Asked again, the store opens the consumer anew: in use while the other holds it, then its own again.
        #expect(throws: ConsumerError.self) { _ = try a.consumer(named: "mail") }
        try await b.close()
        let again = try a.consumer(named: "mail")   // free at once: a closing store unlocks before it ends the session
        #expect(again !== held)
        #expect(again.committed == 8)
        try await again.commit(through: 9)
        try await a.close()
    }

    @Test("a schema of version 1 is migrated: the consumers' tables are made at open")
    func migratesVersionOneSchema() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        try await PostgresLog.open(configuration).close()
        let s = configuration.schema
        try await backToSchemaVersionOne(configuration)
        let store = try await EventStore.open(postgres: configuration)
        try await appendCounted(store, 2)
        try await store.consumer(named: "mail").commit(through: 1)
        #expect(try store.consumerNames() == ["mail"])
        // Versions 2 and 3 only add tables and a column: a version 1 build (which checks schema_version) still opens the log.
        #expect(try await sql(configuration, #"SELECT value FROM "\#(s)".meta WHERE key = 'schema_version'"#, as: String.self) == ["1"])
        #expect(try await sql(configuration, #"SELECT value FROM "\#(s)".meta WHERE key = 'schema_revision'"#, as: String.self) == ["3"])
        try await store.close()
    }

    @Test("a schema of version 2 is migrated: parked events keep their rows and gain a retry request a version 2 build can still write past")
    func migratesVersionTwoSchema() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        try await parkOneEvent(configuration, of: 4, failing: 2)
        try await backToSchemaVersionTwo(configuration)
        let s = configuration.schema

        let store = try await EventStore.open(postgres: configuration)
        #expect(try await sql(configuration, #"SELECT value FROM "\#(s)".meta WHERE key = 'schema_revision'"#, as: String.self) == ["3"])
        let again = try store.consumer(named: "mail", options: ConsumerOptions(retry: RetryPolicy(maxAttempts: 1), commitInterval: .zero))
        #expect(try again.parked().map { [$0.position, $0.retryRequested ? 1 : 0] } == [[2, 0]])
        try again.requestRetry(ofParkedAt: 2)
        #expect(try again.parked().map(\.retryRequested) == [true])
        // What a version 2 build writes (its function, kept) leaves the request at the column's default.
        let id = try #require(try await sql(configuration, #"SELECT id::text FROM "\#(s)".consumers WHERE name = 'mail'"#, as: String.self).first)
        _ = try await sql(configuration, #"SELECT "\#(s)".replace_parked(\#(id), ARRAY[2]::bigint[], ARRAY['Counted/e2'], ARRAY['Counted'], ARRAY['E'], ARRAY['e'], ARRAY[3], ARRAY[0]::bigint[]) IS NULL"#, as: Bool.self)
        #expect(try again.parked().map { [$0.position, UInt64($0.attempts), $0.retryRequested ? 1 : 0] } == [[2, 3, 0]])
        // Requested again and served by the next run.
        try again.requestRetry(ofParkedAt: 2)
        let seen = Seen()
        try await runUntil(again, seen: seen, { (try? again.parked())?.isEmpty ?? false })
        #expect(seen.positions == [2])
        try await store.close()
    }

    /// Two processes stand by for one consumer while this one appends; the holder is SIGKILLed
    /// midway: the other takes over within seconds, from the holder's last commit, and every
    /// event is handled at least once, none skipped.
    @Test("the holder's process SIGKILLed: the waiting process takes over within seconds from the last commit; every event handled, none skipped")
    func takeoverAfterSIGKILL() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let total = 600
        let writer = try await EventStore.open(postgres: configuration)
        try await appendCounted(writer, 200)
        let scratch = TemporaryDirectory("pg-lease")
        let helper = builtExecutable("ActivitiesTestHelper")
        let first = try ChildProcess(helper, arguments: ["lease", configuration.schema, "\(total)"], scratch: scratch.url)
        #expect(first.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("leased ") }, "\(first.lines.suffix(3)) \(first.errorOutput)")
        let second = try ChildProcess(helper, arguments: ["lease", configuration.schema, "\(total)"], scratch: scratch.url)
        #expect(second.waitForLine(timeout: .seconds(60)) { $0 == "waiting" }, "\(second.lines.suffix(3)) \(second.errorOutput)")
        // The rest is appended while the consumers run.
        let appending = Task { try await appendCounted(writer, total - 200) }

        func handled(_ child: ChildProcess) -> [Int] {
            child.lines.filter { $0.hasPrefix("handled ") }.flatMap { $0.dropFirst(8).split(separator: " ").compactMap { Int($0) } }
        }
        #expect(first.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("handled ") && ($0.split(separator: " ").last.flatMap { Int($0) } ?? 0) >= 150 }, "\(first.lines.suffix(3)) \(first.errorOutput)")
        #expect(!second.lines.contains { $0.hasPrefix("leased") }, "two processes held the consumer at once")
        first.kill()
        let killed = ContinuousClock.now
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("leased ") }, "\(second.lines.suffix(3)) \(second.errorOutput)")
        let failover = ContinuousClock.now - killed
        // Seconds, as after a close (typically 0.02–0.25 s; bounded loosely for a loaded CI machine).
        #expect(failover < .seconds(30), "took over after \(failover)")
        try await appending.value
        #expect(second.waitForExit(timeout: .seconds(120)) == 0, "\(second.lines.suffix(3)) \(second.errorOutput)")

        let byFirst = handled(first), bySecond = handled(second)
        let start = second.lines.first { $0.hasPrefix("leased ") }.flatMap { Int($0.dropFirst(7)) } ?? -1
        print("pg lease failover: \(byFirst.count) handled by the killed holder, \(bySecond.count) by the next from \(start), after \(failover)")
        // The second started at the first's last commit: never ahead of what the first handled.
        #expect(start > 0)
        #expect(Set(0..<max(0, start)).isSubset(of: Set(byFirst)), "the commit was ahead of what was handled")
        #expect(Set(bySecond) == Set(start..<total))
        #expect(Set(byFirst).union(bySecond) == Set(0..<total), "skipped: \(Set(0..<total).subtracting(byFirst).subtracting(bySecond).sorted().prefix(10))")
        let consumer = try writer.consumer(named: "failover")
        #expect(consumer.committed == UInt64(total))
        try await writer.close()
    }
}
#endif
