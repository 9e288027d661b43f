import Activities
import ArgumentParser
import Foundation

/// The query flags shared by `query` and `replay`.
struct QueryOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Only activities starting strictly after DATE (ISO 8601 date or date-time; a bare date is its midnight, so 09:00 that day is after it; --where FIELD>DATE is after the whole day).", valueName: "DATE"))
    var after: String?
    @Option(help: ArgumentHelp("Only activities starting strictly before DATE (a bare date is its midnight).", valueName: "DATE"))
    var before: String?
    @Option(name: .customLong("starting-in"), help: ArgumentHelp("Activities whose start lies in A...B (inclusive; a bare date B covers its whole day).", valueName: "A...B"))
    var startingIn: String?
    @Option(help: ArgumentHelp("Activities whose lifetime overlaps A...B (running ones extend forever; a bare date B covers its whole day).", valueName: "A...B"))
    var overlapping: String?
    @Option(name: .customLong("type"), help: ArgumentHelp("Only this type, spelt as stored, e.g. \"Tummy time\" (repeatable).", valueName: "T"))
    var types: [String] = []
    // Unconditional: `--limit -1` is a value to refuse with a reason, not an unknown flag `-1`.
    @Option(parsing: .unconditional, help: ArgumentHelp("At most N results (N ≥ 0; 0 means no limit).", valueName: "N"))
    var limit: Int?
    @Flag(name: .customLong("oldest-first"), help: "Oldest first (default: newest first).")
    var oldestFirst = false
    @OptionGroup var output: OutputOptions

    /// Whether any filter was given (replay summarises otherwise).
    var hasFilters: Bool {
        after != nil || before != nil || startingIn != nil || overlapping != nil || !types.isEmpty || limit != nil || oldestFirst
    }

    func validate() throws {
        if startingIn != nil && overlapping != nil {
            throw ValidationError("--starting-in and --overlapping cannot be combined")
        }
        if (startingIn != nil || overlapping != nil) && (after != nil || before != nil) {
            throw ValidationError("--after/--before cannot be combined with --starting-in/--overlapping")
        }
        if let limit, limit < 0 { throw ValidationError("--limit must be ≥ 0 (got \(limit); 0 means no limit)") }
    }

    private func date(_ text: String?, _ flag: String) throws -> Date? {
        guard let text else { return nil }
        do { return try ISODate.parse(text) } catch { throw ToolError(.badInput, "\(flag): \(error)") }
    }

    /// What a query answered: the rows (at most `--limit`) and how many matched before the limit.
    struct Answer {
        var rows: [ActivityModel]
        var matched: Int
    }

    /// Runs the query against an index.
    func run(on index: borrowing ActivityIndex) throws -> Answer {
        let typeSet: Set<ActivityType>? = types.isEmpty ? nil : Set(types.map { ActivityType(rawValue: $0) })
        let order: ActivitySortOrder = oldestFirst ? .oldestFirst : .newestFirst
        // Asked without the limit, so that the answer says how many matched ("5 of 49,393").
        let all: [ActivityModel]
        do {
            if let text = startingIn ?? overlapping {
                let range = try parseDateRange(text, flag: startingIn != nil ? "--starting-in" : "--overlapping")
                let query = ActivityRangeQuery(startingIn != nil ? .startingIn : .overlapping, from: range.lowerBound, to: range.upperBound,
                                               types: typeSet, sortOrder: order, limit: nil)
                all = try index.fetch(query)
            } else {
                let query = ActivityQuery(afterDate: try date(after, "--after"), beforeDate: try date(before, "--before"),
                                          types: typeSet, limit: nil, sortOrder: order)
                all = try index.fetch(query)
            }
        } catch let error as ActivityQueryError {
            throw ToolError(.badInput, error.description)
        }
        warnAboutUnknownTypes(in: index)
        let limited = limit.map { $0 > 0 && $0 < all.count } ?? false
        return Answer(rows: limited ? Array(all.prefix(limit!)) : all, matched: all.count)
    }

    /// A `--type` no activity has is almost always a misspelling (`tummyTime` for "Tummy time"):
    /// warn on stderr with the types the state holds, and the likely one.
    private func warnAboutUnknownTypes(in index: borrowing ActivityIndex) {
        var known: [String]?
        for type in types {
            let probe = (try? index.fetch(ActivityQuery(types: [ActivityType(rawValue: type)], limit: 1))) ?? []
            guard probe.isEmpty else { continue }
            if known == nil { known = Set(index.all().map(\.type.rawValue)).sorted() }
            let names = known ?? []
            let key = Self.typeKey(type)
            let suggestion = names.first { Self.typeKey($0) == key }.map { " (did you mean \"\($0)\"?)" } ?? ""
            let list = names.isEmpty ? "the state queried holds no activities" : "known types: " + names.map { "\"\($0)\"" }.joined(separator: ", ")
            Output.warning("no activity has type \"\(type)\"\(suggestion); types are matched exactly, as stored; \(list)")
        }
    }

    /// A type name without case, spaces or punctuation, to find what a misspelling meant.
    static func typeKey(_ name: String) -> String {
        String(name.lowercased().unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) }.map(Character.init))
    }

    /// The rows of activities: `id, type, startDate, endDate` (the activity schema, so jsonl
    /// output imports back), and in the table a duration.
    static func listing(_ models: [ActivityModel]) -> Listing {
        Listing(columns: [
            Column("id"), Column("type"), Column("startDate", header: "start"), Column("endDate", header: "end", tableNull: "(active)"),
            Column("duration", right: true, inMachineFormats: false),
        ], rows: models.map { m in
            Listing.Row([.string(m.id.uuidString), .string(m.type.rawValue), .string(ISODate.format(m.startDate)),
                         .optional(m.endDate.map(ISODate.format)), .optional(m.duration.map { Self.duration($0) })])
        })
    }

    /// Prints an answer in the chosen format; the table ends with `N activities`, or `N of M`
    /// when the limit cut the answer.
    func print(_ answer: Answer) {
        let format = output.resolved
        Output.print(Self.listing(answer.rows), as: format)
        guard format == .table else { return }
        let noun = answer.matched == 1 ? "activity" : "activities"
        if answer.rows.count < answer.matched {
            Swift.print("\(Output.count(answer.rows.count)) of \(Output.count(answer.matched)) \(noun)")
        } else {
            Swift.print("\(Output.count(answer.rows.count)) \(noun)")
        }
    }

    static func duration(_ seconds: TimeInterval) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600 ? "\(s / 3600)h\(String(format: "%02d", s / 60 % 60))m" : s >= 60 ? "\(s / 60)m\(String(format: "%02d", s % 60))s" : "\(s)s"
    }
}
