import Activities
import ArgumentParser
import Foundation

struct QueryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query", abstract: "Query the current activities (read-only; works alongside a running writer).",
        discussion: """
            Dates are the activities' own (start and end), not when they were recorded; see replay --as-of for that.
            Types are matched exactly as stored; a type no activity has is warned about on stderr.

            Examples:
              eventkernel query demo --type sleep --limit 5
              eventkernel query demo --starting-in 2025-03-01...2025-03-07 --oldest-first --format csv
              eventkernel query demo --overlapping 2025-03-01T02:00Z...2025-03-01T03:00Z --json
              eventkernel query --dir demo --type "Tummy time" --after 2025-06-01 --format jsonl
            """)

    @OptionGroup var store: ReadableStoreOptions
    @OptionGroup var query: QueryOptions

    func run() async throws {
        let repository = try await StoreLocation.openReadOnly(store)
        let answer = try repository.projection.read { try query.run(on: $0) }
        query.print(answer)
    }
}
