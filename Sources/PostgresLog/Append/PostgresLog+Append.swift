#if PostgreSQL
public import EventLog
import EventKernel
import Foundation
import Logging
import PostgresNIO
import KernelPrimitives

extension PostgresLog {
    /// Queues records as one atomic batch; the log's committer puts every batch queued
    /// meanwhile into one transaction (group commit) and calls `completion` once PostgreSQL
    /// committed it, or with the error that prevented it.
    ///
    /// The records are decoded into the table's columns here, on the caller's thread.
    /// Completions run in position order, one at a time, on the log's completer task, after
    /// the records between what this instance knew and the batch's first position (other
    /// instances' appends) are readable.
    ///
    /// Failures: ``LogError/Code/invalidArgument`` for an empty batch or a record that is not
    /// an event; ``LogError/Code/conflict`` (cause: `RepositoryError.conflict`) when a stream
    /// version of the batch is taken in the log (another instance appended to the stream; the
    /// batch is refused alone, the others of its round still commit);
    /// ``LogError/Code/unavailable`` when the server cannot be reached or the connection was
    /// lost (the message says whether the append committed); ``LogError/Code/io`` when the
    /// server refused the statement; ``LogError/Code/closed``.
    ///
    /// - Parameters:
    ///   - entries: Records the event store encoded.
    ///   - committer: Ignored: the log's committer always commits.
    ///   - completion: Receives the positions, or the error.
    public func enqueueAppend(
        _ entries: [LogEntry], committer: AppendCommitter,
        completion: @escaping @Sendable (Result<Range<LogPosition>, LogError>) -> Void
    ) {
        let batch: QueuedBatch
        do {
            batch = try QueuedBatch(entries: entries, compression: configuration.compression, completion: completion)
        } catch {
            return completion(.failure(error))
        }
        let accepted = appends.withLock { queue -> Bool in
            guard !queue.closed else { return false }
            queue.batches.append(batch)
            return true
        }
        guard accepted else { return completion(.failure(LogError(.closed, "the log is closed"))) }
        committerBell.ring()
    }

    /// Nothing to do: the committer takes every queued append on its own.
    public func commitEnqueuedAppends() {}

    // MARK: The committer

    /// Runs until the log closes: commits what is queued, round after round, over one leased
    /// connection that it keeps between rounds (so that an append costs one round trip, not a
    /// lease and a look at the session as well), and another one when that is lost.
    func runCommitter() async {
        // The completer tells the last rounds' appenders after this returns.
        defer { completerBell.close() }
        var failedLeases = 0
        var open = await committerBell.wait()
        while open || appends.withLock({ !$0.batches.isEmpty }) {
            do {
                open = try await withLease("appending") { connection in
                    let session = try await self.session(of: connection)
                    while true {
                        while let batches = self.appends.withLock({ $0.takeRound(maximumRecords: self.configuration.maximumRoundRecords, maximumBytes: self.configuration.maximumRoundBytes) }) {
                            // Lost: the round is settled; lease another connection for the rest.
                            guard await self.commit(AppendRound(batches), on: connection, session: session) else { return true }
                        }
                        // The queue is empty: wait for the next append, holding the connection.
                        guard await self.committerBell.wait() else { return false }
                    }
                }
                failedLeases = 0
            } catch {
                // No connection within the timeout, or twice one that broke before use: what
                // is queued was never sent. Fail it rather than hold the appenders until the
                // server returns, and wait for the next append before trying again.
                failedLeases += 1
                if failedLeases < 2, (error as? LogError)?.code != .unavailable { continue }
                failedLeases = 0
                let failure = PostgresFailure.logError(error, while: "appending", configuration: configuration)
                let failed = appends.withLock { queue -> [QueuedBatch] in
                    defer { queue.batches.removeAll() }
                    return queue.batches
                }
                if !failed.isEmpty {
                    logger.error("appends failed: no connection to the server", metadata: ["error": "\(failure)", "batches": "\(failed.count)"])
                    complete(failed, with: failed.map { _ in .failure(failure) })
                }
                if open { open = await committerBell.wait() }
            }
        }
    }

    /// One append transaction: `append_round(...)` in one statement. Its outcome goes to the
    /// completer, so the next round can be sent while this one's appenders are told.
    /// - Returns: `false` when the connection was lost (after the round's outcome was settled
    ///   or the round queued again).
    private func commit(_ round: AppendRound, on connection: PostgresConnection, session: Session) async -> Bool {
        var round = round
        let query = round.query(schema: configuration.schema, origin: origin)
        var outcomes: [(first: Int64?, stream: Int32?, expected: Int64?, actual: Int64?)] = []
        outcomes.reserveCapacity(round.batches.count)
        do {
            let rows = try await connection.query(query, logger: logger)
            for try await (_, first, stream, expected, actual) in rows.decode((Int32, Int64?, Int32?, Int64?, Int64?).self) {
                outcomes.append((first, stream, expected, actual))
            }
        } catch where PostgresFailure.isStatementRefusal(error) {
            // The statement failed as a whole: its transaction rolled back.
            let failure = PostgresFailure.logError(error, while: "appending", configuration: configuration)
            complete(round.batches, with: round.batches.map { _ in .failure(failure) })
            return true
        } catch {
            await settle(round, interruptedBy: error, session: session)
            return false
        }
        guard outcomes.count == round.batches.count else {
            let failure = LogError(.io, "append_round answered \(outcomes.count) rows for \(round.batches.count) batches: the schema in \(configuration) is not the one this code installs", file: table)
            complete(round.batches, with: round.batches.map { _ in .failure(failure) })
            return true
        }
        let results = zip(round.batches, outcomes).map { batch, outcome -> Result<Range<LogPosition>, LogError> in
            if let first = outcome.first {
                let start = LogPosition(first)
                return .success(start..<start + LogPosition(batch.rows.count))
            }
            let stream = outcome.stream.map { round.streams[Int($0) - 1] } ?? batch.streams[0].stream
            return .failure(conflict(stream: stream, expected: outcome.expected ?? 0, actual: outcome.actual ?? 0))
        }
        complete(round.batches, with: results)
        return true
    }

    func conflict(stream: StreamID, expected: Int64, actual: Int64) -> LogError {
        let cause = RepositoryError.conflict(stream: stream, expected: UInt64(max(0, expected)), actual: UInt64(max(0, actual)))
        return LogError(.conflict, "\(stream) is at version \(actual) in \(configuration), not \(expected): another instance appended to it", file: table, cause: cause)
    }

    // MARK: The completer

    /// Hands a round's outcome to the completer, which tells its appenders in order.
    func complete(_ batches: [QueuedBatch], with results: [Result<Range<LogPosition>, LogError>]) {
        completions.withLock { $0.append(Completion(batches: batches, results: results)) }
        completerBell.ring()
    }

    /// Runs until the committer has finished: for each round in commit order, makes its
    /// records known (and the other instances' records below them, read first, so that the
    /// store folds them from memory), then calls its appenders' completions, in order.
    func runCompleter() async {
        while true {
            let more = await completerBell.wait()
            while let next = completions.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                await learn(next)
                for (batch, result) in zip(next.batches, next.results) { batch.completion(result) }
            }
            if !more { return }
        }
    }

    private func learn(_ completion: Completion) async {
        var own: [LogRecord] = []
        for (batch, result) in zip(completion.batches, completion.results) {
            guard case .success(let range) = result else { continue }
            for (offset, entry) in batch.entries.enumerated() {
                own.append(LogRecord(position: range.lowerBound + LogPosition(offset), timestamp: entry.timestamp, payload: entry.payload))
            }
        }
        guard let start = own.first?.position else { return }
        let known = view.withLock { $0.next }
        if known < start {
            do {
                var gap: [LogRecord] = []
                var position = known
                while position < start {
                    let query = Self.rangeQuery(schema: configuration.schema, from: position, through: start - 1, limit: configuration.readPageSize)
                    let page = try await client.query(query, logger: logger).collect().map { try EventRow.record(from: $0, table: table) }
                    guard let last = page.last else { break }
                    gap += page
                    position = last.position + 1
                }
                view.withLock { _ = $0.learn(gap) }
            } catch {
                // Reads fall back to the server; the round itself committed.
                logger.notice("could not read other instances' records below an own append", metadata: ["error": "\(error)"])
            }
        }
        view.withLock { _ = $0.learn(own) }
    }

    // MARK: Connections

    /// The server session behind a connection: enough to end it from another connection.
    struct Session: Sendable {
        var pid: Int32
        var started: Date
    }

    func session(of connection: PostgresConnection) async throws -> Session {
        let rows = try await connection.query("SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()", logger: logger)
        for try await (pid, started) in rows.decode((Int32, Date).self) { return Session(pid: pid, started: started) }
        throw LogError(.io, "the server did not report its own session in pg_stat_activity", file: table)
    }

    /// Leases a connection from the client for `body`, or fails with
    /// ``LogError/Code/unavailable`` when none is leased within
    /// ``Configuration/connectTimeout`` (the pool itself would wait a minute).
    func withLease<R: Sendable>(_ what: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> R) async throws -> R {
        let phase = Locked(LeasePhase.waiting)
        let timeout = configuration.connectTimeout
        let description = configuration.endpoint.description
        return try await withThrowingTaskGroup(of: R?.self) { group in
            group.addTask {
                try await self.client.withConnection { connection in
                    let leased = phase.withLock { phase -> Bool in
                        guard phase == .waiting else { return false }
                        phase = .leased
                        return true
                    }
                    guard leased else { return nil }
                    return try await body(connection)
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                let timedOut = phase.withLock { phase -> Bool in
                    guard phase == .waiting else { return false }
                    phase = .timedOut
                    return true
                }
                if timedOut {
                    throw LogError(.unavailable, "\(what): no connection to PostgreSQL at \(description) within \(timeout)")
                }
                return nil
            }
            while let result = try await group.next() {
                if let value = result {
                    group.cancelAll()
                    return value
                }
            }
            throw LogError(.unavailable, "\(what): no connection to PostgreSQL at \(description)")
        }
    }

    enum LeasePhase { case waiting, leased, timedOut }

    // MARK: Interrupted appends

    /// Settles a round whose connection was lost mid-statement: ends the old session (so the
    /// transaction can no longer commit later), then looks the round up. Committed: its
    /// appenders get their positions. Not committed: its batches are queued again, once
    /// (the round id makes a second commit impossible, and the old session is gone). Not
    /// knowable (the server is unreachable): the appenders get an error that says so.
    private func settle(_ round: AppendRound, interruptedBy cause: any Error, session: Session) async {
        let lost = PostgresFailure.logError(cause, while: "appending", configuration: configuration)
        let roundID = round.id
        let schema = configuration.schema
        let logger = self.logger
        let outcome: (firsts: [Int64?], actuals: [Int64])?
        do {
            outcome = try await withLease("checking whether an interrupted append committed") { connection -> ([Int64?], [Int64])? in
                var binds = PostgresBindings(capacity: 2)
                binds.append(session.pid)
                binds.append(session.started)
                try await connection.query(PostgresQuery(unsafeSQL: "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2", binds: binds), logger: logger)
                let deadline = ContinuousClock.now + .seconds(30)
                while true {
                    var alive = false
                    for try await _ in try await connection.query(PostgresQuery(unsafeSQL: "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2", binds: binds), logger: logger) {
                        alive = true
                    }
                    if !alive { break }
                    guard ContinuousClock.now < deadline else {
                        throw LogError(.unavailable, "the interrupted session \(session.pid) did not end within 30 s")
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
                var lookup = PostgresBindings(capacity: 1)
                lookup.append(roundID)
                var found: [Int64?]?
                // -1 stands for a refused batch's null (arrays of optionals do not decode).
                for try await firsts in try await connection.query(PostgresQuery(unsafeSQL: #"SELECT array(SELECT coalesce(f, -1) FROM unnest(batch_firsts) WITH ORDINALITY AS u(f, n) ORDER BY n) FROM "\#(schema)".rounds WHERE round_id = $1"#, binds: lookup), logger: logger).decode([Int64].self) {
                    found = firsts.map { $0 < 0 ? nil : $0 }
                }
                guard let firsts = found, firsts.count == round.batches.count else { return nil }
                // A refused batch's conflict names its first stream's version as it is now.
                var actuals: [Int64] = []
                for (batch, first) in zip(round.batches, firsts) {
                    guard first == nil else { actuals.append(0); continue }
                    let key = batch.streams[0].key
                    var binds = PostgresBindings(capacity: 3)
                    binds.append(key.type.value)
                    binds.append(key.kind)
                    binds.append(key.id.value)
                    var actual: Int64 = 0
                    for try await version in try await connection.query(PostgresQuery(unsafeSQL: #"SELECT coalesce(max(stream_version), 0) FROM "\#(schema)".events WHERE entity_type = $1 AND entity_id_kind = $2 AND entity_id = $3"#, binds: binds), logger: logger).decode(Int64.self) {
                        actual = version
                    }
                    actuals.append(actual)
                }
                return (firsts, actuals)
            }
        } catch {
            let unknown = LogError(.unavailable, "\(lost.message); whether the append committed is unknown (checking failed: \(error)). If it did, it shows in the log once the server is reachable",
                                   file: table, cause: lost.cause)
            logger.error("an append's outcome is unknown", metadata: ["error": "\(unknown)"])
            complete(round.batches, with: round.batches.map { _ in .failure(unknown) })
            return
        }
        if let (firsts, actuals) = outcome {
            logger.notice("an interrupted append had committed", metadata: ["round": "\(roundID)"])
            let results = round.batches.enumerated().map { index, batch -> Result<Range<LogPosition>, LogError> in
                if let first = firsts[index] {
                    let start = LogPosition(first)
                    return .success(start..<start + LogPosition(batch.rows.count))
                }
                let stream = batch.streams[0]
                return .failure(conflict(stream: stream.stream, expected: stream.first - 1, actual: actuals[index]))
            }
            complete(round.batches, with: results)
            return
        }
        // Not committed, and it never will be. Queue it again, ahead of later appends (their
        // versions may build on it), unless it already had its second chance.
        let (retry, fail) = round.batches.reduce(into: ([QueuedBatch](), [QueuedBatch]())) { split, batch in
            var batch = batch
            batch.attempts += 1
            if batch.attempts < 2 { split.0.append(batch) } else { split.1.append(batch) }
        }
        logger.notice("an interrupted append did not commit", metadata: ["round": "\(roundID)", "retrying": "\(retry.count)"])
        appends.withLock { $0.batches.insert(contentsOf: retry, at: 0) }
        let failure = LogError(.unavailable, "\(lost.message); the append did not commit (checked on a new connection)", file: table, cause: lost.cause)
        if !fail.isEmpty { complete(fail, with: fail.map { _ in .failure(failure) }) }
    }
}
#endif
