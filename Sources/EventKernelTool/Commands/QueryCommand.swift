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

            Another entity type (a generic repository's): --type TYPE, alone (its entities) or with --where, --order, --valid-at or --as-of. \
            --where FIELD=VALUE (also !=, >=, >, <=, <; several are AND) compares each entity's stored value as the \
            kind it is (a date as a date, a number as a number); a field no entity has is an error. Two kinds of time: \
            --as-of DATE is recording time (what the store knew then), --valid-at DATE --date-field F [--end-field G] \
            the entities' own dates (what was true then: F at or before DATE, and G unset or after it). \
            The entities are found by a scan of the log, said on stderr and as "plan" in --json. For instance \
            (on a ledger and a store of stays, see Docs/CLI.md): query ledger --type Account --where "balance>=100" \
            --order balance:desc; query stays --type Stay --valid-at 2025-03-01 --date-field from --end-field until \
            --as-of 2025-03-02.

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
    @Option(name: .customLong("as-of"), help: ArgumentHelp("Recording time, for a generic type: its entities as the store knew them at DATE (a bare date covers its whole day).", valueName: "DATE"))
    var asOf: String?
    @Option(name: .customLong("valid-at"), help: ArgumentHelp("The entities' own time, for a generic type: those whose --date-field is at or before DATE (and --end-field unset or after it); a bare date (UTC) is its whole day.", valueName: "DATE"))
    var validAt: String?
    @Option(name: .customLong("date-field"), help: ArgumentHelp("The date field --valid-at reads: when an entity became true.", valueName: "F"))
    var dateField: String?
    @Option(name: .customLong("end-field"), help: ArgumentHelp("The date field where an entity stopped being true (unset: still is), for --valid-at.", valueName: "G"))
    var endField: String?

    /// Whether a generic entity type is asked for, not activities.
    var isGeneric: Bool { !conditions.isEmpty || order != nil || asOf != nil || validAt != nil || dateField != nil || endField != nil }

    func validate() throws {
        guard isGeneric else { return }
        if query.types == [ActivityEventCodec.entityType] {
            throw ValidationError("--where, --order, --as-of and --valid-at query another entity type than activities: activities are queried with their own flags (--type as an activity's type, such as sleep; --after, --before, --starting-in, --overlapping)")
        }
        guard query.types.count == 1 else {
            throw ValidationError("--where, --order, --as-of and --valid-at query one generic entity type: give it as --type TYPE, once (\(query.types.count) were given)")
        }
        if query.after != nil || query.before != nil || query.startingIn != nil || query.overlapping != nil || query.oldestFirst {
            throw ValidationError("--after, --before, --starting-in, --overlapping and --oldest-first are the activities' flags: for a generic type use --where and --valid-at")
        }
        if (validAt == nil) != (dateField == nil) { throw ValidationError("--valid-at and --date-field go together (the date, and the field it is compared with)") }
        if endField != nil, validAt == nil { throw ValidationError("--end-field needs --valid-at and --date-field") }
    }

    func run() async throws {
        let repository = try await StoreLocation.openReadOnly(store)
        if isGeneric { return try await runGeneric(repository, folded: nil) }
        if let entities = try entityTypeAlone(in: repository) { return try await runGeneric(repository, folded: entities) }
        let answer = try repository.projection.read { try query.run(on: $0) }
        if answer.matched == 0, !query.types.isEmpty { try refuseEntityTypes(in: repository) }
        query.print(answer)
    }

    /// An activity query by types that matched nothing: a type that names another entity type
    /// of the store is an error (its entities are not activities, so "0 activities" would be a
    /// wrong answer), and the warning about unknown types gains the store's other types.
    /// One scan of the log's envelopes, only on this path.
    private func refuseEntityTypes(in repository: EventSourcedActivityRepository) throws {
        var types: Set<String> = []
        try withToolErrorsSync(store: store.url) {
            try EventStore.forEachEnvelope(in: repository.store.log, from: 0, through: nil) { envelope in
                types.insert(envelope.stream.entityType)
                return true
            }
        }
        types.remove(ActivityEventCodec.entityType)
        if let type = query.types.first(where: types.contains) {
            throw ToolError(.badInput, "\"\(type)\" is an entity type of this store, not an activity type: the activity flags (--after, --before, --starting-in, --overlapping, --oldest-first, several --type) do not apply to it; query its entities with --type \(type) alone, or with --where FIELD=VALUE, --order, --as-of or --valid-at")
        }
        if !types.isEmpty {
            Output.warning("the store's other entity types (queried with --type TYPE alone or with --where): " + types.sorted().map { "\"\($0)\"" }.joined(separator: ", "))
        }
    }

    /// `--type TYPE` alone (no activity flag) naming an entity type of the store that no
    /// activity has: its entities, folded now (the question is about them, not an empty list of
    /// activities); `nil` otherwise. One scan of the log, whose fold the query reuses.
    private func entityTypeAlone(in repository: EventSourcedActivityRepository) throws -> [EntityReplay.Entity]? {
        guard query.types.count == 1, query.after == nil, query.before == nil, query.startingIn == nil,
              query.overlapping == nil, !query.oldestFirst else { return nil }
        let type = query.types[0]
        guard type != ActivityEventCodec.entityType else { return nil }
        let activities = try repository.projection.read { try $0.fetch(ActivityQuery(types: [ActivityType(rawValue: type)], limit: 1)) }
        guard activities.isEmpty else { return nil }
        let bounds = repository.store.log.bounds
        guard bounds.nextPosition > 0 else { return nil }
        switch try EntityReplay.foldIfPresent(repository.store, store: store, type: type, through: bounds.nextPosition - 1, label: "now") {
        case .folded(let entities): return entities
        case .absent: return nil
        }
    }

    private typealias Item = (entity: EntityReplay.Entity, state: JSONTree?)

    /// `--type TYPE --where …`: a generic type's entities by field.
    /// - Parameter folded: The type's entities now, already folded (`nil`: fold them here).
    private func runGeneric(_ repository: EventSourcedActivityRepository, folded: [EntityReplay.Entity]?) async throws {
        let type = query.types[0]
        let conditions = try self.conditions.map(GenericQuery.Condition.init)
        let events = repository.store
        let bounds = events.log.bounds
        // Recording time: the log's longest prefix recorded at or before --as-of.
        var through: LogPosition? = bounds.nextPosition == 0 ? nil : bounds.nextPosition - 1
        var label = "now"
        var asOfTime: LogTimestamp?
        if let asOf {
            let limit: LogTimestamp
            do { limit = try ISODate.parseRecordingTimeUpperBound(asOf) } catch { throw ToolError(.badInput, "--as-of: \(error)") }
            ReplayCommand.warnOutsideRecordedSpan(limit, text: asOf, bounds: bounds, ownDates: "For the entities' own dates use --valid-at DATE --date-field F")
            do { through = try events.lastPosition(recordedAtOrBefore: limit) } catch { throw ToolError.from(error, store: store.url) }
            label = "as recorded at or before \(asOf)"
            asOfTime = limit
        }
        let entities = try folded ?? EntityReplay.fold(events, store: store, type: type, through: through, label: label)
        // Each payload decoded once: every check below reads these states.
        let all: [Item] = entities.map { ($0, $0.payload.value) }
        let states = all.map(\.state)
        var items = all
        // An entity whose payload the tool cannot read might match: leaving it out would be a
        // wrong answer.
        let undecoded = entities.filter { if case .bytes = $0.payload { true } else { false } }
        if let opaque = undecoded.first, case .bytes(let reason, _) = opaque.payload {
            let count = undecoded.count
            throw ToolError(.badInput, "\(count) entit\(count == 1 ? "y" : "ies") of \(type) (first \(opaque.envelope.stream) at position \(opaque.envelope.position)) \(count == 1 ? "has a payload" : "have payloads") the tool cannot decode (\(reason)), so a query cannot tell whether \(count == 1 ? "it matches" : "they match")")
        }
        Output.note("plan: scan (\(Output.count(items.count)) entit\(items.count == 1 ? "y" : "ies") of \(type) folded from the log \(label))")
        var validAtMoment: ISODate.Moment?
        if let validAt, let dateField {
            let moment: ISODate.Moment
            do { moment = try ISODate.parseMoment(validAt) } catch { throw ToolError(.badInput, "--valid-at: \(error)") }
            validAtMoment = moment
            items = try Self.valid(items, at: moment, text: validAt, dateField: dateField, endField: endField, type: type)
        }
        items = try GenericQuery.filter(items, conditions, type: type, known: states)
        if let order { items = try Self.sorted(items, by: order, type: type, known: states) }
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
                ("asOf", .optional(asOfTime.map { ISODate.format($0) })), ("recorded", ReplayCommand.recordedSpan(bounds)),
                // A bare date is a day, not its midnight: the day as given and both its ends
                // (`validBefore` exclusive), so the answer ("true at some time of it") is read
                // right. An instant: `validAt` alone, the ends null.
                ("validAt", .optional(validAtMoment.map { $0.dayEnd == nil ? ISODate.format($0.start) : validAt ?? "" })),
                ("validFrom", .optional(validAtMoment.flatMap { $0.dayEnd == nil ? nil : ISODate.format($0.start) })),
                ("validBefore", .optional(validAtMoment.flatMap { $0.dayEnd.map(ISODate.format) })),
                ("dateField", .optional(dateField)), ("endField", .optional(endField)),
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

    /// The entities true at `moment` by their own dates (``ISODate/Moment/overlaps(from:until:)``:
    /// at an instant, or at some time of a bare date's day): `dateField` at or before it, and
    /// `endField` (when given) unset or after it. A date outside the dates the entities hold
    /// is noted with their span (a recording time asked of domain dates, often).
    /// - Throws: ``ToolError`` (exit 1): a field no entity has, or one that holds no dates.
    private static func valid(_ items: [Item], at moment: ISODate.Moment, text: String, dateField: String, endField: String?, type: String) throws -> [Item] {
        let startPath = GenericQuery.path(dateField)
        let endPath = endField.map(GenericQuery.path)
        try GenericQuery.requireField(startPath, flag: "--date-field \(dateField)", in: items.map(\.state), type: type)
        if let endPath, let endField { try GenericQuery.requireField(endPath, flag: "--end-field \(endField)", in: items.map(\.state), type: type) }
        func stored(_ item: Item, _ path: [String], _ flag: String) throws -> Date? {
            guard let stored = GenericQuery.value(item.state, path) else { return nil }
            switch GenericQuery.Typed(stored) {
            case .date(let d): return d
            case .null: return nil
            case let other:
                let why = if case .number = other { " (\(GenericQuery.Typed.jsonCodecDates))" } else { "" }
                throw ToolError(.badInput, "\(flag): \(path.joined(separator: ".")) of \(item.entity.envelope.stream) holds \(other.kind), not dates\(why)")
            }
        }
        var first: Date?, last: Date?
        var out: [Item] = []
        for item in items {
            let start = try stored(item, startPath, "--date-field")
            let end = try endPath.flatMap { try stored(item, $0, "--end-field") }
            for d in [start, end].compactMap({ $0 }) {
                first = min(first ?? d, d)
                last = max(last ?? d, d)
            }
            // No start: never known to be true.
            guard let start, moment.overlaps(from: start, until: end) else { continue }
            out.append(item)
        }
        if let first, let last, moment.order(of: first) == .orderedDescending || moment.order(of: last) == .orderedAscending {
            let fields = endField.map { "\(dateField) and \($0)" } ?? dateField
            Output.note("--valid-at \(text) is \(moment.order(of: first) == .orderedDescending ? "before" : "after") every date in \(fields) of \(type): they span \(ISODate.format(first)) to \(ISODate.format(last)) (for what the store knew at a recording time use --as-of)")
        }
        return out
    }

    /// The items ordered by `spec` (`FIELD` or `FIELD:desc`), nulls and absent values last,
    /// ties by id.
    /// - Throws: ``ToolError`` (exit 1): a field no entity has, or values of different kinds.
    private static func sorted(_ items: [Item], by spec: String, type: String, known: [JSONTree?]) throws -> [Item] {
        var field = spec
        var descending = false
        if spec.hasSuffix(":desc") { field = String(spec.dropLast(5)); descending = true }
        else if spec.hasSuffix(":asc") { field = String(spec.dropLast(4)) }
        let path = GenericQuery.path(field)
        try GenericQuery.requireField(path, flag: "--order \(spec)", in: known, type: type)
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
        if let mixed {
            let why = mixed.0 == mixed.1 ? "holds \(mixed.0), which have no order" : "holds \(mixed.0) in some entities and \(mixed.1) in others, which have no order together"
            throw ToolError(.badInput, "--order \(spec): \(field) \(why)")
        }
        return result.map(\.0)
    }
}
