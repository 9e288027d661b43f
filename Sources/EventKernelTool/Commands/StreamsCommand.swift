import ArgumentParser
import EventKernel
import EventLog
import Foundation

struct StreamsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "streams", abstract: "The store's entity types with their counts, or the streams of one type (read-only).",
        usage: "eventkernel streams [STORE] [TYPE] [--dir D | --postgres URL] [--limit N] [--after ID [--id-type uuid|string]] [--format F] [--json]",
        discussion: """
            Without TYPE: every entity type (activities too) with its events, streams and recorded span. With \
            TYPE: that type's streams in id order (text order of the id), with each one's version, events, \
            last event and its time, a page at a time: --limit rows after --after ID; when more follow, \
            stderr says the --after that continues. A single argument is the store, unless --dir or \
            --postgres gives it (then it is the type). Reads the whole log (O(events)).

            Examples:
              eventkernel streams demo
              eventkernel streams demo activity --limit 50
              eventkernel streams demo activity --after 00000000-0000-4000-8000-000000000001 --json
            """)

    /// `streams [STORE] [TYPE]`: the type is an optional operand (StoreLocation.swift).
    enum Operand: StoreOperandLayout {
        static var operandName: String? { "TYPE" }
        static var operandHelp: String { "An entity type (as `streams` lists them): list its streams." }
        static var operandIsOptional: Bool { true }
    }

    @OptionGroup var store: ReadableStoreArguments<Operand>
    @Option(help: "At most N streams of the type (default 100).") var limit = 100
    @Option(help: ArgumentHelp("Only the streams whose id comes after ID (text order): the next page.", valueName: "ID"))
    var after: String?
    @Option(help: ArgumentHelp("With --after: the id type of the stream to continue after, when a UUID stream and a string stream have the same text (as the next-page note says); default uuid, after both.", valueName: "uuid|string"))
    var idType: IDType?
    @OptionGroup var output: OutputOptions

    /// A stream id's kind: a UUID stream and a string stream can have the same text.
    enum IDType: String, ExpressibleByArgument, CaseIterable, Comparable {
        case string, uuid
        static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
        init(_ id: EntityID) { if case .uuid = id { self = .uuid } else { self = .string } }
    }

    /// The order streams are listed and paged in: their id's text, then its kind (string
    /// before uuid), so that two streams with the same text each have their place.
    static func pageKey(_ id: EntityID) -> (String, IDType) { (id.description, IDType(id)) }

    func validate() throws {
        guard limit > 0 else { throw ValidationError("--limit must be positive") }
        if after != nil && store.operand == nil { throw ValidationError("--after pages the streams of a type: give the TYPE") }
        if idType != nil && after == nil { throw ValidationError("--id-type says which stream --after names: give --after") }
    }

    struct TypeCount {
        var events: UInt64 = 0
        var streams: Set<EntityID> = []
        var first: LogTimestamp?
        var last: LogTimestamp?
    }

    struct StreamInfo {
        var id: EntityID
        var version: UInt64 = 0
        var events: UInt64 = 0
        var lastEvent = ""
        var last: LogTimestamp?
    }

    func run() async throws {
        let repository = try await StoreLocation.openReadOnly(store)
        let format = output.resolved
        if let type = store.operand {
            var streams: [EntityID: StreamInfo] = [:]
            var types: Set<String> = []
            // Up to a damaged batch (LogDamage.swift): the streams as the events before it have them.
            let damage = try LogDamage.forEachIntactEnvelope(repository.store, store: store.url) { envelope in
                types.insert(envelope.stream.entityType)
                guard envelope.stream.entityType == type else { return true }
                streams[envelope.entityID, default: StreamInfo(id: envelope.entityID)].record(envelope)
                return true
            }
            guard !streams.isEmpty else {
                if let damage { throw LogDamage.error(damage, "no event of entity type \"\(type)\" is before the damaged batch, and its events may be in it or after it", store: store.url) }
                throw Self.unknownType(type, types: types, store: store.name)
            }
            if let damage { LogDamage.warnPartial("the streams of \(type)", missing: "more streams, and later events of these, may be there", damage) }
            // A UUID is listed upper case: --after of a UUID stream in lower case names the same place.
            let cursor = after.map { text in
                (idType == .uuid ? UUID(uuidString: text)?.uuidString ?? text : text, idType ?? .uuid)
            }
            // The page and the stream after it: the limit + 1 first after the cursor, kept in order
            // as they are found (never every stream copied and sorted to print a page).
            var following = 0
            var first: [(key: (String, IDType), info: StreamInfo)] = []
            for info in streams.values {
                let key = Self.pageKey(info.id)
                if let cursor, !(key > cursor) { continue }
                following += 1
                if first.count > limit, let last = first.last, !(key < last.key) { continue }
                var low = 0, high = first.count
                while low < high {
                    let middle = (low + high) / 2
                    if first[middle].key < key { low = middle + 1 } else { high = middle }
                }
                first.insert((key, info), at: low)
                if first.count > limit + 1 { first.removeLast() }
            }
            let page = first.prefix(limit).map(\.info)
            var listing = Listing(columns: [
                Column("id"), Column("idType", header: "id type", inTable: false), Column("version", right: true),
                Column("events", right: true), Column("lastEvent", header: "last event"), Column("lastRecordedAt", header: "last recorded at"),
            ])
            listing.rows = page.map { s in
                Listing.Row([.string(s.id.description), .string(Self.idType(s.id)), .uint(s.version), .uint(s.events),
                             .string(s.lastEvent), .optional(s.last.map(ISODate.format))])
            }
            if format == .table { print("Streams of \(type): \(Output.count(streams.count)) in all\(after.map { ", after \($0)" } ?? "")") }
            Output.print(listing, as: format)
            if following > page.count, let last = page.last {
                // The type only when the next stream has the same text (a UUID and a string stream).
                let next = first[page.count].info.id
                let kind = next.description == last.id.description ? " --id-type \(IDType(last.id).rawValue)" : ""
                Output.note("\(Output.count(following - page.count)) more; the next page: --after \(last.id.description)\(kind)")
            }
            return
        }
        var counts: [String: TypeCount] = [:]
        // Up to a damaged batch (LogDamage.swift): the types as the events before it have them.
        let damage = try LogDamage.forEachIntactEnvelope(repository.store, store: store.url) { envelope in
            counts[envelope.stream.entityType, default: TypeCount()].record(envelope)
            return true
        }
        if let damage {
            // "Holds no events" would be a wrong answer.
            if counts.isEmpty { throw LogDamage.error(damage, "no event is before the damaged batch", store: store.url) }
            LogDamage.warnPartial("the entity types and their counts", missing: "more types and events may be there", damage)
        }
        var listing = Listing(columns: [
            Column("type"), Column("events", right: true), Column("streams", right: true),
            Column("firstRecordedAt", header: "first recorded at"), Column("lastRecordedAt", header: "last recorded at"),
        ])
        listing.rows = counts.keys.sorted().map { type in
            let c = counts[type]!
            return Listing.Row([.string(type), .uint(c.events), .int(Int64(c.streams.count)),
                                .optional(c.first.map(ISODate.format)), .optional(c.last.map(ISODate.format))])
        }
        if format == .table && counts.isEmpty { print("\(store.name) holds no events") }
        Output.print(listing, as: format)
    }

    static func idType(_ id: EntityID) -> String {
        if case .uuid = id { return "uuid" }
        return "string"
    }

    /// A type with no event: exit 1, naming the types there are.
    static func unknownType(_ type: String, types: Set<String>, store: String) -> ToolError {
        let known = types.isEmpty ? "it holds no events" : "its entity types: \(types.sorted().joined(separator: ", "))"
        return ToolError(.badInput, "no events of entity type \"\(type)\" in \(store); \(known)")
    }
}

extension StreamsCommand.TypeCount {
    mutating func record(_ envelope: EventEnvelope) {
        events += 1
        streams.insert(envelope.entityID)
        if first == nil { first = envelope.timestamp }
        last = envelope.timestamp
    }
}

extension StreamsCommand.StreamInfo {
    mutating func record(_ envelope: EventEnvelope) {
        version = envelope.entityVersion
        events += 1
        lastEvent = envelope.eventType
        last = envelope.timestamp
    }
}
