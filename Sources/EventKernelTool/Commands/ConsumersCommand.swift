import ArgumentParser
import EventKernel
import EventLog
import Foundation

/// `eventkernel consumers`: the store's named consumers (Docs/Consumers.md): list them with
/// their committed position, lag and parked count; reset one; list or skip its parked events.
struct ConsumersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "consumers", abstract: "List a store's named consumers (committed position, lag, parked events); reset one; list or skip its parked events.",
        discussion: """
            A consumer's committed position is the next position it handles; its lag is the log's next position minus it. \
            Reset and skip change the consumer's files in STORE/consumers/: they take the consumer's lock \
            (STORE/consumers/NAME.lock), and refuse (exit 2) while an application or a tail --consumer has the consumer \
            open. Retrying a parked event needs its handler: the API does that (Consumer.retryParked). See Docs/Consumers.md.

            Examples:
              eventkernel consumers demo
              eventkernel consumers list demo --json
              eventkernel consumers reset demo mailer --to 0
              eventkernel consumers reset demo mailer --to 2025-03-01T08:00:00Z
              eventkernel consumers parked demo mailer
              eventkernel consumers parked demo mailer --skip 1234
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
            guard store.postgresURL != nil else {
                let (log, end) = try ConsumersCommand.logEnd(store.url)
                return try list(ConsumerDirectory(storeDirectory: store.url), log: log, end: end, files: store.url)
            }
            // A shared log keeps its consumers itself (the store asks it the same way).
            let log = try await StoreLocation.openLog(store)
            do {
                guard let source = log as? any ConsumerStorageSource else {
                    throw ToolError(.io, "the log at \(store.name) does not keep consumers")
                }
                try list(source.makeConsumerStorage(), log: log, end: log.bounds.nextPosition, files: nil)
            } catch {
                try? await log.close()
                throw error
            }
            try? await log.close()
        }

        /// Prints each consumer of `storage` against `log`, whose next position is `end`.
        private func list(_ directory: any ConsumerStorage, log: any RecordLog, end: LogPosition, files: URL?) throws {
            var end = end
            var listing = Listing(columns: [
                Column("name"), Column("committed", right: true), Column("lag", right: true), Column("parked", right: true),
                Column("committed_at", header: "committed at"), Column("problem", tableNull: ""),
            ])
            var damaged = false
            for name in try withToolErrorsSync(store: files, { try directory.names() }) {
                var cells: [JSONValue] = [.string(name), .null, .null, .null, .null, .null]
                do {
                    if let checkpoint = try directory.checkpoint(named: name) {
                        // Committed since the log was opened here (by its writer or another
                        // instance): judged against the log as it is now, not as it was.
                        if checkpoint.committed > end, let shared = log as? any SharedRecordLog {
                            end = try shared.refresh().nextPosition
                        }
                        cells[1] = .uint(checkpoint.committed)
                        cells[2] = checkpoint.committed <= end ? .uint(end - checkpoint.committed) : .null
                        cells[4] = .string(ISODate.format(checkpoint.committedAt))
                        if let problem = try checkpoint.bindingProblem(in: log, end: end) {
                            damaged = true
                            cells[5] = .string(problem.description)
                        }
                    }
                    cells[3] = .int(Int64(try directory.parked(named: name).count))
                } catch {
                    damaged = true
                    cells[5] = .string("\(error)")
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

        @OptionGroup var store: StoreArguments<NameOperand>
        @Option(help: ArgumentHelp("POSITION, DATE (ISO 8601), beginning or end.", valueName: "TO")) var to: String
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
            let (log, end) = try ConsumersCommand.logEnd(store.url)
            let directory = ConsumerDirectory(storeDirectory: store.url)
            // A damaged or ahead checkpoint is what reset is for: read it only to report it.
            let previous = try? directory.checkpoint(named: name)
            let position = try withToolErrorsSync(store: store.url) {
                let lock = try ConsumerLock(consumer: name, in: directory)
                defer { withExtendedLifetime(lock) {} }
                let position = try Consumer.resolve(start, in: log, end: end, consumer: name)
                try directory.write(try ConsumerCheckpoint.bound(name: name, committed: position, in: log))
                return position
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
            commandName: "parked", abstract: "List a consumer's parked events; --skip POSITION removes one without handling it.",
            usage: "eventkernel consumers parked [STORE] NAME [--skip POSITION] [--dir D] [--format F]",
            discussion: """
                Each parked event: position, stream, event type, attempts, when it was parked (or last retried), the \
                error's type and description. Retrying needs the handler: use Consumer.retryParked in the application. \
                --skip is refused (exit 2) while the consumer is open elsewhere (an application, a tail --consumer).
                """)

        @OptionGroup var store: StoreArguments<NameOperand>
        @Option(help: ArgumentHelp("Remove the parked event at this position without handling it.", valueName: "POSITION"))
        var skip: UInt64?
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let name = try ConsumersCommand.validName(store.operand ?? "")
            try StoreLocation.requireStore(store.url)
            let directory = ConsumerDirectory(storeDirectory: store.url)
            if let skip {
                let left = try withToolErrorsSync(store: store.url) { () throws -> Int in
                    // Read and written under the lock: no running consumer parks meanwhile.
                    let lock = try ConsumerLock(consumer: name, in: directory)
                    defer { withExtendedLifetime(lock) {} }
                    var parked = try directory.parked(named: name)
                    guard parked.contains(where: { $0.position == skip }) else { throw ConsumerError.notParked(consumer: name, position: skip) }
                    parked.removeAll { $0.position == skip }
                    try directory.writeParked(parked, named: name)
                    return parked.count
                }
                if output.resolved == .table { print("consumer \(name): skipped the parked event at position \(skip); \(left) left") }
                return
            }
            let parked = try withToolErrorsSync(store: store.url) { try directory.parked(named: name) }
            let listing = Listing(columns: [
                Column("position", right: true), Column("stream"), Column("event_type", header: "event type"),
                Column("attempts", right: true), Column("parked_at", header: "parked at"), Column("error_type", header: "error type"), Column("error"),
            ], rows: parked.map { event in
                Listing.Row([.uint(event.position), .string(event.stream), .string(event.eventType), .int(Int64(event.attempts)),
                             .string(ISODate.format(event.parkedAt)), .string(event.errorType), .string(event.error)])
            })
            if output.resolved == .table && parked.isEmpty {
                print("consumer \(name) has no parked events")
            } else {
                Output.print(listing, as: output.resolved)
            }
        }
    }
}
