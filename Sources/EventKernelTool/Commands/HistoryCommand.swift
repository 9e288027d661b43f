import Activities
import ArgumentParser
import Foundation

struct HistoryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history", abstract: "Every event of one activity, with position, time recorded and version.",
        usage: "eventkernel history [STORE] ID [--dir D | --postgres URL] [--format F] [--json]",
        discussion: """
            The store may come first (history STORE ID) or as --dir; a single argument is the id. --format json prints \
            an array of event objects (the export schema plus version), jsonl one per line, csv flat columns.

            Examples:
              eventkernel history demo 00000000-0000-4000-8000-000000000001
              eventkernel history 00000000-0000-4000-8000-000000000001 --dir demo --format jsonl
            """)

    /// `history [STORE] ID`: the id is the command's operand (StoreLocation.swift).
    enum Operand: StoreOperandLayout {
        static var operandName: String? { "ID" }
        static var operandHelp: String { "The activity's id (a UUID)." }
    }

    @OptionGroup var store: ReadableStoreArguments<Operand>
    var id: String { store.operand ?? "" }
    @OptionGroup var output: OutputOptions

    func run() async throws {
        guard let uuid = UUID(uuidString: id) else { throw ToolError(.badInput, "\"\(id)\" is not a UUID") }
        let repository = try await StoreLocation.openReadOnly(store)
        let entries = try withToolErrorsSync(store: store.url) { try repository.history(of: uuid) }
        guard !entries.isEmpty else { throw ToolError(.badInput, "no activity with id \(uuid.uuidString) has any event in \(store.name)") }
        var listing = EventRows.listing
        // One activity: its id heads the table instead of filling a column.
        if let id = listing.columns.firstIndex(where: { $0.key == "id" }) { listing.columns[id].inTable = false }
        listing.rows = entries.map { EventRows.row($0.event, position: $0.position, recordedAt: $0.timestamp, version: $0.entityVersion) }
        let format = output.resolved
        if format == .table { print("History of \(uuid.uuidString)") }
        Output.print(listing, as: format)
    }
}

func withToolErrorsSync<T>(store: URL? = nil, _ body: () throws -> T) throws -> T {
    do { return try body() } catch { throw ToolError.from(error, store: store) }
}
