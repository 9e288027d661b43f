import Activities
import ArgumentParser
import Foundation

/// The query flags shared by `query` and `replay`.
struct QueryOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Only activities starting strictly after DATE (ISO 8601 date or date-time).", valueName: "DATE"))
    var after: String?
    @Option(help: ArgumentHelp("Only activities starting strictly before DATE.", valueName: "DATE"))
    var before: String?
    @Option(name: .customLong("starting-in"), help: ArgumentHelp("Activities whose start lies in A...B (inclusive).", valueName: "A...B"))
    var startingIn: String?
    @Option(help: ArgumentHelp("Activities whose lifetime overlaps A...B (running ones extend forever).", valueName: "A...B"))
    var overlapping: String?
    @Option(name: .customLong("type"), help: ArgumentHelp("Only this type (repeatable).", valueName: "T"))
    var types: [String] = []
    @Option(help: "At most N results.")
    var limit: Int?
    @Flag(name: .customLong("oldest-first"), help: "Oldest first (default: newest first).")
    var oldestFirst = false
    @Flag(help: "Print a JSON array instead of a table.")
    var json = false

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
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative") }
    }

    private func date(_ text: String?, _ flag: String) throws -> Date? {
        guard let text else { return nil }
        do { return try ISODate.parse(text) } catch { throw ToolError(.badInput, "\(flag): \(error)") }
    }

    /// Runs the query against an index.
    func run(on index: borrowing ActivityIndex) throws -> [ActivityModel] {
        let typeSet: Set<ActivityType>? = types.isEmpty ? nil : Set(types.map { ActivityType(rawValue: $0) })
        let order: ActivitySortOrder = oldestFirst ? .oldestFirst : .newestFirst
        do {
            if let text = startingIn ?? overlapping {
                let range = try parseDateRange(text, flag: startingIn != nil ? "--starting-in" : "--overlapping")
                let query = ActivityRangeQuery(startingIn != nil ? .startingIn : .overlapping, from: range.lowerBound, to: range.upperBound,
                                               types: typeSet, sortOrder: order, limit: limit)
                return try index.fetch(query)
            }
            let query = ActivityQuery(afterDate: try date(after, "--after"), beforeDate: try date(before, "--before"),
                                      types: typeSet, limit: limit, sortOrder: order)
            return try index.fetch(query)
        } catch let error as ActivityQueryError {
            throw ToolError(.badInput, error.description)
        }
    }

    func print(_ results: [ActivityModel]) {
        if json {
            Swift.print(Output.json(results.map(ActivityJSON.object)))
            return
        }
        let rows = results.map { m in
            [m.id.uuidString, m.type.rawValue, ISODate.format(m.startDate), m.endDate.map(ISODate.format) ?? "(active)",
             m.duration.map { Self.duration($0) } ?? "-"]
        }
        Swift.print(Output.table(["id", "type", "start", "end", ">duration"], rows))
        Swift.print("\(Output.count(results.count)) activit\(results.count == 1 ? "y" : "ies")")
    }

    static func duration(_ seconds: TimeInterval) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600 ? "\(s / 3600)h\(String(format: "%02d", s / 60 % 60))m" : s >= 60 ? "\(s / 60)m\(String(format: "%02d", s % 60))s" : "\(s)s"
    }
}
