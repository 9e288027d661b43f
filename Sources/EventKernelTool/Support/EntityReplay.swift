import EventKernel
import EventLog
import Foundation

/// `replay --entity TYPE`: the entities of a generic repository's type as the log stood at a
/// position, folded without the application's code. A generic repository's `TYPE.added` and
/// `TYPE.updated` events hold the whole entity and `TYPE.deleted` removes it, so an entity's
/// state then is its last such event's payload, decoded as export decodes it. Any other event
/// of the type is not such a state: the command refuses (exit 1) rather than guess.
enum EntityReplay {
    /// An entity's last event; its payload is decoded only for the row printed (decoding every
    /// add and update of the log, to keep only the last per entity, cost time and memory).
    struct Entity {
        var envelope: EventEnvelope
        var payload: EntityJSON.Payload { EntityJSON.payload(envelope.payload) }
    }

    /// Prints the state of `type` through `through` (`nil`: before the first event).
    /// - Throws: ``ToolError``: exit 1 for a type with no event or one whose events are not a
    ///   generic repository's; what reading the log throws.
    static func print<Layout>(
        _ events: EventStore, store: ReadableStoreArguments<Layout>, type: String, through: LogPosition?, label: String,
        asOf: LogTimestamp?, position: Int64?, format: OutputFormat
    ) throws {
        var entities: [EntityID: Entity] = [:]
        var types: Set<String> = []
        var typeSeen = false
        var foreign: EventEnvelope?
        try withToolErrorsSync(store: store.url) {
            try events.forEachEnvelope(from: 0, through: nil) { envelope in
                types.insert(envelope.stream.entityType)
                guard envelope.stream.entityType == type else { return true }
                typeSeen = true
                // The whole log is checked, so that the answer does not depend on the moment.
                guard EntityJSON.isRepositoryEvent(envelope) else {
                    foreign = envelope
                    return false
                }
                guard let through, envelope.position <= through else { return true }
                if envelope.eventType.hasSuffix(".deleted") {
                    entities[envelope.entityID] = nil
                } else {
                    entities[envelope.entityID] = Entity(envelope: envelope)
                }
                return true
            }
        }
        guard typeSeen else { throw StreamsCommand.unknownType(type, types: types, store: store.name) }
        if let foreign {
            throw ToolError(.badInput, "\(type)'s events are not a generic repository's (\(foreign.eventType) at position \(foreign.position); expected \(type).added, .updated or .deleted): replay folds only those without the application's code")
        }
        var opaque = OpaquePayloads()
        let rows = entities.values.sorted { $0.envelope.entityID.description < $1.envelope.entityID.description }
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
}
