#if PostgreSQL
import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import PostgresLog
import Testing

/// An error whose description holds a NUL and a backslash, as a handler's error may.
struct NULFailure: Error, CustomStringConvertible {
    var description: String { "bad\u{0}byte at C:\\tmp\\0" }
}

/// Ends the session that holds `consumer`'s lease (as an operator, a server timeout or a
/// network failure would), and says whether one was ended.
func endLeaseSession(_ configuration: PostgresLog.Configuration, _ consumer: String) async throws -> Bool {
    try await sql(configuration, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '\(leaseSession(configuration, consumer))'", as: Bool.self) == [true]
}

/// Review findings on the PostgreSQL consumer lease (issue 29, item 6): a lost lease noticed
/// while reading, writes through the writer's own lease, giving a lease back, the fencing
/// token, rows no EventKernel writes.
@Suite("Consumers on PostgreSQL: losing, confirming and giving back a lease")
struct PostgresConsumerLeaseTests {
    @Test("events() with a handler-owned checkpoint throws leaseLost once its lease session ended (confirmed with the server before a batch)")
    func eventsNoticeALostLease() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let store = try await EventStore.open(postgres: configuration)
        try await appendCounted(store, 3)
        let consumer = try store.consumer(named: "target", options: ConsumerOptions(checkpoint: .handler))
        var events = consumer.events().makeAsyncIterator()
        for position in 0..<3 { #expect(try await events.next()?.position == LogPosition(position)) }

        #expect(try await endLeaseSession(configuration, "target"))
        // Past the confirmation interval: the next batch is confirmed with the server.
        try await Task.sleep(for: .milliseconds(1200))
        try await appendCounted(store, 2)
        await #expect {
            _ = try await events.next()
        } throws: { error in
            guard case .leaseLost(let name, _) = error as? ConsumerError else { return false }
            return name == "target"
        }
        try await store.close()
    }

    @Test("a held lease is confirmed by the server: events() goes on past the confirmation interval")
    func heldLeaseIsConfirmed() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let store = try await EventStore.open(postgres: configuration)
        try await appendCounted(store, 1)
        let consumer = try store.consumer(named: "target", options: ConsumerOptions(checkpoint: .handler))
        var events = consumer.events().makeAsyncIterator()
        #expect(try await events.next()?.position == 0)
        for round in 1...2 {
            try await Task.sleep(for: .milliseconds(1100))
            try await appendCounted(store, 1)
            #expect(try await events.next()?.position == LogPosition(round))
        }
        try await store.close()
    }

    @Test("a run with a handler-owned checkpoint stops with leaseLost within a batch of losing its lease, though it never writes (coverage: the closed socket alone shows it here)")
    func runNoticesALostLease() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let store = try await EventStore.open(postgres: configuration)
        try await appendCounted(store, 1)
        let consumer = try store.consumer(named: "target", options: ConsumerOptions(checkpoint: .handler))
        let handled = TestCounter()
        let run = Task { try await consumer.run { batch in handled.add(batch.count) } }
        #expect(try await eventually { handled.value == 1 })
        #expect(try await endLeaseSession(configuration, "target"))
        try await Task.sleep(for: .milliseconds(1200))
        try await appendCounted(store, 1)
        await #expect {
            try await run.value
        } throws: { error in
            guard case .leaseLost = error as? ConsumerError else { return false }
            return true
        }
        #expect(handled.value == 1)
        try await store.close()
    }

    @Test("the old handle of a consumer reopened after its lease was lost writes nothing through the new lease")
    func oldHandleWritesNothingAfterReopen() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let store = try await EventStore.open(postgres: configuration)
        try await appendCounted(store, 10)
        let options = ConsumerOptions(retry: RetryPolicy(maxAttempts: 1), commitInterval: .zero)
        let old = try store.consumer(named: "mail", options: options)
        try await old.commit(through: 4)
        #expect(try await endLeaseSession(configuration, "mail"))
        // The old handle learns it lost the lease at its next write; reopened, the store takes it again.
        await #expect(throws: ConsumerError.self) { try await old.commit(through: 5) }
        let new = try store.consumer(named: "mail", options: options)
        #expect(new !== old)
        #expect(new.committed == 5)
        let run = Task { try await new.run { batch in if batch.contains(where: { $0.position == 7 }) { throw HandlerFailure() } } }
        #expect(try await eventually { new.committed == 10 })
        run.cancel()
        try await run.value

        // Under the old code these went through the new lease (looked up by name).
        #expect {
            try old.reset(to: .beginning)
        } throws: { error in
            guard case .leaseLost = error as? ConsumerError else { return false }
            return true
        }
        await #expect {
            try await old.commit(through: 8)
        } throws: { error in
            guard case .leaseLost = error as? ConsumerError else { return false }
            return true
        }
        #expect(throws: ConsumerError.self) { try old.skipParked(at: 7) }
        #expect(try new.parked().map(\.position) == [7])
        #expect(try await sql(configuration, #"SELECT committed FROM "\#(configuration.schema)".consumers WHERE name = 'mail'"#, as: Int64.self) == [10])
        try await store.close()
    }

    @Test("Consumer.close gives the lease back without closing the store; each holder's fencing token is greater than the last")
    func closeGivesTheLeaseBack() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let a = try await EventStore.open(postgres: configuration)
        let b = try await EventStore.open(postgres: configuration)
        try await appendCounted(a, 3)
        let held = try a.consumer(named: "mail")
        let first = try #require(held.leaseEpoch)
        try await held.commit(through: 1)
        #expect(throws: ConsumerError.self) { _ = try b.consumer(named: "mail") }

        held.close()
        held.close()
        // A commit after the close writes nothing: the next holder starts where the close left it.
        try await held.commit(through: 2)
        let taken = try b.consumer(named: "mail")
        #expect(taken.committed == 2)
        let second = try #require(taken.leaseEpoch)
        #expect(second > first)
        // The store a still works, and opens the consumer anew once b gives it back.
        taken.close()
        let again = try a.consumer(named: "mail")
        #expect(again !== held)
        #expect(try #require(again.leaseEpoch) > second)
        try await a.close()
        try await b.close()
    }

    @Test("a consumer with a checkpoint file in the snapshot directory and no row in the database is refused, not started afresh")
    func checkpointFileBesideIsNotIgnored() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let cache = TemporaryDirectory("ek-pg-consumer-files")
        try ConsumerDirectory(storeDirectory: cache.url).write(ConsumerCheckpoint(name: "mail", committed: 2, committedAt: .now()))
        let store = try await EventStore.open(postgres: configuration, snapshotsIn: cache.url)
        try await appendCounted(store, 3)
        #expect {
            _ = try store.consumer(named: "mail")
        } throws: { error in
            guard case .checkpointElsewhere(let name, _, _) = error as? ConsumerError else { return false }
            return name == "mail"
        }
        // A consumer with no file there opens as before.
        _ = try store.consumer(named: "audit")
        try await store.close()
    }

    @Test("tasks opening one name at once (opened outside the store's consumer lock) all get the one instance")
    func concurrentOpensShareOneInstance() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let store = try await EventStore.open(postgres: configuration)
        let opened = try await withThrowingTaskGroup(of: ObjectIdentifier.self) { group in
            for _ in 0..<6 { group.addTask { ObjectIdentifier(try store.consumer(named: "mail")) } }
            return try await group.reduce(into: Set<ObjectIdentifier>()) { $0.insert($1) }
        }
        #expect(opened.count == 1)
        try await store.close()
    }

    @Test("a parked event whose error holds NUL and backslashes is parked and read back as it was")
    func parkedTextWithNUL() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let store = try await EventStore.open(postgres: configuration)
        try await appendCounted(store, 2)
        let consumer = try store.consumer(named: "mail", options: ConsumerOptions(retry: RetryPolicy(maxAttempts: 1), commitInterval: .zero))
        let run = Task {
            try await consumer.run { batch in
                if batch.contains(where: { $0.position == 1 }) { throw NULFailure() }
            }
        }
        #expect(try await eventually { consumer.committed == 2 })
        run.cancel()
        try await run.value
        #expect(try consumer.parked().map(\.error) == [NULFailure().description])
        try await store.close()
        let again = try await EventStore.open(postgres: configuration)
        #expect(try again.consumer(named: "mail").parked().map(\.error) == [NULFailure().description])
        try await again.close()
    }

    @Test("rows no EventKernel writes are refused as damaged: a negative committed or parked position; a non-positive id")
    func damagedRows() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let s = configuration.schema
        let store = try await EventStore.open(postgres: configuration)
        try await appendCounted(store, 3)
        let consumer = try store.consumer(named: "mail")
        let id = try await sql(configuration, #"SELECT id FROM "\#(s)".consumers WHERE name = 'mail'"#, as: Int32.self)
        _ = try await sql(configuration, #"INSERT INTO "\#(s)".consumer_parked VALUES (\#(id[0]), -1, 's', 't', 'e', 'x', 1, 0) RETURNING position"#, as: Int64.self)
        #expect {
            _ = try consumer.parked()
        } throws: { error in
            guard case .damagedRow(_, let name, _) = error as? ConsumerError else { return false }
            return name == "mail"
        }
        try await store.close()

        _ = try await sql(configuration, #"UPDATE "\#(s)".consumers SET committed = -2 WHERE name = 'mail' RETURNING id"#, as: Int32.self)
        let again = try await EventStore.open(postgres: configuration)
        #expect {
            _ = try again.consumer(named: "mail")
        } throws: { error in
            guard case .damagedRow = error as? ConsumerError else { return false }
            return true
        }
        try await again.close()
        await #expect(throws: (any Error).self) {
            _ = try await sql(configuration, #"INSERT INTO "\#(s)".consumers (id, name) OVERRIDING SYSTEM VALUE VALUES (-5, 'negative') RETURNING id"#, as: Int32.self)
        }
    }

    @Test("verify checks the consumers' rows: a committed or parked position outside the log is a problem")
    func verifyChecksConsumers() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let store = try await EventStore.open(postgres: configuration)
        try await appendCounted(store, 3)
        try await store.consumer(named: "mail").commit(through: 1)
        try await store.close()
        let log = try await PostgresLog.open(configuration)
        #expect(try log.verify().isIntact)
        let s = configuration.schema
        _ = try await sql(configuration, #"UPDATE "\#(s)".consumers SET committed = 99 WHERE name = 'mail' RETURNING id"#, as: Int32.self)
        let id = try await sql(configuration, #"SELECT id FROM "\#(s)".consumers WHERE name = 'mail'"#, as: Int32.self)
        _ = try await sql(configuration, #"INSERT INTO "\#(s)".consumer_parked VALUES (\#(id[0]), -1, 's', 't', 'e', 'x', 1, 0) RETURNING position"#, as: Int64.self)
        let problems = try log.verify().problems.map(\.description)
        #expect(problems.count == 2, "\(problems)")
        #expect(problems.allSatisfy { $0.contains("consumer \"mail\"") })
        try await log.close()
    }

    @Test("a database failure is typed: the server unreachable says unavailable, a refused statement its SQLSTATE")
    func typedDatabaseFailure() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let store = try await EventStore.open(postgres: configuration)
        _ = try store.consumer(named: "mail")
        // The parked table gone: reading it is refused by the server (undefined_table).
        _ = try await sql(configuration, #"ALTER TABLE "\#(configuration.schema)".consumer_parked RENAME TO parked_elsewhere"#, as: Int32.self)
        #expect {
            _ = try store.consumer(named: "mail").parked()
        } throws: { error in
            guard case .databaseFailed(_, let cause) = error as? ConsumerError else { return false }
            return cause.sqlState == "42P01" && !cause.isUnavailable && cause.code == .io
        }
        try await store.close()
    }
}

#endif
