import Activities
import ArgumentParser
import EventLog
import Foundation

struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "The activities as they were at a date or log position: a summary, or queried with the query flags.")

    @OptionGroup var store: ReadableStoreOptions
    @Option(name: .customLong("as-of"), help: ArgumentHelp("After every event recorded at or before DATE.", valueName: "DATE"))
    var asOf: String?
    @Option(help: ArgumentHelp("After the event at position N (inclusive).", valueName: "N"))
    var position: UInt64?
    @OptionGroup var query: QueryOptions

    func validate() throws {
        guard (asOf == nil) != (position == nil) else { throw ValidationError("give exactly one of --as-of DATE or --position N") }
    }

    func run() async throws {
        let repository = try await StoreLocation.openReadOnly(store)
        let index: ActivityIndex
        let label: String
        do {
            if let asOf {
                let date: Date
                do { date = try ISODate.parse(asOf) } catch { throw ToolError(.badInput, "--as-of: \(error)") }
                // Log timestamps hold years 1678...2262: clamp, so that any date answers.
                let clamped = min(max(date, Date(timeIntervalSince1970: -9.2e9)), Date(timeIntervalSince1970: 9.2e9))
                index = try repository.activities(asOf: clamped)
                label = "as of \(ISODate.format(date))"
            } else {
                let next = repository.store.log.bounds.nextPosition
                guard let position, position < next else {
                    throw ToolError(.badInput, "--position \(position ?? 0) is past the end of the log (last position: \(next == 0 ? "none, the log is empty" : String(next - 1)))")
                }
                index = try repository.activities(throughPosition: position)
                label = "through position \(position)"
            }
        } catch let error as ToolError { throw error } catch { throw ToolError.from(error, store: store.url) }
        if query.hasFilters {
            query.print(try query.run(on: index))
            return
        }
        let all = index.all(sortedBy: .oldestFirst)
        var byType: [String: Int] = [:]
        for m in all { byType[m.type.rawValue, default: 0] += 1 }
        let active = all.filter(\.isActive).count
        let first = all.first?.startDate
        let last = all.map { $0.endDate ?? $0.startDate }.max()
        if query.json {
            print(Output.json([
                "state": label, "activities": all.count, "active": active, "byType": byType,
                "firstStart": first.map { ISODate.format($0) as Any } ?? NSNull(),
                "lastDate": last.map { ISODate.format($0) as Any } ?? NSNull(),
            ] as [String: Any]))
            return
        }
        print("State \(label)")
        print(Output.keyValues([
            ("activities", Output.count(all.count)), ("active", Output.count(active)),
            ("time span", first.map { "\(ISODate.format($0)) … \(ISODate.format(last ?? $0))" } ?? "(empty)"),
        ]))
        print("")
        print(Output.table(["type", ">count"], byType.sorted { $0.value > $1.value }.map { [$0.key, Output.count($0.value)] }))
    }
}
