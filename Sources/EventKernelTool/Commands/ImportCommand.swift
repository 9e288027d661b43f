import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation

/// Imports JSON Lines. All or nothing for bad input: the whole file is parsed and checked
/// against the store first; only then is it appended, in atomic batches of `batchSize` events.
///
/// Resumable: every event of a batch carries an import marker (its metadata's correlation id)
/// naming the input's content and the batch's last line. The marker is in the batch, so it is
/// durable exactly when the batch is; a run that stopped (a signal, a failed write, a crash)
/// is continued by the same command, which skips the lines the store already records.
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Append events or activities from a JSON Lines file (validated in full before anything is written).",
        usage: "eventkernel import [STORE] FILE.jsonl [--dir D] [--batch-size B] [--lenient]",
        discussion: """
            The store may come first (import STORE FILE) or as --dir; a single argument is the file.

            Examples:
              eventkernel import demo history.jsonl
              eventkernel import history.jsonl --dir demo --batch-size 5000
              eventkernel export old-store | eventkernel import new-store -
            """)

    /// `import [STORE] FILE.jsonl`: the file is the command's operand (StoreLocation.swift).
    enum Operand: StoreOperandLayout {
        static var operandName: String? { "FILE.jsonl" }
        static var operandHelp: String { "The JSON Lines file (event lines or activity lines, see Docs/CLI.md); - for standard input." }
    }

    @OptionGroup var store: StoreArguments<Operand>
    var file: String { store.operand ?? "" }
    @Option(help: "Events per atomic batch.") var batchSize = 1_000
    @Flag(help: "Ignore fields the schema does not know (by default an unknown field, such as a misspelt \"enddate\", is refused).")
    var lenient = false

    func validate() throws {
        guard batchSize > 0 else { throw ValidationError("--batch-size must be positive") }
    }

    func run() async throws {
        let input = try ImportInput.read(file)
        let name = input.name
        // Invalid UTF-8 is refused, never replaced by U+FFFD: an import stores exactly what the
        // file says, or nothing.
        guard let text = String(validating: input.data, as: UTF8.self) else {
            let (line, column, offset) = Self.firstInvalidUTF8(in: input.data)
            throw ToolError(.badInput, "\(name):\(line): invalid UTF-8 at byte \(column) of the line (byte offset \(offset) in the file)\nnothing was imported")
        }
        // From here on (the input read: Ctrl-C while a terminal is typing it still ends the
        // process at once) a signal stops the import at a clean boundary, and it says where.
        let interruption = Interruption()
        defer { interruption.stop() }
        let again = Self.continueHint(input)
        let directory = store.url
        let storeExists = FileManager.default.fileExists(atPath: directory.path)
        // Open first when the store exists: a locked store fails before any work.
        var repository = storeExists ? try StoreLocation.openWriter(directory, create: true) : nil
        let identity = input.identity
        var importedEarlier = 0
        // The entity types with a generic repository's event in the store, and the streams
        // whose last such event is a delete.
        var repositoryTypes: Set<String> = []
        var deletedStreams: Set<StreamID> = []
        // The store's latest recording time: an imported event keeps its line's recordedAt only
        // at or after it, as times must not go back (replay --as-of finds the last position
        // recorded at or before a time).
        var latest: LogTimestamp?
        if let existing = repository {
            do {
                (importedEarlier, latest, repositoryTypes, deletedStreams) = try ImportMarker.lastLine(of: identity, in: existing) { interruption.caught != nil }
            } catch {
                try? await existing.close()
                throw ToolError.from(error, store: directory)
            }
            if let report = interruption.report {
                try? await existing.close()
                throw ToolError(report.exit, "interrupted (\(report.name)) while reading the store for earlier imports of \(name)\nnothing was imported; \(again) to start again")
            }
        }

        // 1. Parse and check every line against the store's state plus the lines before it
        // (the lines an earlier run imported are in that state already: skipped).
        var events: [(line: Int, item: ImportItem)] = []
        var validator = ActivityJSON.ImportValidator { [repository] id in repository?.activity(id: id) }
        var streams = EntityVersionValidator(deleted: deletedStreams) { [repository] stream in try repository?.store.version(of: stream) ?? 0 }
        var lineNumber = 0
        var blank = 0
        // Lines recorded at the import's time instead of their recordedAt (it is before a time
        // already in the store or the lines before); after the first, every later line is.
        var restamped = 0
        var firstRestamped: Int?
        var restampRest = false
        do {
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            if text.hasSuffix("\n") { lines.removeLast() }  // the final newline ends the last line
            for line in lines {
                lineNumber += 1
                if let report = interruption.report {
                    throw ToolError(report.exit, "interrupted (\(report.name)) while checking \(name), before anything was written")
                }
                let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
                if trimmed.isEmpty { blank += 1; continue }
                if lineNumber <= importedEarlier { continue }
                if EntityJSON.isEntityLine(Substring(trimmed)) {
                    var imported: EntityJSON.ImportedEvent
                    do {
                        imported = try EntityJSON.parseLine(Substring(trimmed), lenient: lenient)
                        try EntityJSON.requireStorableMetadata(imported.metadata)
                    } catch {
                        throw ToolError(.badInput, "\(name):\(lineNumber): \(error.message)")
                    }
                    do { try streams.check(imported, line: lineNumber) } catch let error as ActivityJSON.LineError {
                        throw ToolError(.badInput, "\(name):\(lineNumber): \(error.message)")
                    } catch {
                        // The store failed, not the line: damage is exit 3, I/O exit 4.
                        let failure = ToolError.from(error, store: directory)
                        throw ToolError(failure.exit, "\(name):\(lineNumber): reading the version of \(imported.event.stream) from the store: \(failure.message)")
                    }
                    if let time = imported.recordedAt, !restampRest, latest.map({ time >= $0 }) ?? true {
                        latest = time
                    } else {
                        if imported.recordedAt != nil {
                            restamped += 1
                            if firstRestamped == nil { firstRestamped = lineNumber }
                        }
                        imported.recordedAt = nil
                        restampRest = true
                    }
                    events.append((lineNumber, .entity(imported)))
                    continue
                }
                let event: ActivityEvent
                do {
                    event = try ActivityJSON.parseLine(Substring(trimmed), lenient: lenient)
                    try EntityJSON.requireStorableMetadata(try EntityJSON.activityLineMetadata(Substring(trimmed)))
                } catch {
                    throw ToolError(.badInput, "\(name):\(lineNumber): \(error.message)")
                }
                do { try validator.check(event) } catch {
                    throw ToolError(.badInput, "\(name):\(lineNumber): \(error.message)")
                }
                // An activity event is recorded at the import's time: later lines cannot go back.
                restampRest = true
                events.append((lineNumber, .activity(event)))
            }
            if let (line, error) = streams.fieldEventRefusal(storeTypes: repositoryTypes) {
                throw ToolError(.badInput, "\(name):\(line): \(error.message)")
            }
            for (line, message) in streams.fieldEventWarnings(storeTypes: repositoryTypes) {
                Output.warning("\(name):\(line): \(message)")
            }
        } catch let error as ToolError {
            try? await repository?.close()
            let earlier = importedEarlier > 0 ? " in this run (lines 1–\(importedEarlier) were imported earlier)" : ""
            let why = error.exit == .badInput ? " (the file is checked in full before anything is written)" : "; \(again) to start again"
            throw ToolError(error.exit, error.message + "\nnothing was imported\(earlier)\(why)")
        }
        guard !events.isEmpty else {
            try? await repository?.close()
            if importedEarlier > 0 {
                print("nothing to import: every event of \(name) (lines 1–\(importedEarlier)) was imported into \(directory.path) earlier (the store recognises the input by its content)")
            } else {
                print("nothing to import: \(name) has no events (\(lineNumber) lines, \(blank) blank)")
            }
            return
        }

        // 2. Append in atomic batches, each tagged with the input and its last line.
        if repository == nil { repository = try StoreLocation.openWriter(directory, create: true) }
        guard let repository else { return }
        var progress = ProgressBar("importing", total: events.count)
        let firstLine = events[0].line
        let earlier = importedEarlier > 0 ? "; lines 1–\(importedEarlier) were imported earlier" : ""
        var written = 0
        var lastLine = importedEarlier
        do {
            while written < events.count {
                if let report = interruption.report {
                    progress.finish()
                    try await repository.close()
                    let stored = written == 0 ? "nothing was imported in this run" :
                        "\(Output.count(written)) events from lines \(firstLine)–\(lastLine) were imported in this run and are durable"
                    let point = lastLine == 0 ? "before the first batch of \(name)" : "after line \(lastLine) of \(name)"
                    let next = lastLine == 0 ? "to start again" : "to continue after line \(lastLine)"
                    throw ToolError(report.exit, "interrupted (\(report.name)) \(point): \(stored)\(earlier); lines \(events[written].line)–\(lineNumber) were not imported\n\(again) \(next)")
                }
                // A batch holds one kind of line: activities go through the activity
                // repository's checks, other entity types' events straight to the store, each
                // expecting the version before it when its line gives one.
                let activities = events[written].item.activity != nil
                var end = written
                while end < events.count, end - written < batchSize, (events[end].item.activity != nil) == activities { end += 1 }
                let chunk = events[written..<end]
                let marker = ImportMarker.metadata(identity: identity, throughLine: chunk.last!.line)
                if activities {
                    try await repository.apply(chunk.compactMap(\.item.activity), metadata: marker)
                } else {
                    try await repository.store.append(chunk.compactMap(\.item.entity).map {
                        var pending = PendingEvent($0.event, expectedVersion: $0.version.map { $0 - 1 }, metadata: marker)
                        pending.timestamp = $0.recordedAt
                        return pending
                    })
                }
                written += chunk.count
                lastLine = chunk.last!.line
                progress.update(written)
            }
            progress.finish()
            try await repository.close()
        } catch let error as ToolError {
            throw error
        } catch {
            progress.finish()
            try? await repository.close()
            let underlying = ToolError.from(error, store: directory)
            let acknowledged = written == 0 ? "nothing was imported in this run" :
                "\(Output.count(written)) events from lines \(firstLine)–\(lastLine) were imported and are durable; the last line acknowledged is \(lastLine)"
            throw ToolError(underlying.exit == .badInput ? .io : underlying.exit,
                            "write failed at line \(events[written].line): \(underlying.message)\n\(acknowledged)\(earlier); lines \(events[written].line)–\(lineNumber) were not imported\n\(again) \(lastLine == 0 ? "to start again" : "to continue after line \(lastLine)")")
        }
        if let firstRestamped {
            Output.note("\(Output.count(restamped)) event\(restamped == 1 ? " was" : "s were") recorded at the time of the import, not at their recordedAt, which is before a time already in \(directory.path) or on an earlier line (recording times never go back); first at line \(firstRestamped)")
        }
        let range = importedEarlier > 0 ? "lines \(firstLine)–\(lastLine); lines 1–\(importedEarlier) were imported earlier" : "lines 1–\(lastLine)"
        print("imported \(Output.count(written)) event\(written == 1 ? "" : "s") from \(name) (\(range), \(blank) blank line\(blank == 1 ? "" : "s") skipped) into \(directory.path); last line imported: \(lastLine)")
    }

    /// How to continue: the same command, or for an input read once and never again (standard
    /// input, a pipe) the same bytes fed in again.
    static func continueHint(_ input: ImportInput) -> String {
        if input.canBeReadAgain { return "run the same command again" }
        return input.isStandardInput
            ? "standard input cannot be read again: pipe the same input into the same command (the store recognises it by its content)"
            : "\(input.name) cannot be read again: feed the same input to the same command (the store recognises it by its content)"
    }

    /// Where the first invalid UTF-8 sequence starts: line (from 1), byte within the line (from
    /// 1) and byte offset in the file (from 0).
    static func firstInvalidUTF8(in data: Data) -> (line: Int, column: Int, offset: Int) {
        let bytes = [UInt8](data)
        var line = 1, lineStart = 0, index = 0
        while index < bytes.count {
            let byte = bytes[index]
            let length = byte < 0x80 ? 1 : byte >> 5 == 0b110 ? 2 : byte >> 4 == 0b1110 ? 3 : byte >> 3 == 0b11110 ? 4 : 0
            if length == 0 || index + length > bytes.count
                || String(validating: bytes[index..<(index + length)], as: UTF8.self) == nil {
                return (line, index - lineStart + 1, index)
            }
            if byte == 0x0A { line += 1; lineStart = index + 1 }
            index += length
        }
        return (line, index - lineStart + 1, index)
    }
}

/// The marker `import` records with every event of a batch (its metadata's correlation id):
/// `eventkernel-import <input identity> through line <N>`. The input identity is its length
/// and checksums (``ImportInput/identity``), so a marker names the content, not a path.
enum ImportMarker {
    private static let prefix = "eventkernel-import "

    /// The metadata of a batch ending at line `line` of the input `identity`.
    static func metadata(identity: String, throughLine line: Int) -> EventMetadata {
        EventMetadata(correlationID: "\(prefix)\(identity) through line \(line)")
    }

    /// Whether a correlation id is an import's marker (of any input).
    static func isMarker(_ correlationID: String) -> Bool { correlationID.hasPrefix(prefix) }

    /// The last line of input `identity` the store records as imported (0: none), the
    /// latest recording time in the store (`nil`: no events), the entity types that have a
    /// generic repository's event in it and the streams whose last such event is a delete.
    /// - Parameters:
    ///   - identity: The input's ``ImportInput/identity``.
    ///   - repository: The store, open for writing (nothing appends meanwhile).
    ///   - stop: Polled between events: true ends the scan early (its answer is then partial).
    /// - Complexity: Reads every event of the log (the marker may be anywhere in it).
    /// - Throws: What reading the log throws (damage: the import must not guess).
    static func lastLine(of identity: String, in repository: EventSourcedActivityRepository, stop: () -> Bool) throws -> (line: Int, latest: LogTimestamp?, repositoryTypes: Set<String>, deletedStreams: Set<StreamID>) {
        guard repository.store.log.bounds.nextPosition > 0 else { return (0, nil, [], []) }
        let lead = "\(prefix)\(identity) through line "
        var last = 0
        var latest: LogTimestamp?
        var types: Set<String> = []
        var deleted: Set<StreamID> = []
        try repository.store.forEachEnvelope(from: 0, through: nil) { envelope in
            latest = max(latest ?? envelope.timestamp, envelope.timestamp)
            // Decoding a payload once per type is enough.
            if !types.contains(envelope.stream.entityType), EntityJSON.showsRepositoryType(envelope.eventType, of: envelope.stream.entityType, payload: envelope.payload) {
                types.insert(envelope.stream.entityType)
            }
            if EntityJSON.isRepositoryEvent(envelope) {
                if envelope.eventType.hasSuffix(".deleted") { deleted.insert(envelope.stream) } else { deleted.remove(envelope.stream) }
            }
            if let id = envelope.metadata.correlationID, id.hasPrefix(lead), let line = Int(id.dropFirst(lead.count)) {
                last = max(last, line)
            }
            return !stop()
        }
        return (last, latest, types, deleted)
    }
}

/// One import line's event: an activity event, or any other entity type's.
enum ImportItem {
    case activity(ActivityEvent)
    case entity(EntityJSON.ImportedEvent)

    var activity: ActivityEvent? { if case .activity(let e) = self { e } else { nil } }
    var entity: EntityJSON.ImportedEvent? { if case .entity(let e) = self { e } else { nil } }
}

/// Checks import lines of other entity types against the store's stream versions plus the
/// lines before: a line that gives its version (export's lines do) must be the next event of
/// its stream, so an import into a store that already holds other events of the stream is
/// refused before anything is written, never appended out of order.
struct EntityVersionValidator {
    /// The store's committed version of a stream (0: none, or no store).
    var stored: (StreamID) throws -> UInt64
    /// Each stream's version after the lines checked so far, and whether its entity exists then
    /// (`false` after a delete; `nil` for a stream the store holds: not read).
    private var overlay: [StreamID: (version: UInt64, exists: Bool?)] = [:]
    /// The entity types that have an event among the lines checked that shows they are a
    /// generic repository's (``EntityJSON/showsRepositoryType(_:of:payload:)``).
    private(set) var repositoryTypes: Set<String> = []
    /// The lines that are an event `TYPE.name` (a field event's form, ``EntityJSON/fieldEventName(_:of:payload:)``)
    /// of a stream whose entity does not exist at that point (its first event, or after a
    /// delete): a generic repository of the type fails to open on one. Whether the type is a
    /// repository's is known only after every line (and the store) is read.
    private(set) var fieldEventsWithoutEntity: [(line: Int, event: EncodedEvent)] = []

    /// The streams of the store whose last repository event is a delete.
    private let deleted: Set<StreamID>

    /// - Parameters:
    ///   - deleted: The streams of the store whose entity was deleted last.
    ///   - stored: The store's committed version of a stream.
    init(deleted: Set<StreamID> = [], stored: @escaping (StreamID) throws -> UInt64) {
        self.deleted = deleted
        self.stored = stored
    }

    /// The first line of ``fieldEventsWithoutEntity`` whose type is a generic repository's (an
    /// event in the input or the store shows it: `storeTypes`, ``repositoryTypes``), as a
    /// refusal naming the line and the stream. A payload shaped as a field event's is no
    /// evidence alone (an application may write `Counter.set {"value":3}` with the binary
    /// encoder): those are
    /// ``fieldEventWarnings(storeTypes:)``.
    func fieldEventRefusal(storeTypes: Set<String>) -> (line: Int, error: ActivityJSON.LineError)? {
        for (line, event) in fieldEventsWithoutEntity {
            let type = event.stream.entityType
            guard repositoryTypes.contains(type) || storeTypes.contains(type) else { continue }
            return (line, ActivityJSON.LineError(message: "\(event.eventType) is a field event (\(type) is a generic repository's type) and sets one property of an existing entity, but \(event.stream) has no entity at that point (the line would be its first event, or follow its delete): the application could not open the store (noEntityForFieldEvent). Import the stream's \(type).added first"))
        }
        return nil
    }

    /// The lines of ``fieldEventsWithoutEntity`` of a type nothing shows is a repository's, whose
    /// payload is shaped as a `Codable` field event's (`{"value": …}`): imported, but said on
    /// stderr, as an application that registers the event could not open the store. One
    /// warning per type, at its first such line, counting the others (one per stream start
    /// gave 100,000 lines for 100,000 streams).
    func fieldEventWarnings(storeTypes: Set<String>) -> [(line: Int, message: String)] {
        var firsts: [(line: Int, event: EncodedEvent)] = []
        var counts: [String: Int] = [:]
        for (line, event) in fieldEventsWithoutEntity {
            let type = event.stream.entityType
            guard !repositoryTypes.contains(type), !storeTypes.contains(type), EntityJSON.isFieldEventPayload(event.payload) else { continue }
            if counts[type] == nil { firsts.append((line, event)) }
            counts[type, default: 0] += 1
        }
        return firsts.map { line, event in
            let type = event.stream.entityType
            let others = counts[type, default: 1] - 1
            let more = others == 0 ? "" : " (and \(others) more line\(others == 1 ? "" : "s") of \(type) like it)"
            return (line, "\(event.eventType) has a field event's payload ({\"value\": …}) and is the first event of \(event.stream) (or follows its delete)\(more); nothing shows \(type) is a generic repository's type, so it is imported as the application's own event. If it is a FieldEvent, an application registering it could not open the store (noEntityForFieldEvent)")
        }
    }

    /// Checks one line and counts it.
    /// - Parameter line: The line's number, to name it in ``fieldEventsWithoutEntity``.
    /// - Throws: ``ActivityJSON/LineError`` for a line out of order; what reading the store's
    ///   version throws, as it is (a storage failure is not bad input).
    mutating func check(_ imported: EntityJSON.ImportedEvent, line: Int = 0) throws {
        let stream = imported.event.stream
        guard stream.entityType != ActivityEventCodec.entityType else {
            throw ActivityJSON.LineError(message: "stream type \"\(stream.entityType)\" is the activities': write an activity event line (see Docs/CLI.md)")
        }
        let current: UInt64
        let exists: Bool?
        if let known = overlay[stream] { (current, exists) = known } else {
            current = try stored(stream)
            exists = current == 0 || deleted.contains(stream) ? false : nil
        }
        if let version = imported.version, version != current + 1 {
            throw ActivityJSON.LineError(message: "version \(version) of \(stream) does not follow its version \(current) (in the store\(overlay[stream] == nil ? "" : " and the lines before")): a stream's events are imported in order, from its next version")
        }
        let eventType = imported.event.eventType
        var after = exists
        if !repositoryTypes.contains(stream.entityType), EntityJSON.showsRepositoryType(eventType, of: stream.entityType, payload: imported.event.payload) {
            repositoryTypes.insert(stream.entityType)
        }
        if EntityJSON.isRepositoryEvent(eventType, of: stream.entityType) {
            after = !eventType.hasSuffix(".deleted")
        } else if exists == false, EntityJSON.fieldEventName(eventType, of: stream.entityType, payload: imported.event.payload) != nil {
            fieldEventsWithoutEntity.append((line, imported.event))
        }
        overlay[stream] = (current + 1, after)
    }
}
