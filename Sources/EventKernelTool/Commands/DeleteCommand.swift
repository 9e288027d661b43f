import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation

/// `eventkernel delete` and `eventkernel purge`: the kernel's tombstones (`$deleted`, `$purged`),
/// written through `EventStore.delete(streams:metadata:)` and `purge(streams:metadata:)`, the
/// store's one path for them, without the domain's code.
struct DeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Soft-delete activities, or entities of any type (--type): a $deleted event each; adding the id again continues its stream.",
        usage: "eventkernel delete [STORE] [ID ...] [--dir D] [--ids FILE] [--type TYPE] [--id-type uuid|string] [--actor A] [--correlation-id C] [--json]",
        discussion: StreamDeletionArguments.discussion(command: "delete", tombstone: .deleted))

    @OptionGroup var arguments: StreamDeletionArguments

    func run() async throws {
        try await arguments.run(.deleted)
    }
}

struct PurgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Purge activities, or entities of any type (--type): a $purged event each; the id can never be used again, and `eventkernel compact` removes its history (needs --yes).",
        usage: "eventkernel purge [STORE] [ID ...] --yes [--dir D] [--ids FILE] [--type TYPE] [--id-type uuid|string] [--actor A] [--correlation-id C] [--json]",
        discussion: StreamDeletionArguments.discussion(command: "purge", tombstone: .purged))

    @OptionGroup var arguments: StreamDeletionArguments
    @Flag(help: "Confirm the purge: the next compaction (`eventkernel compact`) removes the purged streams' history for good; until then it stays on disk.")
    var yes = false

    func validate() throws {
        guard yes else {
            throw ValidationError("purge destroys history at the next compaction and the ids can never be added again: add --yes to confirm (or use `eventkernel delete`, which can be undone by adding the id again)")
        }
    }

    func run() async throws {
        try await arguments.run(.purged)
    }
}

/// What `delete` and `purge` share: where the store is, which ids, and the report.
struct StreamDeletionArguments: ParsableArguments {
    @Argument(help: ArgumentHelp("The store directory (unless --dir gives it), then the ids.", valueName: "STORE | ID"))
    var positional: [String] = []
    @Option(name: .customLong("dir"), help: ArgumentHelp(
        "The store directory (default: $EVENTKERNEL_STORE, else ./eventkernel-store); every argument is then an id.", valueName: "D"))
    var dirOption: String?
    @Option(name: .customLong("ids"), help: ArgumentHelp("A file with one id per line (blank lines skipped); - for standard input.", valueName: "FILE"))
    var idsFile: String?
    @Option(help: ArgumentHelp("The entity type of the ids (default: activities, whose ids are UUIDs).", valueName: "TYPE"))
    var type: String?
    @Option(help: ArgumentHelp("With --type: the kind of the ids, when the type has both a UUID stream and a string stream of that text.", valueName: "uuid|string"))
    var idType: StreamsCommand.IDType?
    @Option(help: ArgumentHelp("Recorded as the tombstones' actor (who deleted). Note: import refuses events with metadata.", valueName: "A"))
    var actor: String?
    @Option(help: ArgumentHelp("Recorded as the tombstones' correlation id.", valueName: "C"))
    var correlationID: String?
    @Flag(help: "Print the report as JSON.")
    var json = false

    /// Ids per atomic batch (one command, one log batch).
    static let batchSize = 10_000

    static func discussion(command: String, tombstone: Tombstone) -> String {
        let what = tombstone == .deleted
            ? "The entity leaves queries at once; its events stay, and adding the id again continues its stream. An id with no live entity is reported unknown."
            : "The entity leaves queries at once and its stream is marked for good: adding the id again fails, after a restart and a full replay too; the next compaction removes its events (`eventkernel compact`, once the purge's segment is sealed: until then they stay on disk). A soft-deleted id is purged all the same; an id with no event is reported unknown; one purged already, as such."
        let yes = tombstone == .purged ? " --yes" : ""
        return """
            \(what)
            The store is the first argument, or --dir D (then every argument is an id). Ids come as arguments and/or --ids FILE \
            (one per line, - for standard input); activities by their UUID, other entity types with --type TYPE. Written in \
            atomic batches of \(Output.count(batchSize)) ids, each tombstone with --actor and --correlation-id when given. \
            Exit status: 0 when every id was found (\(command)d or already purged), 1 when any id was unknown (the others \
            are written and the unknown ones listed), or for an id that is not valid (nothing written).

            Examples:
              eventkernel \(command) demo 00000000-0000-4000-8000-000000000001\(yes)
              eventkernel \(command) --dir demo --ids ids.txt\(yes) --json
              cut -f1 stale.tsv | eventkernel \(command) demo --type Note --ids -\(yes)
            """
    }

    /// The store directory: `--dir`, else the first argument, else the default.
    var storeURL: URL {
        if let dirOption { return URL(filePath: dirOption, directoryHint: .isDirectory).standardizedFileURL }
        if let first = positional.first { return URL(filePath: first, directoryHint: .isDirectory).standardizedFileURL }
        return EventStore.defaultDirectory
    }

    /// The ids given as arguments.
    var argumentIDs: ArraySlice<String> { dirOption != nil ? positional[...] : positional.dropFirst() }

    func validate() throws {
        if argumentIDs.isEmpty && idsFile == nil {
            let first = dirOption == nil ? positional.first.map { " (the first argument, '\($0)', is the store)" } ?? "" : ""
            throw ValidationError("no ids given\(first): give them after the store, or in --ids FILE")
        }
        if idType != nil && type == nil { throw ValidationError("--id-type is for --type TYPE; an activity's id is a UUID") }
        if let type, type.isEmpty { throw ValidationError("--type is empty") }
    }

    /// One id as given, and where (for messages).
    struct GivenID {
        var text: String
        var source: String
    }

    /// Every id, in order, without repeats (an id given twice is one id).
    func givenIDs() throws -> [GivenID] {
        var ids = argumentIDs.enumerated().map { GivenID(text: $0.element, source: "argument \($0.offset + 1)") }
        if let idsFile {
            let data: Data
            do {
                data = idsFile == "-" ? FileHandle.standardInput.readDataToEndOfFile() : try Data(contentsOf: URL(filePath: idsFile))
            } catch {
                throw ToolError(.badInput, "cannot read --ids \(idsFile): \(error.localizedDescription)")
            }
            guard let text = String(data: data, encoding: .utf8) else {
                throw ToolError(.badInput, "--ids \(idsFile == "-" ? "<stdin>" : idsFile) is not UTF-8 text")
            }
            let name = idsFile == "-" ? "<stdin>" : idsFile
            // By Character: "\r\n" is one (a file from Windows), so it ends a line too.
            for (number, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
                let id = line.trimmingCharacters(in: .whitespaces)
                if !id.isEmpty { ids.append(GivenID(text: id, source: "\(name):\(number + 1)")) }
            }
        }
        guard !ids.isEmpty else { throw ToolError(.badInput, "no ids given: --ids \(idsFile ?? "") holds none") }
        var seen: Set<String> = []
        return ids.filter { seen.insert($0.text).inserted }
    }

    /// What happened to one id.
    struct Outcome {
        var id: String
        var stream: StreamID?
        var deletion: StreamDeletion
    }

    func run(_ tombstone: Tombstone) async throws {
        let given = try givenIDs()
        let entityType = type ?? ActivityEventCodec.entityType
        // Every activity id must be a UUID: checked before the store is opened or anything written.
        if type == nil || type == ActivityEventCodec.entityType {
            if let bad = given.first(where: { UUID(uuidString: $0.text) == nil }) {
                throw ToolError(.badInput, "\"\(bad.text)\" (\(bad.source)) is not a UUID: an activity's id is one (other entity types: --type TYPE); nothing was written")
            }
        }
        let directory = storeURL
        let repository = try StoreLocation.openWriter(directory, command: tombstone == .deleted ? "delete" : "purge", create: false)
        let store = repository.store
        var outcomes: [Outcome] = []
        // The store's entity types, when it holds none of `entityType` (said with the unknown ids).
        var knownTypes: [String]?
        do {
            // One id is one stream, however it is spelled (a UUID in upper or lower case): the
            // store refuses a batch that changes a stream twice.
            let (given, streams) = Self.distinct(given, try resolve(given, type: entityType, in: store), type: entityType)
            // A generic type's entity state is not known to the store (no repository of it is
            // registered here): a soft delete of one whose last event ends it is unknown, read
            // from the log (the writer lock is held: nothing changes meanwhile).
            let ended = tombstone == .deleted && entityType != ActivityEventCodec.entityType
                ? try Self.endedStreams(Set(streams.compactMap { $0 }), in: store) : []
            var pending: [(index: Int, stream: StreamID)] = []
            outcomes = given.enumerated().map { index, id in Outcome(id: id.text, stream: streams[index], deletion: .absent) }
            for (index, stream) in streams.enumerated() {
                guard let stream, !ended.contains(stream) else { continue }
                pending.append((index, stream))
            }
            let metadata = EventMetadata(correlationID: correlationID, actor: actor)
            var start = 0
            while start < pending.count {
                let batch = pending[start..<min(start + Self.batchSize, pending.count)]
                let streams = batch.map(\.stream)
                let results = tombstone == .deleted
                    ? try await store.delete(streams: streams, metadata: metadata)
                    : try await store.purge(streams: streams, metadata: metadata)
                for (entry, result) in zip(batch, results) { outcomes[entry.index].deletion = result }
                start += batch.count
            }
            // Every id unknown: a misspelt --type, most likely; the store's types say so.
            if !outcomes.isEmpty, outcomes.allSatisfy({ $0.deletion == .absent }) {
                var types: Set<String> = []
                try EventStore.forEachEnvelope(in: store.log, from: 0, through: nil) { envelope in
                    types.insert(envelope.stream.entityType)
                    return true
                }
                if !types.contains(entityType) {
                    knownTypes = types.sorted()
                }
            }
            try await repository.close()
        } catch {
            try? await repository.close()
            // The tool's own refusals (an id that is not valid) come before any write and say so.
            if let error = error as? ToolError { throw error }
            let written = outcomes.filter { $0.deletion.envelope != nil }.count
            let message = ToolError.from(error, store: directory)
            throw ToolError(message.exit, message.message + (written > 0 ? "\n\(Output.count(written)) ids were \(tombstone == .deleted ? "deleted" : "purged") before the failure (atomic batches of \(Output.count(Self.batchSize)))" : "\nnothing was written"))
        }
        report(outcomes, tombstone: tombstone, type: entityType, store: directory)
        if let knownTypes {
            Output.error("the store holds no events of type \"\(entityType)\"; " + (knownTypes.isEmpty ? "it holds no events" : "its entity types: " + knownTypes.map { "\"\($0)\"" }.joined(separator: ", ")))
        }
    }

    /// The ids without a second spelling of one stream (the first kept): compared as resolved
    /// streams, or for an activity id with no stream as its UUID, else as text.
    static func distinct(_ given: [GivenID], _ streams: [StreamID?], type: String) -> ([GivenID], [StreamID?]) {
        var seen: Set<StreamID> = []
        var keptIDs: [GivenID] = [], keptStreams: [StreamID?] = []
        for (id, stream) in zip(given, streams) {
            let key = stream ?? UUID(uuidString: id.text).map { type == ActivityEventCodec.entityType ? ActivityEventCodec.stream(of: $0) : StreamID(type, .string(id.text)) }
                ?? StreamID(type, .string(id.text))
            guard seen.insert(key).inserted else { continue }
            keptIDs.append(id)
            keptStreams.append(stream)
        }
        return (keptIDs, keptStreams)
    }

    /// Each id's stream (`nil`: it has no event), in order.
    private func resolve(_ given: [GivenID], type: String, in store: EventStore) throws -> [StreamID?] {
        try given.map { id in
            if type == ActivityEventCodec.entityType {
                let stream = ActivityEventCodec.stream(of: UUID(uuidString: id.text)!)
                return try store.version(of: stream) > 0 ? stream : nil
            }
            var candidates: [EntityID] = UUID(uuidString: id.text).map { [.uuid($0), .string(id.text)] } ?? [.string(id.text)]
            if let idType { candidates.removeAll { StreamsCommand.IDType($0) != idType } }
            guard !candidates.isEmpty else { throw ToolError(.badInput, "\"\(id.text)\" (\(id.source)) is not a UUID (--id-type uuid); nothing was written") }
            let existing = try candidates.map { StreamID(type, $0) }.filter { try store.version(of: $0) > 0 }
            if existing.count > 1 {
                throw ToolError(.badInput, "\(type) has both a UUID stream and a string stream \"\(id.text)\" (\(id.source)): say which with --id-type uuid|string; nothing was written")
            }
            return existing.first
        }
    }

    /// The streams among `streams` whose last event ends their entity (a repository's delete
    /// or a tombstone): one pass over the log.
    private static func endedStreams(_ streams: Set<StreamID>, in store: EventStore) throws -> Set<StreamID> {
        guard !streams.isEmpty else { return [] }
        var ended: Set<StreamID> = []
        try store.forEachEnvelope(from: 0, through: nil) { envelope in
            guard streams.contains(envelope.stream) else { return true }
            if EntityJSON.isDeletion(envelope.eventType) { ended.insert(envelope.stream) } else { ended.remove(envelope.stream) }
            return true
        }
        return ended
    }

    private func report(_ outcomes: [Outcome], tombstone: Tombstone, type: String, store: URL) {
        let verb = tombstone == .deleted ? "deleted" : "purged"
        let written = outcomes.filter { $0.deletion.envelope != nil }
        let unknown = outcomes.filter { $0.deletion == .absent }
        let already = outcomes.filter { $0.deletion == .alreadyPurged }
        if json {
            func list(_ outcomes: [Outcome]) -> JSONValue { .array(outcomes.map { .string($0.id) }) }
            let object: JSONValue = .object([
                ("store", .string(store.path)), ("type", .string(type)), ("event", .string(tombstone.eventType)),
                (verb, .array(written.map { outcome in
                    let envelope = outcome.deletion.envelope!
                    return .object([("id", .string(outcome.id)), ("position", JSONValue.uint(envelope.position)),
                                    ("version", JSONValue.uint(envelope.entityVersion))])
                })),
                ("alreadyPurged", list(already)), ("unknown", list(unknown)),
            ])
            print(object.text)
        } else {
            if !written.isEmpty {
                print(Output.table(["id", "outcome", ">position", ">version"], outcomes.map { outcome in
                    switch outcome.deletion {
                    case .written(let envelope): [outcome.id, verb, String(envelope.position), String(envelope.entityVersion)]
                    case .absent: [outcome.id, "unknown", "", ""]
                    case .alreadyPurged: [outcome.id, "already purged", "", ""]
                    }
                }))
            }
            var summary = "\(Output.count(written.count)) \(type) id\(written.count == 1 ? "" : "s") \(verb) (\(tombstone.eventType))"
            if !already.isEmpty { summary += ", \(Output.count(already.count)) already purged" }
            if !unknown.isEmpty { summary += ", \(Output.count(unknown.count)) unknown" }
            print(summary + " in \(store.path)")
        }
        if !unknown.isEmpty {
            let shown = unknown.prefix(5).map(\.id).joined(separator: ", ")
            let what = tombstone == .deleted ? "no live \(type) has" : "no \(type) stream has"
            Output.error("\(what) \(unknown.count == 1 ? "this id" : "these \(Output.count(unknown.count)) ids"): \(shown)\(unknown.count > 5 ? ", …" : "")")
            DeferredExit.record(.badInput)
        }
    }
}
