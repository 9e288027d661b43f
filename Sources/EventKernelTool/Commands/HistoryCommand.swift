import Activities
import ArgumentParser
import EventKernel
import Foundation

struct HistoryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history", abstract: "Every event of one activity, or of any stream (TYPE ID), with the state after each and what changed.",
        usage: "eventkernel history [STORE] [TYPE] ID [--dir D | --postgres URL] [--id-type uuid|string] [--format F] [--json]",
        discussion: """
            The store may come first (history STORE ID) or as --dir; a single argument is the id. --format json prints \
            an array of event objects (the export schema plus version), jsonl one per line, csv flat columns.
            With a TYPE (history STORE TYPE ID, or --dir D TYPE ID): every event of that stream, any entity type, \
            with the entity's state after it (decoded as export decodes it) and the fields it changed.

            Examples:
              eventkernel history demo 00000000-0000-4000-8000-000000000001
              eventkernel history 00000000-0000-4000-8000-000000000001 --dir demo --format jsonl
              eventkernel history demo activity 00000000-0000-4000-8000-000000000001
              eventkernel history --dir demo activity 00000000-0000-4000-8000-000000000001 --json
            """)

    /// `history [STORE] ID`: the id is the command's operand (StoreLocation.swift).
    enum Operand: StoreOperandLayout {
        static var operandName: String? { "ID" }
        static var operandHelp: String { "The activity's id (a UUID); after a TYPE, the entity type (then ID follows)." }
        static var takesTypeBeforeOperand: Bool { true }
    }

    @OptionGroup var store: ReadableStoreArguments<Operand>
    @Argument(help: ArgumentHelp("With STORE TYPE before it: the id of a stream of that type.", valueName: "ID"))
    var third: String?
    @Option(help: ArgumentHelp("With TYPE: the kind of ID, when the type has both a UUID stream and a string stream of that text.", valueName: "uuid|string"))
    var idType: StreamsCommand.IDType?
    @OptionGroup var output: OutputOptions

    /// The stream's type (`nil`: an activity) and id, by the positional rule of ``Operand``.
    var target: (type: String?, id: String) {
        if let third { return (store.operand, third) }
        if let type = store.leadingType { return (type, store.operand ?? "") }
        return (nil, store.operand ?? "")
    }
    var id: String { target.id }

    func validate() throws {
        // `history STORE ID --dir OTHER` reads as TYPE ID with --dir: a type is a name, never a path.
        // Only a directory can be the store: a plain file that happens to have the type's name
        // in the current directory is not one.
        var isDirectory: ObjCBool = false
        if let type = store.leadingType,
           type.contains("/") || FileManager.default.fileExists(atPath: type, isDirectory: &isDirectory) && isDirectory.boolValue {
            let option = store.local.dirOption.map { "--dir '\($0)'" } ?? "--postgres"
            let same = store.local.dirOption.map { URL(filePath: $0).standardizedFileURL.path == URL(filePath: type).standardizedFileURL.path } ?? false
            throw ValidationError("the store is given twice\(same ? "" : ", differently"): '\(type)' and \(option); give it once (with \(option), two arguments are TYPE ID)")
        }
        if idType != nil, target.type == nil || target.type == ActivityEventCodec.entityType {
            throw ValidationError("--id-type is for a stream of another entity type (TYPE ID); an activity's id is a UUID")
        }
        if third != nil && (store.local.dirOption != nil || store.postgresOption != nil) {
            throw ValidationError("with --dir or --postgres give TYPE ID (two arguments); STORE TYPE ID is for a store given first")
        }
    }

    func run() async throws {
        if let type = target.type, type != ActivityEventCodec.entityType {
            return try await StreamHistory.print(store: store, type: type, id: id, idType: idType, format: output.resolved)
        }
        guard let uuid = UUID(uuidString: id) else { throw ToolError(.badInput, "\"\(id)\" is not a UUID") }
        let repository = try await StoreLocation.openReadOnly(store)
        // Up to a damaged batch: the events before it are the history's start, and what is in
        // it and after it is not known (LogDamage.swift).
        let damage = LogDamage.first
        let entries = try LogDamage.readIntact(store: store.url, nothing: []) { end in try repository.history(of: uuid, through: end) }
        guard !entries.isEmpty else {
            // "No such activity" would be a wrong answer: its events may be in the damaged batch or after it.
            if let damage { throw LogDamage.error(damage, "activity \(uuid.uuidString) has no event before the damaged batch, and its events may be in it or after it", store: store.url) }
            throw ToolError(.badInput, "no activity with id \(uuid.uuidString) has any event in \(store.name)")
        }
        if let damage { LogDamage.warnPartial("the history of \(uuid.uuidString)", missing: "the activity may have later events there", damage) }
        var listing = EventRows.listing
        // One activity: its id heads the table instead of filling a column.
        if let id = listing.columns.firstIndex(where: { $0.key == "id" }) { listing.columns[id].inTable = false }
        let stream = ActivityEventCodec.stream(of: uuid)
        listing.rows = entries.map { entry in
            // A kernel tombstone is listed as the kernel's event it is (`$deleted`, `$purged`),
            // with its export line, never as an activity's `deleted`.
            guard let tombstone = entry.tombstone else {
                return EventRows.row(entry.event, position: entry.position, recordedAt: entry.timestamp, version: entry.entityVersion)
            }
            return EventRows.row(other: EventEnvelope(
                position: entry.position, timestamp: entry.timestamp, eventType: tombstone.eventType, schemaVersion: entry.schemaVersion,
                stream: stream, entityVersion: entry.entityVersion, metadata: entry.metadata, payload: []))
        }
        let format = output.resolved
        if format == .table { print("History of \(uuid.uuidString)") }
        Output.print(listing, as: format)
    }
}

func withToolErrorsSync<T>(store: URL? = nil, _ body: () throws -> T) throws -> T {
    do { return try body() } catch { throw ToolError.from(error, store: store) }
}
