import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct TailCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tail", abstract: "Print the last events (10 by default, as tail(1)); with --follow, keep printing what writers append.",
        discussion: """
            Without -n or --from, the last 10 events. -n N prints the last N (0: none, only what --follow sees); \
            --from N every event from position N on (--from 0: the whole log). Each line: position, time recorded \
            (the log's nanoseconds), event, activity id, details. --json is JSON Lines (one export-schema object \
            per line, plus version), as --format jsonl; --format json prints one array and cannot --follow.

            --consumer NAME prints from the named consumer's committed position (a new consumer starts at --from N, \
            else at the log's first event) and, after each chunk (at most 1000 events) is printed and flushed to standard \
            output without error, commits it (STORE/consumers/NAME.checkpoint): a tail that is killed resumes where it left \
            off, without a gap (what was printed after the last commit is printed again). If standard output fails (a full \
            disk, a closed pipe), nothing more is committed and tail exits 4. It holds the consumer's lock while it runs: \
            an application (or another tail) using the consumer makes it exit 2.

            Examples:
              eventkernel tail demo
              eventkernel tail demo -n 100 --format csv
              eventkernel tail demo --from 0 --json
              eventkernel tail demo -n 0 --follow
              eventkernel tail demo --consumer audit-feed --follow --json
            """)

    @OptionGroup var store: ReadableStoreOptions
    @Flag(help: "Keep polling for new events (every 200 ms) until interrupted.") var follow = false
    // Unconditional: `-n -5` and `--from -5` are values to refuse with a reason, not unknown flags.
    @Option(name: [.customShort("n"), .customLong("lines")], parsing: .unconditional,
            help: ArgumentHelp("The last N events (N ≥ 0; default 10).", valueName: "N"))
    var lines: Int64?
    @Option(parsing: .unconditional, help: ArgumentHelp("Every event from position N on (N ≥ 0).", valueName: "N"))
    var from: Int64?
    @Option(help: ArgumentHelp("table (default; one line per event, no header), json, jsonl or csv.", valueName: "F"))
    var format: OutputFormat?
    @Flag(help: "One JSON object per line: short for --format jsonl.") var json = false
    @Option(help: ArgumentHelp("Start at this named consumer's committed position and commit what was printed.", valueName: "NAME"))
    var consumer: String?

    /// The events printed without -n or --from.
    static let defaultLines: Int64 = 10
    /// The most events printed (and, with --consumer, committed) at a time: the memory a tail holds.
    static let chunkSize = 1000

    func validate() throws {
        if let lines, lines < 0 { throw ValidationError("-n must be ≥ 0 (got \(lines)): it counts the last events") }
        if let from, from < 0 {
            throw ValidationError("--from must be ≥ 0 (got \(from)): it is a position; for the last \(-from) events use -n \(-from)")
        }
        if lines != nil && from != nil { throw ValidationError("give -n N (the last N events) or --from N (from position N), not both") }
        if json, let format, format != .jsonl {
            throw ValidationError("--json means --format jsonl: it cannot be combined with --format \(format.rawValue)")
        }
        if follow && resolvedFormat == .json { throw ValidationError("--follow streams: use --format jsonl (or --json), not one JSON array") }
        if let consumer {
            if lines != nil { throw ValidationError("--consumer starts at the consumer's committed position: -n cannot be combined with it (--from N sets where a new consumer starts)") }
            if let problem = ConsumerFiles.problem(withName: consumer) { throw ValidationError(problem) }
        }
    }

    var resolvedFormat: OutputFormat { format ?? (json ? .jsonl : .table) }

    func run() async throws {
        let log = try await StoreLocation.openLog(store)
        signal(SIGINT) { _ in terminate(0) }
        // A reader that stopped reading (`tail | head -1`) ends a plain tail quietly, as
        // tail(1); a consumer's tail must say that its output failed (exit 4, nothing more
        // committed), so the write fails with EPIPE instead of ending the process.
        if consumer == nil { signal(SIGPIPE) { _ in terminate(0) } } else { signal(SIGPIPE, SIG_IGN) }
        let codec = ActivityEventCodec()
        let format = resolvedFormat
        let bounds = log.bounds
        var next: UInt64
        // The consumer's files, and what it committed: the next position to print.
        var checkpoints: ConsumerDirectory?
        var lock: ConsumerLock?
        if let consumer {
            if store.postgresURL != nil { throw ToolError(.badInput, "--consumer keeps its position in the store directory: it cannot be used with a PostgreSQL log yet") }
            try StoreLocation.refuseBackup(store.url, command: "tail --consumer")
            let directory = ConsumerDirectory(storeDirectory: store.url)
            let committed = try withToolErrorsSync(store: store.url) { () throws -> LogPosition in
                // Held until tail exits: no application or other tail commits this consumer meanwhile.
                lock = try ConsumerLock(consumer: consumer, in: directory)
                if let checkpoint = try directory.checkpoint(named: consumer) {
                    if let problem = try checkpoint.bindingProblem(in: log, end: bounds.nextPosition) { throw problem }
                    return checkpoint.committed
                }
                let start = try Consumer.resolve(from.map { .position(UInt64($0)) } ?? .beginning, in: log, end: bounds.nextPosition, consumer: consumer)
                try directory.write(try ConsumerCheckpoint.bound(name: consumer, committed: start, in: log))
                return start
            }
            checkpoints = directory
            next = committed
        } else if let from {
            next = UInt64(from)
        } else {
            let count = UInt64(lines ?? Self.defaultLines)
            next = bounds.nextPosition - min(count, bounds.nextPosition - bounds.firstPosition)
        }
        defer { withExtendedLifetime(lock) {} }
        // The history the positions printed belong to: a repair (or a writer's recovery of a
        // torn tail) cuts the log and starts another, whose events may take the positions of
        // those printed; following on from `next` skipped them without a word.
        let epoch = log.historyEpoch
        if format == .csv { print(Output.csvHeader(EventRows.listing), terminator: "") }
        var collected = EventRows.listing  // --format json: one array at the end
        while true {
            let end = log.bounds.nextPosition
            while next < end {
                var chunk = EventRows.listing
                var last: LogPosition?
                try withToolErrorsSync(store: store.url) {
                    try log.forEachRecord(from: next, through: end - 1) { view in
                        let envelope = try EventEnvelope(view)
                        // A kernel tombstone is listed as the kernel's event it is (`$purged`),
                        // as export writes it, never as an activity's `deleted`.
                        if ActivityEventCodec.isActivityEvent(envelope), Tombstone(eventType: envelope.eventType) == nil {
                            do {
                                let event = try codec.decode(envelope)
                                chunk.rows.append(EventRows.row(event, position: envelope.position, recordedAt: envelope.timestamp, version: envelope.entityVersion, metadata: envelope.metadata))
                            } catch {
                                // Shown with its bytes, and said: an activity event that does not decode is damage.
                                chunk.rows.append(EventRows.row(other: envelope))
                                Output.error("the activity event at position \(envelope.position) does not decode: \(error)")
                                DeferredExit.record(.damage)
                            }
                        } else {
                            chunk.rows.append(EventRows.row(other: envelope))
                        }
                        last = envelope.position
                        return chunk.rows.count < Self.chunkSize
                    }
                }
                switch format {
                case .table: print(Output.lines(chunk), terminator: "")
                case .jsonl: Output.print(chunk, as: .jsonl)
                case .csv: print(Output.csvRows(chunk), terminator: "")
                case .json: collected.rows += chunk.rows
                }
                // A short chunk read everything up to `end` (compaction leaves gaps).
                next = chunk.rows.count < Self.chunkSize ? end : last! + 1
                // Printed and flushed: only now is it committed (json prints once, at the end).
                if format != .json, let consumer, let checkpoints {
                    try commitPrinted(next, consumer: consumer, in: checkpoints, log: log)
                } else if format != .json {
                    try flushPrinted()
                }
            }
            guard follow else { break }
            try await Task.sleep(for: .milliseconds(200))
            // A directory is read again; a PostgreSQL log also learns by notification.
            _ = try withToolErrorsSync(store: store.url) { try log.refresh() }
            if log.historyEpoch != epoch {
                throw ToolError(.damage, "the log was cut while tail followed it (a repair, or a writer's recovery of a torn tail, started history epoch \(log.historyEpoch); tail began in epoch \(epoch)): positions from the cut on now hold other events, and what was printed after the cut is no longer in the log. Run tail again to follow the new history")
            }
        }
        if format == .json {
            Output.print(collected, as: .json)
            if let consumer, let checkpoints {
                try commitPrinted(next, consumer: consumer, in: checkpoints, log: log)
            } else {
                try flushPrinted()
            }
        }
    }

    /// Flushes what was printed.
    /// - Throws: ``ToolError`` (exit 4) when standard output failed (a full disk): a tail that
    ///   printed only part of what it read must not exit 0.
    /// - Parameter consequence: What the failure means, after the message (a consumer's commit).
    private func flushPrinted(consequence: String = "") throws {
        guard Output.flushStandardOutput() else {
            throw ToolError(.io, "writing to standard output failed (\(String(cString: strerror(errno))))\(consequence)")
        }
    }

    /// Commits `position` (the next to print) for the consumer, durably, once everything
    /// printed so far has reached standard output; if it has not, nothing is committed.
    /// - Throws: ``ToolError`` (exit 4) when standard output failed, or the commit's error.
    private func commitPrinted(_ position: LogPosition, consumer: String, in checkpoints: ConsumerDirectory, log: any RecordLog) throws {
        try flushPrinted(consequence: ": nothing past the last commit of consumer \"\(consumer)\" was committed")
        // For tests: a window between the flush and the commit, to kill the process in.
        if let pause = ProcessInfo.processInfo.environment["EVENTKERNEL_TEST_TAIL_PAUSE_BEFORE_COMMIT"], let seconds = Double(pause) {
            Thread.sleep(forTimeInterval: seconds)
        }
        try withToolErrorsSync(store: store.url) {
            try checkpoints.write(try ConsumerCheckpoint.bound(name: consumer, committed: position, in: log))
        }
    }
}
