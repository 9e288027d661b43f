import ArgumentParser
import EventKernel
import EventLog
import Foundation

/// `eventkernel consumers`: the store's named consumers (Docs/Consumers.md): list them with
/// their committed position, lag and parked count; reset one; list, mark for retry or skip its parked events.
struct ConsumersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "consumers", abstract: "List a store's named consumers (committed position, lag, parked events); reset one; list, retry or skip its parked events.",
        discussion: """
            A consumer's committed position is the next position it handles; its lag is the log's next position minus it. \
            Reset, retry and skip change the consumer's files in STORE/consumers/: they take the consumer's lock \
            (STORE/consumers/NAME.lock), and refuse (exit 2) while an application or a tail --consumer has the consumer \
            open. With --postgres URL they work on the consumers the PostgreSQL log keeps in its schema, under the \
            consumer's lease. A retry needs the application's handler: --retry marks parked events, and the \
            application's next Consumer.run hands them to its handler. See Docs/Consumers.md.

            Examples:
              eventkernel consumers demo
              eventkernel consumers list demo --json
              eventkernel consumers reset demo mailer --to 0
              eventkernel consumers reset demo mailer --to 2025-03-01T08:00:00Z
              eventkernel consumers parked demo mailer
              eventkernel consumers parked demo mailer --retry 1234
              eventkernel consumers parked demo mailer --retry all
              eventkernel consumers parked demo mailer --skip 1234
              eventkernel consumers --postgres 'postgres://app@db/app?schema=orders'
            """,
        subcommands: [ListConsumers.self, ResetConsumer.self, ParkedEvents.self],
        defaultSubcommand: ListConsumers.self)

    /// `consumers <command> [STORE] NAME`: the consumer's name is the operand.
    enum NameOperand: StoreOperandLayout {
        static var operandName: String? { "NAME" }
        static var operandHelp: String { "The consumer's name." }
    }

    /// The log's next position, read-only beside a running writer.
    static func logEnd(_ directory: URL) throws -> (log: SegmentedLog, end: LogPosition) {
        try StoreLocation.requireStore(directory)
        let log = try withToolErrorsSync(store: directory) { try SegmentedLog.openReadOnly(at: directory) }
        return (log, log.bounds.nextPosition)
    }

    /// Runs `body` with the consumers of the store the arguments name and its log, as a
    /// store over that log keeps them: a directory's `consumers/` files (its log opened
    /// read-only beside a running writer), or the tables a PostgreSQL log keeps in its schema
    /// (Docs/Consumers.md, "On PostgreSQL"), asked of the log the way the store asks it.
    /// - Parameters:
    ///   - writing: Whether `body` writes: a PostgreSQL log's schema is then created or
    ///     migrated as a store would; else it is read as it is (a log at version 1 has no
    ///     consumers), and a missing log is an error.
    ///   - body: Gets the storage, the log, its next position, and the directory for error
    ///     messages (`nil` for PostgreSQL).
    static func withConsumers<Layout, T>(
        _ store: ReadableStoreArguments<Layout>, writing: Bool = false,
        _ body: (_ storage: any ConsumerStorage, _ log: any RecordLog, _ end: LogPosition, _ files: URL?) throws -> T
    ) async throws -> T {
        guard store.postgresURL != nil else {
            if writing { try StoreLocation.refuseBackup(store.url, command: "consumers") }
            let (log, end) = try logEnd(store.url)
            return try body(ConsumerDirectory(storeDirectory: store.url), log, end, store.url)
        }
        let log = try await StoreLocation.openLog(store, preparingSchema: writing)
        let result: Result<T, any Error>
        if let source = log as? any ConsumerStorageSource {
            result = Result { try body(source.makeConsumerStorage(), log, log.bounds.nextPosition, nil) }
        } else {
            result = .failure(ToolError(.io, "the log at \(store.name) does not keep consumers"))
        }
        try? await log.close()
        return try result.get()
    }

    /// Runs `body` with the consumers' storage alone (as ``withConsumers(_:_:)``), without
    /// opening a directory's log: the parked lists need no log, and stay readable beside a log
    /// that does not open.
    static func withStorage<Layout, T>(
        _ store: ReadableStoreArguments<Layout>, writing: Bool = false, _ body: (_ storage: any ConsumerStorage, _ files: URL?) throws -> T
    ) async throws -> T {
        guard store.postgresURL != nil else {
            try StoreLocation.requireStore(store.url)
            if writing { try StoreLocation.refuseBackup(store.url, command: "consumers") }
            return try body(ConsumerDirectory(storeDirectory: store.url), store.url)
        }
        return try await withConsumers(store, writing: writing) { storage, _, _, files in try body(storage, files) }
    }

    /// The consumer's name, checked.
    static func validName(_ name: String) throws -> String {
        if let problem = ConsumerFiles.problem(withName: name) { throw ToolError(.badInput, problem) }
        return name
    }

    struct ListConsumers: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "Each consumer: name, committed position, lag, parked events, time of its last commit (the default).",
            discussion: "With --postgres URL: the consumers of the PostgreSQL log, kept in its schema (Docs/Consumers.md, \"On PostgreSQL\").")

        @OptionGroup var store: ReadableStoreOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await ConsumersCommand.withConsumers(store) { storage, log, end, files in
                try list(storage, log: log, end: end, files: files)
            }
        }

        /// Prints each consumer of `storage` against `log`, whose next position is `end`.
        private func list(_ directory: any ConsumerStorage, log: any RecordLog, end: LogPosition, files: URL?) throws {
            var end = end
            var listing = Listing(columns: [
                Column("name"), Column("committed", right: true), Column("lag", right: true), Column("parked", right: true),
                Column("committed_at", header: "committed at"), Column("problem", tableNull: ""),
            ])
            var damaged = false
            // Every checkpoint is read first, then the log's end once: each row's lag is against
            // the same end, and no checkpoint committed since the log was opened here (by its
            // writer or another instance) is taken for one ahead of the log.
            var read: [(cells: [JSONValue], checkpoint: ConsumerCheckpoint?)] = []
            for name in try withToolErrorsSync(store: files, { try directory.names() }) {
                var cells: [JSONValue] = [.string(name), .null, .null, .null, .null, .null]
                var checkpoint: ConsumerCheckpoint?
                do {
                    checkpoint = try directory.checkpoint(named: name)
                    cells[3] = .int(Int64(try directory.parked(named: name).count))
                } catch {
                    // The database failing is no problem of this consumer's: the listing cannot be made.
                    if case .databaseFailed = error { throw ToolError.from(error) }
                    damaged = true
                    cells[5] = .string("\(error)")
                }
                read.append((cells, checkpoint))
            }
            if !read.isEmpty, let shared = log as? any SharedRecordLog {
                end = try withToolErrorsSync(store: files) { try shared.refresh().nextPosition }
            }
            for (var cells, checkpoint) in read {
                if let checkpoint {
                    cells[1] = .uint(checkpoint.committed)
                    cells[2] = checkpoint.committed <= end ? .uint(end - checkpoint.committed) : .null
                    cells[4] = .string(ISODate.format(checkpoint.committedAt))
                    do {
                        if let problem = try checkpoint.bindingProblem(in: log, end: end) {
                            damaged = true
                            cells[5] = .string(problem.description)
                        }
                    } catch {
                        damaged = true
                        cells[5] = .string("\(error)")
                    }
                }
                listing.rows.append(Listing.Row(cells))
            }
            let format = output.resolved
            if format == .table && listing.rows.isEmpty {
                print("no consumers in \(store.name)")
            } else {
                Output.print(listing, as: format)
            }
            if damaged { throw ExitCode(ToolExit.damage.rawValue) }
        }
    }

    struct ResetConsumer: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset", abstract: "Move a consumer's committed position (backwards or forwards); creates the consumer if it has none.",
            usage: "eventkernel consumers reset [STORE] NAME --to POSITION|DATE|beginning|end [--dir D]",
            discussion: """
                --to N: the next event handled is the one at position N (0 ≤ N ≤ the log's next position). --to DATE: the \
                first event recorded at or after DATE (ISO 8601). --to beginning / end: the log's first event / the next \
                one appended. Refused (exit 2) while the consumer is open elsewhere (an application, a tail --consumer).
                """)

        @OptionGroup var store: ReadableStoreArguments<NameOperand>
        // Unconditional, as replay's --position: `--to -1` reaches the check below and its
        // message, rather than being read as a flag.
        @Option(parsing: .unconditional, help: ArgumentHelp("POSITION, DATE (ISO 8601), beginning or end.", valueName: "TO")) var to: String
        @OptionGroup var output: OutputOptions

        /// The starting point `--to` names.
        static func start(_ text: String) throws -> ConsumerStart {
            switch text {
            case "beginning": return .beginning
            case "end": return .end
            default:
                if let position = UInt64(text) { return .position(position) }
                if let date = ISODate.tryParse(text) { return .recordedAt(date) }
                throw ToolError(.badInput, "--to \"\(text)\" is not a position (0, 1, ...), an ISO 8601 date, beginning or end")
            }
        }

        func run() async throws {
            let name = try ConsumersCommand.validName(store.operand ?? "")
            let start = try Self.start(to)
            let (previous, position, end) = try await ConsumersCommand.withConsumers(store, writing: true) { directory, log, end, files in
                // A damaged or ahead checkpoint is what reset is for: read it only to report it.
                let previous = try? directory.checkpoint(named: name)
                return try withToolErrorsSync(store: files) { () throws -> (ConsumerCheckpoint?, LogPosition, LogPosition) in
                    let lock = try directory.lock(consumer: name)
                    defer { withExtendedLifetime(lock) {} }
                    // The log as it is now, not as it was when opened: a position appended since is valid.
                    let end = try (log as? any SharedRecordLog)?.refresh().nextPosition ?? end
                    let position = try Consumer.resolve(start, in: log, end: end, consumer: name)
                    try directory.write(try ConsumerCheckpoint.bound(name: name, committed: position, in: log), under: lock)
                    return (previous, position, end)
                }
            }
            if output.resolved == .table {
                print("consumer \(name): committed position \(previous.map { "\($0.committed)" } ?? "(none)") -> \(position) (lag \(end - position))")
            } else {
                Output.print(Listing(columns: [Column("name"), Column("previous"), Column("committed"), Column("lag")],
                                     rows: [Listing.Row([.string(name), previous.map { .uint($0.committed) } ?? .null, .uint(position), .uint(end - position)])]),
                             as: output.resolved)
            }
        }
    }

    struct ParkedEvents: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "parked",
            abstract: "List a consumer's parked events; --retry marks them for the application's next run; --skip removes one without handling it.",
            usage: "eventkernel consumers parked [STORE] NAME [--retry POSITION|all | --skip POSITION] [--dir D] [--format F]",
            discussion: """
                Each parked event: position, stream, event type, attempts, when it was parked (or last retried), whether \
                a retry is requested, the error's type and description. --retry POSITION (or all) marks parked events for \
                a retry (KurrentDB's "replay parked"): the handler lives in the application, so the consumer's next run \
                (Consumer.run) hands each marked event to it again; one it handles leaves the list, one it fails on stays \
                with its attempts and error updated and its mark cleared. --retry and --skip are refused (exit 2) while \
                the consumer is open elsewhere (an application, a tail --consumer); an unknown position exits 1. With \
                --format other than table, they print the parked list as changed.
                """)

        @OptionGroup var store: ReadableStoreArguments<NameOperand>
        @Option(help: ArgumentHelp("Mark the parked event at this position (or all of them) for a retry by the consumer's next run.",
                                   valueName: "POSITION|all"))
        var retry: String?
        @Option(help: ArgumentHelp("Remove the parked event at this position without handling it.", valueName: "POSITION"))
        var skip: UInt64?
        @OptionGroup var output: OutputOptions

        func validate() throws {
            if retry != nil && skip != nil { throw ValidationError("--retry and --skip cannot be given together") }
            if let retry, retry != "all", UInt64(retry) == nil {
                throw ValidationError("--retry \"\(retry)\" is not a position (0, 1, ...) or all")
            }
        }

        func run() async throws {
            let name = try ConsumersCommand.validName(store.operand ?? "")
            if retry != nil || skip != nil {
                let retryPosition = retry.flatMap { UInt64($0) }
                var marked = 0
                let parked = try await ConsumersCommand.withStorage(store, writing: true) { directory, files in
                    try withToolErrorsSync(store: files) { () throws -> [ParkedEvent] in
                        // Read and written under the lock: no running consumer parks or retries meanwhile.
                        let lock = try directory.lock(consumer: name)
                        defer { withExtendedLifetime(lock) {} }
                        // A mistyped name is no consumer with nothing parked: say so (exit 1).
                        guard try directory.names().contains(name) else {
                            throw ToolError(.badInput, "no consumer named \"\(name)\" in \(store.name): it has no committed position and no parked events")
                        }
                        return try directory.changeParked(named: name, under: lock) { (list) throws(ConsumerError) in
                            if let skip {
                                try list.skip(at: skip, consumer: name)
                            } else {
                                marked = try list.requestRetry(at: retryPosition, consumer: name)
                            }
                        }
                    }
                }
                guard output.resolved == .table else { return show(parked) }
                if let skip {
                    print("consumer \(name): skipped the parked event at position \(skip); \(parked.count) left")
                } else {
                    let what = switch (retryPosition, marked) {
                    case (let position?, 0): "the parked event at position \(position) was already marked for a retry"
                    case (let position?, _): "marked the parked event at position \(position) for a retry"
                    case (nil, _): "marked \(marked) more parked event(s) for a retry"
                    }
                    print("consumer \(name): \(what); \(parked.filter(\.retryRequested).count) of \(parked.count) " +
                          "marked in all: the consumer's next run hands them to its handler")
                }
                return
            }
            let parked = try await ConsumersCommand.withStorage(store) { directory, files in
                try withToolErrorsSync(store: files) { () throws -> [ParkedEvent] in
                    // A mistyped name is no consumer, not one with nothing parked (exit 1), as
                    // --retry and --skip say.
                    guard try directory.names().contains(name) else {
                        throw ToolError(.badInput, "no consumer named \"\(name)\" in \(store.name): it has no committed position and no parked events")
                    }
                    return try directory.parked(named: name)
                }
            }
            if output.resolved == .table && parked.isEmpty {
                print("consumer \(name) has no parked events")
            } else {
                show(parked)
            }
        }

        /// Prints `parked` in the chosen format.
        private func show(_ parked: [ParkedEvent]) {
            let listing = Listing(columns: [
                Column("position", right: true), Column("stream"), Column("event_type", header: "event type"),
                Column("attempts", right: true), Column("parked_at", header: "parked at"),
                Column("retry", inMachineFormats: false, tableNull: ""), Column("retry_requested", inTable: false),
                Column("error_type", header: "error type"), Column("error"),
            ], rows: parked.map { event in
                Listing.Row([.uint(event.position), .string(event.stream), .string(event.eventType), .int(Int64(event.attempts)),
                             .string(ISODate.format(event.parkedAt)), event.retryRequested ? .string("requested") : .null, .bool(event.retryRequested),
                             .string(event.errorType), .string(event.error)])
            })
            Output.print(listing, as: output.resolved)
        }
    }
}
