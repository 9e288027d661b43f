import Activities
import ArgumentParser
import Foundation

struct QueryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query", abstract: "Query the current activities (read-only; works alongside a running writer).")

    @OptionGroup var store: ReadableStoreOptions
    @OptionGroup var query: QueryOptions

    func run() async throws {
        let repository = try await StoreLocation.openReadOnly(store)
        let results = try repository.projection.read { try query.run(on: $0) }
        query.print(results)
    }
}
