import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation

struct QueryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query", abstract: "Query the current activities, or a generic entity type's entities by field (read-only; works alongside a running writer).",
        discussion: """
            Dates are the activities' own (start and end), not when they were recorded; see replay --as-of for that.
            Types are matched exactly as stored; a type no activity has is warned about on stderr.

            Another entity type (a generic repository's): --type TYPE with --where or --order. \
            --where FIELD=VALUE (also !=, >=, >, <=, <; several are AND) compares each entity's stored value as the \
            kind it is (a date as a date, a number as a number); a field no entity has is an error. \
            The entities are found by a scan of the log, said on stderr and as "plan" in --json. For instance \
            (on a ledger, see Docs/CLI.md): query ledger --type Account --where "balance>=100" --order balance:desc.

            Examples:
              eventkernel query demo --type sleep --limit 5
              eventkernel query demo --starting-in 2025-03-01...2025-03-07 --oldest-first --format csv
              eventkernel query demo --overlapping 2025-03-01T02:00Z...2025-03-01T03:00Z --json
              eventkernel query --dir demo --type "Tummy time" --after 2025-06-01 --format jsonl
            """)

    @OptionGroup var store: ReadableStoreOptions
    @OptionGroup var query: QueryOptions
    @Option(name: .customLong("where"), help: ArgumentHelp("A generic type's entities whose FIELD compares so with VALUE (=, !=, >=, >, <=, <; repeatable: all must hold).", valueName: "FIELD=VALUE"))
    var conditions: [String] = []
    @Option(help: ArgumentHelp("Order a generic type's entities by FIELD (nulls last; :desc for descending; default: by id).", valueName: "FIELD[:desc]"))
    var order: String?
    /// Whether a generic entity type is asked for, not activities.
    var isGeneric: Bool { !conditions.isEmpty || order != nil }

    func validate() throws {
        guard isGeneric else { return }
        guard query.types.count == 1, query.types[0] != ActivityEventCodec.entityType else {
            throw ValidationError("--where and --order query one generic entity type: give it as --type TYPE (once)")
        }
        if query.after != nil || query.before != nil || query.startingIn != nil || query.overlapping != nil || query.oldestFirst {
            throw ValidationError("--after, --before, --starting-in, --overlapping and --oldest-first are the activities' flags: for a generic type use --where")
        }
    }

    func run() async throws {
        if isGeneric { return try await runGeneric() }
        let repository = try await StoreLocation.openReadOnly(store)
        let answer = try repository.projection.read { try query.run(on: $0) }
        query.print(answer)
    }

    private typealias Item = (entity: EntityReplay.Entity, state: JSONTree?)

    /// `--type TYPE --where …`: a generic type's entities by field.
    private func runGeneric() async throws {
        let type = query.types[0]
        let conditions = try self.conditions.map(GenericQuery.Condition.init)
        let repository = try await StoreLocation.openReadOnly(store)
        let events = repository.store
        let bounds = events.log.bounds
        let through: LogPosition? = bounds.nextPosition == 0 ? nil : bounds.nextPosition - 1
        let label = "now"
        let entities = try EntityReplay.fold(events, store: store, type: type, through: through, label: label)
        var items: [Item] = entities.map { ($0, $0.payload.value) }
        // An entity whose payload the tool cannot read might match: leaving it out would be a
        // wrong answer.
        let undecoded = entities.filter { if case .bytes = $0.payload { true } else { false } }
        if let opaque = undecoded.first, case .bytes(let reason, _) = opaque.payload {
            let count = undecoded.count
            throw ToolError(.badInput, "\(count) entit\(count == 1 ? "y" : "ies") of \(type) (first \(opaque.envelope.stream) at position \(opaque.envelope.position)) \(count == 1 ? "has a payload" : "have payloads") the tool cannot decode (\(reason)), so a query cannot tell whether \(count == 1 ? "it matches" : "they match")")
        }
        Output.note("plan: scan (\(Output.count(items.count)) entit\(items.count == 1 ? "y" : "ies") of \(type) folded from the log \(label))")
        items = try GenericQuery.filter(items, conditions, type: type)
        if let order { items = try Self.sorted(items, by: order, type: type, all: entities) }
        let matched = items.count
        if let limit = query.limit, limit > 0, limit < items.count { items = Array(items.prefix(limit)) }

        var opaque = OpaquePayloads()
        let listing = EntityReplay.listing(items.map(\.entity), opaque: &opaque)
        let format = query.output.resolved
        switch format {
        case .jsonl, .csv:
            Output.print(listing, as: format)
        case .json:
            let object: JSONValue = .object([
                ("entityType", .string(type)), ("plan", .string("scan")),
                ("recorded", ReplayCommand.recordedSpan(bounds)),
                ("where", .array(conditions.map { .string($0.text) })),
                ("matched", .int(Int64(matched))), ("rows", .array(listing.rows.map(listing.object))),
            ])
            print(object.text)
        case .table:
            Output.print(listing, as: .table)
            let noun = matched == 1 ? "entity" : "entities"
            print(items.count < matched ? "\(Output.count(items.count)) of \(Output.count(matched)) \(noun)" : "\(Output.count(matched)) \(noun)")
        }
        opaque.report()
    }

    /// The items ordered by `spec` (`FIELD` or `FIELD:desc`), nulls and absent values last,
    /// ties by id.
    /// - Throws: ``ToolError`` (exit 1): a field no entity has, or values of different kinds.
    private static func sorted(_ items: [Item], by spec: String, type: String, all: [EntityReplay.Entity]) throws -> [Item] {
        var field = spec
        var descending = false
        if spec.hasSuffix(":desc") { field = String(spec.dropLast(5)); descending = true }
        else if spec.hasSuffix(":asc") { field = String(spec.dropLast(4)) }
        let path = field.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try GenericQuery.requireField(path, flag: "--order \(spec)", in: all.map(\.payload.value), type: type)
        let keyed = items.map { item in (item, GenericQuery.value(item.state, path).map { GenericQuery.Typed($0) } ?? .null) }
        var mixed: (String, String)?
        let result = keyed.sorted { a, b in
            guard let order = GenericQuery.Typed.order(a.1, b.1) else {
                if mixed == nil { mixed = (a.1.kind, b.1.kind) }
                return false
            }
            if order == .orderedSame { return a.0.entity.envelope.entityID.description < b.0.entity.envelope.entityID.description }
            let nullInvolved = { if case .null = a.1 { true } else if case .null = b.1 { true } else { false } }()
            return (descending && !nullInvolved) ? order == .orderedDescending : order == .orderedAscending
        }
        if let mixed { throw ToolError(.badInput, "--order \(spec): \(field) holds \(mixed.0) in some entities and \(mixed.1) in others, which have no order together") }
        return result.map(\.0)
    }
}
