import EventKernel
import EventLog
import Foundation

/// `history TYPE ID` for a stream of any entity type: every event, the entity's state after it
/// (its payload decoded as export decodes it: a generic repository's event holds the whole
/// entity, and a delete none) and what changed from the state before.
enum StreamHistory {
    /// One field-level difference between two decoded states.
    struct Change: Equatable {
        enum Kind: String { case added, removed, changed }
        /// Where: member names and `[index]`s from the entity (`tags[1]`, `owner.name`).
        var path: String
        var kind: Kind
        var from: JSONTree?
        var to: JSONTree?

        var json: JSONValue {
            var members: [(String, JSONValue)] = [("path", .string(path)), ("op", .string(kind.rawValue))]
            if let from { members.append(("from", .raw(from.text))) }
            if let to { members.append(("to", .raw(to.text))) }
            return .object(members)
        }

        var summary: String {
            let name = path.isEmpty ? "(entity)" : path
            switch kind {
            case .added: return "\(name): + \(to?.text ?? "")"
            case .removed: return "\(name): − \(from?.text ?? "")"
            case .changed: return "\(name): \(from?.text ?? "") → \(to?.text ?? "")"
            }
        }
    }

    /// The changes from `old` to `new` (`nil`: no state, before an add or after a delete),
    /// member by member and element by element; a typed value (`{"$date":…}`) is one value.
    static func diff(_ old: JSONTree?, _ new: JSONTree?, path: String = "") -> [Change] {
        let empty = JSONTree.object([])
        switch (old, new) {
        case (nil, nil): return []
        case (nil, .some(let n)) where isContainer(n): return diff(empty, n, path: path)
        case (.some(let o), nil) where isContainer(o): return diff(o, empty, path: path)
        case (nil, .some(let n)): return [Change(path: path, kind: .added, from: nil, to: n)]
        case (.some(let o), nil): return [Change(path: path, kind: .removed, from: o, to: nil)]
        case (.some(let o), .some(let n)):
            if case .object(let a) = o, case .object(let b) = n, !isTagged(o), !isTagged(n) {
                var out: [Change] = []
                for member in b {
                    let sub = join(path, member.key)
                    if let before = a.first(where: { $0.key == member.key }) {
                        out += diff(before.value, member.value, path: sub)
                    } else {
                        out.append(Change(path: sub, kind: .added, from: nil, to: member.value))
                    }
                }
                for member in a where !b.contains(where: { $0.key == member.key }) {
                    out.append(Change(path: join(path, member.key), kind: .removed, from: member.value, to: nil))
                }
                return out
            }
            if case .array(let a) = o, case .array(let b) = n {
                var out: [Change] = []
                for i in 0..<max(a.count, b.count) {
                    let sub = "\(path)[\(i)]"
                    if i < a.count && i < b.count { out += diff(a[i], b[i], path: sub) }
                    else if i < b.count { out.append(Change(path: sub, kind: .added, from: nil, to: b[i])) }
                    else { out.append(Change(path: sub, kind: .removed, from: a[i], to: nil)) }
                }
                return out
            }
            return o == n ? [] : [Change(path: path, kind: .changed, from: o, to: n)]
        }
    }

    private static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : path + "." + key }

    private static func isTagged(_ value: JSONTree) -> Bool {
        guard case .object(let members) = value else { return false }
        return members.count == 1 && members[0].key.hasPrefix("$")
    }

    private static func isContainer(_ value: JSONTree) -> Bool {
        switch value {
        case .object: !isTagged(value)
        default: false
        }
    }

    /// Why a field event's state is not folded: the one explanation history and replay give.
    static let fieldEventUnknown = "a field event's payload holds the value it sets, not which property (the application's schema registers that), so the tool cannot fold it"

    /// One event of a stream's history, as history and the viewer show it.
    struct Entry {
        var envelope: EventEnvelope
        var payload: EntityJSON.Payload
        /// The entity's state the event holds (a generic repository's add or update), or `nil`.
        var state: JSONTree?
        /// The payload's data when it is not a state (a field event's, an application's event).
        var data: JSONTree?
        /// The field event's name, when the event is one.
        var fieldEvent: Substring?
        /// Whether the event is a generic repository's own (add, update, delete).
        var repositoryEvent: Bool
        /// What changed from the last state known (empty when `note` says it is not known).
        var changes: [Change]
        /// Why no changes are given (a payload not decoded, a field event, not a repository's event).
        var note: String?
        /// When the state before this event was unknown: the version of the last state known,
        /// which `changes` are from.
        var since: UInt64?
        /// The last state known after this event and the version it is of (0: the stream's start).
        var knownAfter: (state: JSONTree?, version: UInt64)
        /// Whether the state after this event is unknown (an event the tool cannot fold).
        var unknownAfter: Bool
    }

    /// The entries of a stream's `events` (oldest first, all of one stream of `type`), and whether
    /// the type is the application's own (its events are then data, never states).
    static func entries(_ events: [EventEnvelope], type: String) -> (entries: [Entry], ownEvents: Bool) {
        // The last state known (`nil`: none, before the add or after a delete) and the version
        // it is of (0: the stream's start). An event that changes the entity in a way the
        // tool cannot fold (a field event, an application's own event, an undecoded payload)
        // leaves it as it was: the next state is diffed against it, and says since when.
        var known: (state: JSONTree?, version: UInt64) = (nil, 0)
        var unknownSince = false
        // Whether the type is a generic repository's: then its other events are field events.
        // (Shown by an add or update holding an entity: names alone, `Person.deleted`, are not.)
        // An event that is neither a repository's nor a field event (an application's own
        // `Person.created {"name":"C"}`: JSON is never a field event's payload) shows the type is
        // the application's: its `Person.updated` is then its own partial data, not a state.
        let ownEvents = events.contains { !EntityJSON.isRepositoryEvent($0) && EntityJSON.fieldEventName($0.eventType, of: type, payload: $0.payload) == nil }
        let repositoryType = !ownEvents && events.contains { EntityJSON.showsRepositoryType($0.eventType, of: type, payload: $0.payload) }
        var out: [Entry] = []
        out.reserveCapacity(events.count)
        for envelope in events {
            let payload = EntityJSON.payload(envelope.payload)
            // Only a generic repository's event holds the entity's state: any other event's
            // payload is data (a rename holds the new name, not the entity), never diffed.
            let repositoryEvent = !ownEvents && EntityJSON.isRepositoryEvent(envelope)
            let fieldEvent = repositoryType ? EntityJSON.fieldEventName(envelope.eventType, of: type, payload: envelope.payload) : nil
            let state = repositoryEvent ? payload.value : nil
            let data = repositoryEvent ? nil : payload.value
            var changes: [Change] = []
            var note: String?
            var since: UInt64?
            if case .bytes(let reason, _) = payload {
                note = "(payload not decoded: \(reason))"
            } else if let fieldEvent {
                note = "(field event \"\(fieldEvent)\": data \(data?.text ?? "null"); \(Self.fieldEventUnknown) — state unknown after it)"
            } else if !repositoryEvent {
                note = "(not a generic repository's event: data \(data?.text ?? "null"), no state)"
            } else {
                changes = diff(known.state, state)
                if unknownSince { since = known.version }
            }
            if note == nil {
                known = (state, envelope.entityVersion)
                unknownSince = false
            } else {
                unknownSince = true
            }
            out.append(Entry(envelope: envelope, payload: payload, state: state, data: data, fieldEvent: fieldEvent,
                             repositoryEvent: repositoryEvent, changes: changes, note: note, since: since,
                             knownAfter: known, unknownAfter: unknownSince))
        }
        return (out, ownEvents)
    }

    static let columns: [Column] = [
        Column("position", right: true), Column("recordedAt", header: "recorded at"), Column("version", right: true),
        Column("event"), Column("schemaVersion", inTable: false), Column("codec", inTable: false),
        Column("state", inTable: false), Column("data", inTable: false),
        // CSV has what JSON has (the changes as their JSON array); the table a summary of them.
        Column("changes", inTable: false), Column("summary", header: "changes", inMachineFormats: false, tableNull: ""),
    ]

    /// Prints the history of the stream `type`/`id`.
    /// - Throws: ``ToolError``: exit 1 for a type or an id with no event (naming what there is),
    ///   what opening and reading the store throw.
    /// - Parameter idType: Which of a UUID stream and a string stream of the text `id` (`nil`:
    ///   the UUID one when both exist, with a note).
    static func print<Layout>(store: ReadableStoreArguments<Layout>, type: String, id: String, idType: StreamsCommand.IDType? = nil, format: OutputFormat) async throws {
        // The id as typed, and as a UUID when it reads as one: a stream has one of the two.
        var candidates: [EntityID] = UUID(uuidString: id).map { [.uuid($0), .string(id)] } ?? [.string(id)]
        if let idType {
            candidates.removeAll { StreamsCommand.IDType($0) != idType }
            guard !candidates.isEmpty else { throw ToolError(.badInput, "\"\(id)\" is not a UUID (--id-type uuid)") }
        }
        let repository = try await StoreLocation.openReadOnly(store)
        var events: [EventEnvelope] = []
        var typeSeen = false
        var types: Set<String> = []
        // Up to a damaged batch (LogDamage.swift): what is in it and after it is not known.
        let damage = try LogDamage.forEachIntactEnvelope(repository.store, store: store.url) { envelope in
            types.insert(envelope.stream.entityType)
            guard envelope.stream.entityType == type else { return true }
            typeSeen = true
            if candidates.contains(envelope.entityID) { events.append(envelope) }
            return true
        }
        guard typeSeen else {
            if let damage { throw LogDamage.error(damage, "no event of entity type \"\(type)\" is before the damaged batch, and its events may be in it or after it", store: store.url) }
            throw StreamsCommand.unknownType(type, types: types, store: store.name)
        }
        // A UUID-shaped id names the UUID stream when both exist; the string one otherwise.
        if let first = candidates.first(where: { c in events.contains { $0.entityID == c } }) {
            if events.contains(where: { $0.entityID != first }) {
                Output.note("\(type) has both a UUID stream and a string stream \"\(id)\": this is the UUID one; --id-type string gives the other")
            }
            events.removeAll { $0.entityID != first }
        }
        guard let stream = events.first?.stream else {
            if let damage { throw LogDamage.error(damage, "the stream \(type)/\(id) has no event before the damaged batch, and its events may be in it or after it", store: store.url) }
            throw ToolError(.badInput, "no stream \(type)/\(id) in \(store.name) (`eventkernel streams \(store.name) \(type)` lists them)")
        }
        if let damage { LogDamage.warnPartial("the history of \(stream)", missing: "the stream may have later events there", damage) }
        let (entries, ownEvents) = Self.entries(events, type: type)
        var listing = Listing(columns: columns)
        var opaque = OpaquePayloads()
        for entry in entries {
            let envelope = entry.envelope, payload = entry.payload, state = entry.state, data = entry.data
            if case .bytes(let reason, let damaged) = payload { opaque.note(envelope, reason: reason, damaged: damaged) }
            let described = entry.changes.isEmpty ? "(no change)" : entry.changes.map(\.summary).joined(separator: "; ")
            let summary = entry.note ?? (entry.since.map { "since version \($0), the last state known: \(described)" } ?? described)
            var object: [(String, JSONValue)] = [
                ("position", .uint(envelope.position)), ("recordedAt", .string(ISODate.format(envelope.timestamp))),
                ("version", .uint(envelope.entityVersion)), ("event", .string(envelope.eventType)),
                ("schemaVersion", .int(Int64(envelope.schemaVersion))), ("codec", .string(payload.codec)),
                ("state", state.map { .raw($0.text) } ?? .null), ("data", data.map { .raw($0.text) } ?? .null),
            ]
            var changesCell: JSONValue = .null
            if case .bytes(let reason, _) = payload {
                object += [("base64", .string(Data(envelope.payload).base64EncodedString())), ("reason", .string(reason)), ("changes", .null)]
            } else if entry.fieldEvent != nil {
                object += [("reason", .string(Self.fieldEventUnknown)), ("changes", .null)]
            } else if !entry.repositoryEvent {
                object.append(("changes", .null))
            } else {
                let changes = JSONValue.array(entry.changes.map(\.json))
                object.append(("changes", changes))
                changesCell = .raw(changes.text)
                if let since = entry.since { object.append(("changesSince", .uint(since))) }
            }
            listing.rows.append(Listing.Row([
                .uint(envelope.position), .string(ISODate.format(envelope.timestamp)), .uint(envelope.entityVersion),
                .string(envelope.eventType), .int(Int64(envelope.schemaVersion)), .string(payload.codec),
                state.map { .raw($0.text) } ?? .null, data.map { .raw($0.text) } ?? .null,
                changesCell, .string(summary),
            ], object: .object(object)))
        }
        let unknownSince = entries.last?.unknownAfter ?? false
        let known: (state: JSONTree?, version: UInt64) = entries.last?.knownAfter ?? (nil, 0)
        if format == .table { Swift.print("History of \(stream)") }
        Output.print(listing, as: format)
        if format == .table, let last = events.last {
            if !unknownSince, !ownEvents, EntityJSON.isRepositoryEvent(last), let state = EntityJSON.payload(last.payload).value {
                Swift.print("State after version \(last.entityVersion): \(state.text)")
            } else if unknownSince, known.version > 0 {
                Swift.print("State after version \(last.entityVersion): unknown (see above); the last state known is version \(known.version)'s")
            }
        }
        opaque.report()
    }
}
