import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation

struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "The activities as the log stood at a recording time or position: a summary, or queried with the query flags.",
        discussion: """
            Time travel here is by recording time: --as-of DATE is when events were written to the log, not the \
            activities' own dates (an import or demo records everything at the moment it runs). For the activities' \
            own dates, use the query flags (--before, --starting-in, --overlapping), here or with query. A DATE \
            outside the log's recorded span is warned about on stderr, with the span.
            --format json prints one object, always of the same shape: asOf, position, recorded (the log's first and \
            last recording time), summary (activities, active, byType, firstStart, lastDate), matched and activities \
            (the query's rows; every activity without query flags). jsonl and csv print the rows alone.

            Examples:
              eventkernel replay demo --position 3
              eventkernel replay demo --as-of 2026-01-15T12:00Z --type sleep --limit 10
              eventkernel replay demo --as-of 2026-01-15 --starting-in 2025-06-01...2025-06-30 --format csv
              eventkernel replay demo --entity activity --position 3 --json
            """)

    @OptionGroup var store: ReadableStoreOptions
    @Option(name: .customLong("as-of"), help: ArgumentHelp(
        "Recording time: the state the store knew at DATE, after the log's longest prefix recorded at or before it (a bare date covers its whole day).", valueName: "DATE"))
    var asOf: String?
    @Option(parsing: .unconditional, help: ArgumentHelp("After the event at position N (inclusive; N ≥ 0).", valueName: "N"))
    var position: Int64?
    @Option(help: ArgumentHelp("Another entity type (a generic repository's): its entities then, decoded, instead of the activities.", valueName: "TYPE"))
    var entity: String?
    @OptionGroup var query: QueryOptions

    func validate() throws {
        guard (asOf == nil) != (position == nil) else { throw ValidationError("give exactly one of --as-of DATE or --position N") }
        if let position, position < 0 { throw ValidationError("--position must be ≥ 0 (got \(position))") }
        if entity != nil, query.hasFilters || query.limit != nil || query.oldestFirst {
            throw ValidationError("the query flags select activities: with --entity give only --as-of or --position and --format")
        }
    }

    func run() async throws {
        let repository = try await StoreLocation.openReadOnly(store)
        let bounds = repository.store.log.bounds
        let (through, label, asOfTimestamp) = try moment(repository.store, bounds: bounds)
        if let entity, entity != ActivityEventCodec.entityType {
            return try EntityReplay.print(repository.store, store: store, type: entity, through: through, label: label,
                                          asOf: asOfTimestamp, position: position, format: query.output.resolved)
        }
        let index: ActivityIndex
        do {
            index = try through.map { try repository.activities(throughPosition: $0) } ?? ActivityIndex()
        } catch { throw ToolError.from(error, store: store.url) }

        let format = query.output.resolved
        let answer = try query.run(on: index)
        if format == .jsonl || format == .csv {
            Output.print(QueryOptions.listing(answer.rows), as: format)
            return
        }
        let all = index.all(sortedBy: .oldestFirst)
        var byType: [String: Int] = [:]
        for m in all { byType[m.type.rawValue, default: 0] += 1 }
        let active = all.filter(\.isActive).count
        let first = all.first?.startDate
        let last = all.map { $0.endDate ?? $0.startDate }.max()
        if format == .json {
            let listing = QueryOptions.listing(answer.rows)
            let object: JSONValue = .object([
                ("asOf", .optional(asOfTimestamp.map { ISODate.format($0) })),
                ("position", position.map { .int($0) } ?? .null),
                ("recorded", Self.recordedSpan(bounds)),
                ("summary", .object([
                    ("activities", .int(Int64(all.count))), ("active", .int(Int64(active))),
                    ("byType", .object(byType.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })),
                    ("firstStart", .optional(first.map(ISODate.format))), ("lastDate", .optional(last.map(ISODate.format))),
                ])),
                ("matched", .int(Int64(answer.matched))),
                ("activities", .array(listing.rows.map(listing.object))),
            ])
            print(object.text)
            return
        }
        print("State \(label)")
        print(Output.keyValues([
            ("activities", Output.count(all.count)), ("active", Output.count(active)),
            ("time span", first.map { "\(ISODate.format($0)) … \(ISODate.format(last ?? $0))" } ?? "(empty)"),
        ]))
        print("")
        if query.hasFilters {
            query.print(answer)
        } else {
            print(Output.table(["type", ">count"], byType.sorted { $0.value > $1.value }.map { [$0.key, Output.count($0.value)] }))
        }
    }

    /// The moment asked for: the last position it covers (`nil`: none, the state is empty), its
    /// label, and the recording time it is (for --as-of).
    /// - Throws: ``ToolError``: a bad date, a position past the end, what reading the log throws.
    private func moment(_ events: EventStore, bounds: LogBounds) throws -> (LogPosition?, String, LogTimestamp?) {
        do {
            if let asOf {
                let limit: LogTimestamp
                do { limit = try ISODate.parseRecordingTimeUpperBound(asOf) } catch { throw ToolError(.badInput, "--as-of: \(error)") }
                Self.warnOutsideRecordedSpan(limit, text: asOf, bounds: bounds)
                // Compared in the log's nanoseconds: `--as-of` an event's own recordedAt includes it.
                // Before a damaged batch, when the answer is there (LogDamage.swift).
                return (try LogDamage.lastPosition(events, recordedAtOrBefore: limit, question: "--as-of \(asOf)", store: store.url),
                        "as recorded at or before \(asOf)\(ISODate.isBareDate(asOf) ? " (the whole day, UTC)" : "")", limit)
            }
            let next = bounds.nextPosition
            guard let position, UInt64(position) < next else {
                throw ToolError(.badInput, "--position \(position ?? 0) is past the end of the log (last position: \(next == 0 ? "none, the log is empty" : String(next - 1)))")
            }
            return (UInt64(position), "through position \(position)", nil)
        } catch let error as ToolError { throw error } catch { throw ToolError.from(error, store: store.url) }
    }

    /// The log's first and last recording time (`null` for an empty log).
    static func recordedSpan(_ bounds: LogBounds) -> JSONValue {
        guard let first = bounds.minTimestamp, let last = bounds.maxTimestamp else { return .null }
        return .object([("first", .string(ISODate.format(first))), ("last", .string(ISODate.format(last)))])
    }

    /// `--as-of` before the first recording or after the last is almost always a domain date
    /// asked of recording time: say what the log's recorded span is.
    static func warnOutsideRecordedSpan(_ end: LogTimestamp, text: String, bounds: LogBounds,
                                        ownDates: String = "For the activities' own dates use --before, --starting-in or --overlapping") {
        guard let first = bounds.minTimestamp, let last = bounds.maxTimestamp else {
            Output.warning("--as-of \(text): the log is empty, so the state is empty")
            return
        }
        // A bare date is its whole day: the day that saw the last recording is inside the span.
        let start = ISODate.isBareDate(text) && end > .min
            ? LogTimestamp(nanosecondsSince1970: end.nanosecondsSince1970 - (86_400 * 1_000_000_000 - 1)) : end
        guard end < first || start > last else { return }
        let side = end < first ? "before the first event was recorded, so the state is empty" : "after the last event was recorded, so the state is the current one"
        Output.warning("--as-of \(text) is recording time, and it is \(side): the log was recorded from \(ISODate.format(first)) to \(ISODate.format(last)). \(ownDates)")
    }
}
