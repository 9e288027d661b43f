import EventKernel
import EventLog
import Foundation

/// `replay --entity TYPE`: the entities of a generic repository's type as the log stood at a
/// position, folded without the application's code. A generic repository's `TYPE.added` and
/// `TYPE.updated` events hold the whole entity and `TYPE.deleted` removes it, so an entity's
/// state then is its last such event's payload, decoded as export decodes it. A field event
/// (`TYPE.NAME`) sets one property the payload does not name: an entity whose last event at the
/// moment is one has no known state, and the command refuses (exit 1) rather than guess; one
/// updated since is folded. Any other event of the type is not such a state: refused too.
enum EntityReplay {
    /// An entity's last event; its payload is decoded only for the row printed (decoding every
    /// add and update of the log, to keep only the last per entity, cost time and memory).
    struct Entity {
        var envelope: EventEnvelope
        var payload: EntityJSON.Payload { EntityJSON.payload(envelope.payload) }
    }

    /// The entities of `type` through `through` (`nil`: before the first event), by id: the
    /// one fold `replay --entity` and `query --where` share.
    /// - Parameter label: The moment in words (`through position 5`), for messages.
    /// - Throws: ``ToolError``: exit 1 for a type with no event, one whose events are not a
    ///   generic repository's, or an entity whose state then a field event leaves unknown; what
    ///   reading the log throws.
    static func fold<Layout>(
        _ events: EventStore, store: ReadableStoreArguments<Layout>, type: String, through: LogPosition?, label: String
    ) throws -> [Entity] {
        switch try foldIfPresent(events, store: store, type: type, through: through, label: label) {
        case .folded(let entities): return entities
        case .absent(let types): throw StreamsCommand.unknownType(type, types: types, store: store.name)
        }
    }

    /// ``fold(_:store:type:through:label:)``'s answer, or the store's types when `type` has no
    /// event (a caller that then asks another question, `query --type T` of activities, scans
    /// the log once, not twice).
    enum Folded {
        case folded([Entity])
        case absent(types: Set<String>)
    }

    /// ``fold(_:store:type:through:label:)``, with a type that has no event an answer, not an error.
    /// - Throws: What ``fold(_:store:type:through:label:)`` throws, but for an unknown type.
    static func foldIfPresent<Layout>(
        _ events: EventStore, store: ReadableStoreArguments<Layout>, type: String, through: LogPosition?, label: String
    ) throws -> Folded {
        var entities: [EntityID: Entity] = [:]
        var types: Set<String> = []
        var typeSeen = false
        var repositoryType = false
        // The first event of the type that is not a repository's, and the first that is not a
        // field event either (a field event's name is known only once the type is).
        var foreign: EventEnvelope?
        var notField: EventEnvelope?
        // The entities whose last event through the moment is a field event: their state then
        // is not known without the application's schema.
        var unfolded: [EntityID: EventEnvelope] = [:]
        try withToolErrorsSync(store: store.url) {
            try events.forEachEnvelope(from: 0, through: nil) { envelope in
                types.insert(envelope.stream.entityType)
                guard envelope.stream.entityType == type else { return true }
                typeSeen = true
                // The whole log is checked, so that the answer does not depend on the moment.
                guard EntityJSON.isRepositoryEvent(envelope) else {
                    if foreign == nil { foreign = envelope }
                    if notField == nil, EntityJSON.fieldEventName(envelope.eventType, of: type, payload: envelope.payload) == nil { notField = envelope }
                    if let through, envelope.position <= through { unfolded[envelope.entityID] = envelope }
                    return true
                }
                // Shown by an add or update holding an entity, not by a name (`Person.deleted`).
                if !repositoryType { repositoryType = EntityJSON.showsRepositoryType(envelope.eventType, of: type, payload: envelope.payload) }
                guard let through, envelope.position <= through else { return true }
                unfolded[envelope.entityID] = nil
                if EntityJSON.isDeletion(envelope.eventType) {
                    entities[envelope.entityID] = nil
                } else {
                    entities[envelope.entityID] = Entity(envelope: envelope)
                }
                return true
            }
        }
        guard typeSeen else { return .absent(types: types) }
        if let foreign = repositoryType ? notField : foreign {
            // `Person.created` has a field event's name: say why it is none.
            let json = EntityJSON.fieldEventName(foreign.eventType, of: type, payload: []) != nil
                && EntityJSON.fieldEventName(foreign.eventType, of: type, payload: foreign.payload) == nil ? ", whose payload is JSON, which a field event's never is" : ""
            throw ToolError(.badInput, "\(type)'s events are not a generic repository's (\(foreign.eventType) at position \(foreign.position)\(json); expected \(type).added, .updated or .deleted, or a field event \(type).NAME): replay and query fold only those without the application's code")
        }
        if let first = unfolded.values.min(by: { $0.position < $1.position }) {
            let others = unfolded.count > 1 ? " (and \(unfolded.count - 1) other entit\(unfolded.count == 2 ? "y" : "ies") of \(type))" : ""
            let base = entities[first.entityID].map { "version \($0.envelope.entityVersion) (position \($0.envelope.position))" } ?? "none"
            throw ToolError(.badInput, "\(first.stream)\(others): its last event \(label) is the field event \(first.eventType) at position \(first.position), and \(StreamHistory.fieldEventUnknown), so its state then is not known; its last whole state is \(base) (`eventkernel history \(store.name) \(type) \(first.entityID)` shows both). A moment after its next \(type).updated has every state")
        }
        return .folded(entities.values.sorted { $0.envelope.entityID.description < $1.envelope.entityID.description })
    }

    /// Prints the state of `type` through `through` (`nil`: before the first event).
    /// - Throws: What ``fold(_:store:type:through:label:)`` throws.
    static func print<Layout>(
        _ events: EventStore, store: ReadableStoreArguments<Layout>, type: String, through: LogPosition?, label: String,
        asOf: LogTimestamp?, position: Int64?, format: OutputFormat
    ) throws {
        let rows = try fold(events, store: store, type: type, through: through, label: label)
        var opaque = OpaquePayloads()
        let listing = self.listing(rows, opaque: &opaque)
        switch format {
        case .jsonl, .csv:
            Output.print(listing, as: format)
        case .json:
            let object: JSONValue = .object([
                ("asOf", .optional(asOf.map { ISODate.format($0) })), ("position", position.map { .int($0) } ?? .null),
                ("recorded", ReplayCommand.recordedSpan(events.log.bounds)), ("entityType", .string(type)),
                ("entities", .int(Int64(rows.count))), ("rows", .array(listing.rows.map(listing.object))),
            ])
            Swift.print(object.text)
        case .table:
            Swift.print("\(type) \(label): \(Output.count(rows.count)) entit\(rows.count == 1 ? "y" : "ies")")
            if !rows.isEmpty { Output.print(listing, as: .table) }
        }
        opaque.report()
    }

    /// The rows of entities: id, its type, version, recording time and state (an undecoded
    /// payload as base64 with the reason, noted in `opaque`).
    static func listing(_ rows: [Entity], opaque: inout OpaquePayloads) -> Listing {
        var listing = Listing(columns: [
            Column("id"), Column("idType", inTable: false), Column("version", right: true),
            Column("recordedAt", header: "recorded at"), Column("state"),
        ])
        for entity in rows {
            let e = entity.envelope
            let payload = entity.payload
            var object: [(String, JSONValue)] = [
                ("id", .string(e.entityID.description)), ("idType", .string(StreamsCommand.idType(e.entityID))),
                ("version", .uint(e.entityVersion)), ("recordedAt", .string(ISODate.format(e.timestamp))),
                ("state", payload.value.map { .raw($0.text) } ?? .null),
            ]
            var stateCell: JSONValue = payload.value.map { .raw($0.text) } ?? .null
            if case .bytes(let reason, let damaged) = payload {
                opaque.note(e, reason: reason, damaged: damaged)
                object += [("base64", .string(Data(e.payload).base64EncodedString())), ("reason", .string(reason))]
                stateCell = .string("(not decoded: \(reason))")
            }
            listing.rows.append(Listing.Row([
                .string(e.entityID.description), .string(StreamsCommand.idType(e.entityID)), .uint(e.entityVersion),
                .string(ISODate.format(e.timestamp)), stateCell,
            ], object: .object(object)))
        }
        return listing
    }
}
