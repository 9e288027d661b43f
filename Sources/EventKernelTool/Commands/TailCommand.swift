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

            Examples:
              eventkernel tail demo
              eventkernel tail demo -n 100 --format csv
              eventkernel tail demo --from 0 --json
              eventkernel tail demo -n 0 --follow
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

    /// The events printed without -n or --from.
    static let defaultLines: Int64 = 10

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
    }

    var resolvedFormat: OutputFormat { format ?? (json ? .jsonl : .table) }

    func run() async throws {
        let log = try await StoreLocation.openLog(store)
        signal(SIGINT) { _ in terminate(0) }
        signal(SIGPIPE) { _ in terminate(0) }
        let codec = ActivityEventCodec()
        let format = resolvedFormat
        let bounds = log.bounds
        var next: UInt64
        if let from {
            next = UInt64(from)
        } else {
            let count = UInt64(lines ?? Self.defaultLines)
            next = bounds.nextPosition - min(count, bounds.nextPosition - bounds.firstPosition)
        }
        if format == .csv { print(Output.csvHeader(EventRows.listing), terminator: "") }
        var collected = EventRows.listing  // --format json: one array at the end
        while true {
            let end = log.bounds.nextPosition
            if next < end {
                var chunk = EventRows.listing
                try withToolErrorsSync(store: store.url) {
                    try log.forEachRecord(from: next, through: end - 1) { view in
                        let envelope = try EventEnvelope(view)
                        if ActivityEventCodec.isActivityEvent(envelope), let event = try? codec.decode(envelope) {
                            chunk.rows.append(EventRows.row(event, position: envelope.position, recordedAt: envelope.timestamp, version: envelope.entityVersion))
                        } else {
                            chunk.rows.append(EventRows.row(other: envelope))
                        }
                        return true
                    }
                }
                switch format {
                case .table: print(Output.lines(chunk), terminator: "")
                case .jsonl: Output.print(chunk, as: .jsonl)
                case .csv: print(Output.csvRows(chunk), terminator: "")
                case .json: collected.rows += chunk.rows
                }
                next = end
                Output.flush()
            }
            guard follow else { break }
            try await Task.sleep(for: .milliseconds(200))
            // A directory is read again; a PostgreSQL log also learns by notification.
            _ = try withToolErrorsSync(store: store.url) { try log.refresh() }
        }
        if format == .json { Output.print(collected, as: .json) }
    }
}
