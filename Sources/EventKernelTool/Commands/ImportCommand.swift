import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation

/// Imports JSON Lines. All or nothing for bad input: every line is parsed and checked against
/// the store first; only then is the input read again and appended, in atomic batches of
/// `batchSize` events.
///
/// Memory is bounded by the checks' state, not the input: the input is read a chunk at a time
/// (``ImportInput``), the checking pass keeps no parsed event, and the appending pass parses
/// each line again (cheaper than holding hundreds of megabytes of events) and holds one batch.
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
        // Reads the input once (a copy of one that cannot be read again): invalid UTF-8 is
        // refused here, before the store is opened.
        let input = try ImportInput.open(file)
        let name = input.name
        // From here on (the input read: Ctrl-C while a terminal is typing it still ends the
        // process at once) a signal stops the import at a clean boundary, and it says where.
        let interruption = Interruption()
        defer { interruption.stop() }
        let again = Self.continueHint(input)
        let directory = store.url
        let storeExists = FileManager.default.fileExists(atPath: directory.path)
        // Open first when the store exists: a locked store fails before any work.
        var repository = storeExists ? try StoreLocation.openWriter(directory, command: "import", create: true) : nil
        var start = ImportStart()
        if let existing = repository {
            do {
                (start.importedEarlier, start.latest, start.repositoryTypes, start.deletedStreams) = try ImportMarker.lastLine(of: input.identity, in: existing) { interruption.caught != nil }
            } catch {
                try? await existing.close()
                throw ToolError.from(error, store: directory)
            }
            if let report = interruption.report {
                try? await existing.close()
                throw ToolError(report.exit, "interrupted (\(report.name)) while reading the store for earlier imports of \(name)\nnothing was imported; \(again) to start again")
            }
        }
        let importedEarlier = start.importedEarlier

        // 1. Parse and check every line against the store's state plus the lines before it
        // (the lines an earlier run imported are in that state already: skipped).
        let checked: CheckedImport
        do {
            checked = try check(input, against: repository, from: start, interruption: interruption)
        } catch let error as ToolError {
            try? await repository?.close()
            let earlier = importedEarlier > 0 ? " in this run (lines 1–\(importedEarlier) were imported earlier)" : ""
            let why = error.exit == .badInput ? " (the file is checked in full before anything is written)" : "; \(again) to start again"
            throw ToolError(error.exit, error.message + "\nnothing was imported\(earlier)\(why)")
        }
        guard checked.events > 0 else {
            try? await repository?.close()
            if importedEarlier > 0 {
                print("nothing to import: every event of \(name) (lines 1–\(importedEarlier)) was imported into \(directory.path) earlier (the store recognises the input by its content)")
            } else {
                // An empty input reads as one blank line; "1 lines, 1 blank" said so literally.
                print("nothing to import: \(name) has no events (" + (input.count == 0 ? "it is empty" : "\(Output.count(checked.lines)) line\(checked.lines == 1 ? "" : "s"), all blank") + ")")
            }
            return
        }

        // 2. Read the input again and append in atomic batches, each tagged with the input and
        // its last line.
        if repository == nil { repository = try StoreLocation.openWriter(directory, command: "import", create: true) }
        guard let repository else { return }
        let lineNumber = checked.lines
        var progress = ProgressBar("importing", total: checked.events)
        let earlier = importedEarlier > 0 ? "; lines 1–\(importedEarlier) were imported earlier" : ""
        var lines = ImportEventLines(input.lines(), importedEarlier: importedEarlier)
        var batching = ImportBatching(size: batchSize)
        var batch: [(line: Int, item: ImportItem)] = []
        batch.reserveCapacity(min(batchSize, checked.events))
        var batches = 0
        var firstLine: Int?
        var written = 0
        var lastLine = importedEarlier
        /// What the store holds of this run, for a message that stops it.
        func acknowledged() -> String {
            written == 0 ? "nothing was imported in this run" :
                "\(Output.count(written)) events from lines \(firstLine ?? 0)–\(lastLine) were imported in this run and are durable"
        }
        /// Appends `batch` when the input still holds, through its last line, the bytes checked.
        func append(through checksum: UInt32) async throws {
            if let report = interruption.report {
                progress.finish()
                try await repository.close()
                let point = lastLine == 0 ? "before the first batch of \(name)" : "after line \(lastLine) of \(name)"
                let next = lastLine == 0 ? "to start again" : "to continue after line \(lastLine)"
                throw ToolError(report.exit, "interrupted (\(report.name)) \(point): \(acknowledged())\(earlier); lines \(batch[0].line)–\(lineNumber) were not imported\n\(again) \(next)")
            }
            guard batches < checked.batchChecksums.count, checksum == checked.batchChecksums[batches] else { throw input.changed() }
            // A batch holds one kind of line: activities go through the activity repository's
            // checks, other entity types' events straight to the store, each expecting the
            // version before it when its line gives one.
            let marker = ImportMarker.metadata(identity: input.identity, throughLine: batch.last!.line)
            if batch[0].item.activity != nil {
                try await repository.apply(batch.compactMap(\.item.activity), metadata: marker)
            } else {
                try await repository.store.append(batch.compactMap(\.item.entity).map {
                    let versioned = $0.event.stream.entityType != ActivityEventCodec.entityType
                    var pending = PendingEvent($0.event, expectedVersion: versioned ? $0.version.map { $0 - 1 } : nil, metadata: marker)
                    pending.timestamp = $0.recordedAt
                    return pending
                })
            }
            if firstLine == nil { firstLine = batch[0].line }
            written += batch.count
            lastLine = batch.last!.line
            batches += 1
            batch.removeAll(keepingCapacity: true)
            progress.update(written)
        }
        do {
            var checksum: UInt32 = 0
            while let (line, text) = try lines.next() {
                let item: ImportItem
                do {
                    item = try ImportItem(parsing: text, lenient: lenient)
                } catch {
                    // It parsed when checked: the file changed since.
                    throw input.changed()
                }
                if batching.startsBatch(activities: item.activity != nil), !batch.isEmpty { try await append(through: checksum) }
                if case .entity(var imported) = item, let from = checked.restampFrom, line >= from {
                    imported.recordedAt = nil
                    batch.append((line, .entity(imported)))
                } else {
                    batch.append((line, item))
                }
                checksum = lines.checksum
            }
            if !batch.isEmpty { try await append(through: checksum) }
            guard written == checked.events else { throw input.changed() }
            progress.finish()
            try await repository.close()
        } catch let error as ToolError where error.exit == .interrupted || error.exit == .terminated {
            throw error
        } catch {
            progress.finish()
            try? await repository.close()
            let next = lastLine == 0 ? "to start again" : "to continue after line \(lastLine)"
            let notImported = "lines \(batch.first?.line ?? lastLine + 1)–\(lineNumber) were not imported"
            if let error = error as? ToolError {
                // The input: it changed, or can no longer be read.
                let byContent = input.canBeReadAgain ? " (the store recognises the input by its content: the same bytes continue, changed ones are a new import, checked in full)" : ""
                throw ToolError(error.exit, "\(error.message)\n\(acknowledged())\(earlier); \(notImported)\n\(again) \(next)\(byContent)")
            }
            let underlying = ToolError.from(error, store: directory)
            if batch.isEmpty, written == checked.events {
                // Every batch was acknowledged (durable); closing failed.
                throw ToolError(underlying.exit == .badInput ? .io : underlying.exit,
                                "closing the store failed after the last batch: \(underlying.message)\n\(acknowledged())\(earlier)")
            }
            let failed = batch.first?.line ?? lastLine + 1
            let acknowledged = written == 0 ? "nothing was imported in this run" :
                "\(Output.count(written)) events from lines \(firstLine ?? 0)–\(lastLine) were imported and are durable; the last line acknowledged is \(lastLine)"
            throw ToolError(underlying.exit == .badInput ? .io : underlying.exit,
                            "write failed at line \(failed): \(underlying.message)\n\(acknowledged)\(earlier); lines \(failed)–\(lineNumber) were not imported\n\(again) \(next)")
        }
        if let firstRestamped = checked.firstRestamped {
            let restamped = checked.restamped
            Output.note("\(Output.count(restamped)) event\(restamped == 1 ? " was" : "s were") recorded at the time of the import, not at their recordedAt, which is before a time already in \(directory.path) or on an earlier line (recording times never go back); first at line \(firstRestamped)")
        }
        let blank = checked.blank
        let range = importedEarlier > 0 ? "lines \(firstLine ?? 0)–\(lastLine); lines 1–\(importedEarlier) were imported earlier" : "lines 1–\(lastLine)"
        print("imported \(Output.count(written)) event\(written == 1 ? "" : "s") from \(name) (\(range), \(blank) blank line\(blank == 1 ? "" : "s") skipped) into \(directory.path); last line imported: \(lastLine)")
    }

    /// The checking pass: parses every line and checks it against the store's state plus the
    /// lines before it, keeping only the checks' state (a few bytes per entity), not the
    /// events. Prints the warnings the lines deserve.
    /// - Throws: ``ToolError`` naming the input, the line and the problem (exit 1), what
    ///   reading the store threw (damage exit 3, I/O exit 4), or the signal that stopped it.
    private func check(_ input: ImportInput, against repository: EventSourcedActivityRepository?, from start: ImportStart,
                       interruption: Interruption) throws -> CheckedImport {
        let name = input.name
        let directory = store.url
        var checked = CheckedImport()
        var validator = ActivityJSON.ImportValidator { [repository] id in repository?.activity(id: id) }
        var streams = EntityVersionValidator(deleted: start.deletedStreams) { [repository] stream in try repository?.store.version(of: stream) ?? 0 }
        var lines = ImportEventLines(input.lines(), importedEarlier: start.importedEarlier)
        var batching = ImportBatching(size: batchSize)
        /// The streams a `$purged` line of the input purges, with its line.
        var purgedInInput: [StreamID: Int] = [:]
        // The store's latest recording time: an imported event keeps its line's recordedAt only
        // at or after it, as times must not go back (replay --as-of finds the last position
        // recorded at or before a time).
        var latest = start.latest
        // The input's checksum through the last event line: each batch's is compared when the
        // appending pass reads the input again.
        var checksum: UInt32 = 0
        while let (lineNumber, text) = try lines.next(interruption: interruption) {
            let item: ImportItem
            do { item = try ImportItem(parsing: text, lenient: lenient, storableOnly: true) } catch {
                throw ToolError(.badInput, "\(name):\(lineNumber): \(error.message)" + ImportEventLines.carriageReturnHint(text))
            }
            // A purged stream takes no event (the store's append path would refuse it midway):
            // refused here, naming the line, before anything is written.
            let stream = item.activity.map { ActivityEventCodec.stream(of: $0.activityID) } ?? item.entity!.event.stream
            if let purgedAt = purgedInInput[stream] {
                throw ToolError(.badInput, "\(name):\(lineNumber): \(stream) is purged at line \(purgedAt): nothing can follow a $purged event")
            }
            if repository?.store.isPurged(stream) == true {
                throw ToolError(.badInput, "\(name):\(lineNumber): \(stream) is purged in \(directory.path): nothing can be appended to it again")
            }
            // The store's one rule for `$` events (a known tombstone, empty payload, schema 1, a
            // stream with events before it), here with the line named, before anything is written.
            if let event = item.entity?.event, event.eventType.utf8.first == UInt8(ascii: "$") {
                let before: UInt64
                do {
                    if case .uuid(let id) = stream.entityID, stream.entityType == ActivityEventCodec.entityType {
                        // Activity lines carry no version: only whether the activity had an event counts.
                        before = validator.overlay[id] != nil ? 1 : try repository?.store.version(of: stream) ?? 0
                    } else {
                        before = try streams.version(of: stream)
                    }
                } catch {
                    let failure = ToolError.from(error, store: directory)
                    throw ToolError(failure.exit, "\(name):\(lineNumber): reading the version of \(stream) from the store: \(failure.message)")
                }
                do {
                    try Tombstone.validate(eventType: event.eventType, schemaVersion: event.schemaVersion,
                                           payloadCount: event.payload.count, stream: stream, versionBefore: before)
                } catch {
                    guard case .misuse(let misuse) = error else { throw ToolError(.badInput, "\(name):\(lineNumber): \(error)") }
                    throw ToolError(.badInput, "\(name):\(lineNumber): \(misuse.message)")
                }
            }
            if let event = item.entity?.event, let tombstone = Tombstone(eventType: event.eventType) {
                if tombstone == .purged { purgedInInput[stream] = lineNumber }
                if case .uuid(let id) = stream.entityID, stream.entityType == ActivityEventCodec.entityType { validator.end(id) }
            }
            switch item {
            case .entity(let imported):
                do { try streams.check(imported, line: lineNumber) } catch let error as ActivityJSON.LineError {
                    throw ToolError(.badInput, "\(name):\(lineNumber): \(error.message)")
                } catch {
                    // The store failed, not the line: damage is exit 3, I/O exit 4.
                    let failure = ToolError.from(error, store: directory)
                    throw ToolError(failure.exit, "\(name):\(lineNumber): reading the version of \(imported.event.stream) from the store: \(failure.message)")
                }
                if let time = imported.recordedAt, checked.restampFrom == nil, latest.map({ time >= $0 }) ?? true {
                    latest = time
                } else {
                    if imported.recordedAt != nil {
                        checked.restamped += 1
                        if checked.firstRestamped == nil { checked.firstRestamped = lineNumber }
                    }
                    if checked.restampFrom == nil { checked.restampFrom = lineNumber }
                }
            case .activity(let event):
                do { try validator.check(event) } catch {
                    throw ToolError(.badInput, "\(name):\(lineNumber): \(error.message)")
                }
                // An activity event is recorded at the import's time: later lines cannot go back.
                if checked.restampFrom == nil { checked.restampFrom = lineNumber }
            }
            if batching.startsBatch(activities: item.activity != nil), checked.events > 0 { checked.batchChecksums.append(checksum) }
            checked.events += 1
            checksum = lines.checksum
        }
        if checked.events > 0 { checked.batchChecksums.append(checksum) }
        (checked.lines, checked.blank) = (lines.number, lines.blank)
        if let (line, error) = streams.fieldEventRefusal(storeTypes: start.repositoryTypes) {
            throw ToolError(.badInput, "\(name):\(line): \(error.message)")
        }
        for (line, message) in streams.fieldEventWarnings(storeTypes: start.repositoryTypes) {
            Output.warning("\(name):\(line): \(message)")
        }
        return checked
    }

    /// How to continue: the same command, or for an input read once and never again (standard
    /// input, a pipe) the same bytes fed in again.
    static func continueHint(_ input: ImportInput) -> String {
        if input.canBeReadAgain { return "run the same command again" }
        return input.isStandardInput
            ? "standard input cannot be read again: pipe the same input into the same command (the store recognises it by its content)"
            : "\(input.name) cannot be read again: feed the same input to the same command (the store recognises it by its content)"
    }
}

/// What the store says before an import checks its input: the last line of the input an
/// earlier run imported, the latest recording time, the entity types that have a generic
/// repository's event and the streams whose last such event is a delete
/// (``ImportMarker/lastLine(of:in:stop:)``).
private struct ImportStart {
    var importedEarlier = 0
    var latest: LogTimestamp?
    var repositoryTypes: Set<String> = []
    var deletedStreams: Set<StreamID> = []
}

/// What the checking pass found, for the appending pass and the messages.
private struct CheckedImport {
    /// The input's lines, blank ones included.
    var lines = 0
    var blank = 0
    /// The events to append.
    var events = 0
    /// Lines recorded at the import's time instead of their recordedAt (it is before a time
    /// already in the store or the lines before), and the first of them.
    var restamped = 0
    var firstRestamped: Int?
    /// The first line from which every event is recorded at the import's time (an activity
    /// line, or a line without a recordedAt or with one that would go back): recording times
    /// never go back, so after it, no line keeps its own.
    var restampFrom: Int?
    /// For each batch the appending pass writes (``ImportBatching``), the input's checksum
    /// through its last line.
    var batchChecksums: [UInt32] = []
}

/// Where an import cuts its events into atomic batches: at most `size` events, all activity
/// lines or all lines of other entity types. The checking pass and the appending pass cut
/// alike, so that each batch's bytes can be compared.
struct ImportBatching {
    let size: Int
    private var count = 0
    private var activities = false

    init(size: Int) { self.size = size }

    /// Counts an event line; true when it starts a new batch (the one before is complete).
    mutating func startsBatch(activities: Bool) -> Bool {
        if count == 0 || count == size || activities != self.activities {
            (count, self.activities) = (1, activities)
            return true
        }
        count += 1
        return false
    }
}

/// The lines of an input that an import appends: not blank (counted), not imported earlier,
/// trimmed of the white space around them.
struct ImportEventLines {
    private var lines: ImportInput.Lines
    private let importedEarlier: Int
    /// Blank lines read so far.
    private(set) var blank = 0
    /// The number of the last line read.
    var number: Int { lines.number }
    /// The input's checksum through the last line read (``ImportInput/Lines/checksum``).
    var checksum: UInt32 { lines.checksum }

    init(_ lines: ImportInput.Lines, importedEarlier: Int) {
        self.lines = lines
        self.importedEarlier = importedEarlier
    }

    /// The next event line and its number, or `nil` after the last.
    /// - Parameter interruption: Checked before each line: a signal stops the check there.
    /// - Throws: What reading the input throws; the signal's ``ToolError`` (exit 130 or 143).
    mutating func next(interruption: Interruption? = nil) throws -> (line: Int, text: Substring)? {
        while true {
            if let report = interruption?.report {
                throw ToolError(report.exit, "interrupted (\(report.name)) while checking \(lines.inputName), before anything was written")
            }
            guard var line = try lines.next() else { return nil }
            // A UTF-8 byte order mark (what Windows editors write first) is no JSON: the first
            // line is read without it, as JSON readers may (RFC 8259 §8.1). The input's
            // checksum, which import markers name, still covers it.
            if lines.number == 1, line.unicodeScalars.first == "\u{FEFF}" { line.unicodeScalars.removeFirst() }
            let trimmed = Self.trimmed(line)
            if trimmed.isEmpty { blank += 1; continue }
            if lines.number <= importedEarlier { continue }
            return (lines.number, trimmed)
        }
    }

    /// What a refused line's message adds when the line holds a carriage return: with CR LF
    /// (Windows) line ends, which import reads as no line break (Docs/CLI.md), its lines ran
    /// together; with CR alone (classic Mac OS), the whole input is one line.
    static func carriageReturnHint(_ line: Substring) -> String {
        let bytes = line.utf8
        guard let first = bytes.firstIndex(of: 0x0D) else { return "" }
        if bytes.index(after: first) < bytes.endIndex, bytes[bytes.index(after: first)] == 0x0A {
            return "\n(the input has CR LF line ends, which import does not read as line breaks: convert it first, for example with tr -d '\\r')"
        }
        return "\n(the input has carriage returns where lines end, which import does not read as line breaks: convert them first, for example with tr '\\r' '\\n')"
    }

    /// `line` without the white space and line breaks around it. JSON begins and ends with a
    /// printable ASCII character, which is no white space: Foundation's trimming (slow beside
    /// the rest) only runs when it has something to trim.
    static func trimmed(_ line: String) -> Substring {
        if let first = line.utf8.first, let last = line.utf8.last, (0x21...0x7E).contains(first), (0x21...0x7E).contains(last) {
            return line[...]
        }
        return Substring(line.trimmingCharacters(in: .whitespacesAndNewlines))
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
                if EntityJSON.isDeletion(envelope.eventType) { deleted.insert(envelope.stream) } else { deleted.remove(envelope.stream) }
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

    /// Parses an import line (trimmed, not blank): an event of any entity type (it has a
    /// top-level `"stream"`), else an activity line.
    /// - Parameters:
    ///   - line: The line.
    ///   - lenient: Ignore fields the schema does not know.
    ///   - storableOnly: Refuse metadata the import cannot store
    ///     (``EntityJSON/requireStorableMetadata(_:)``); the appending pass reads lines
    ///     checked already.
    /// - Throws: ``ActivityJSON/LineError`` saying what is wrong with the line.
    init(parsing line: Substring, lenient: Bool, storableOnly: Bool = false) throws(ActivityJSON.LineError) {
        if EntityJSON.isEntityLine(line) {
            let imported = try EntityJSON.parseLine(line, lenient: lenient)
            if storableOnly { try EntityJSON.requireStorableMetadata(imported.metadata) }
            self = .entity(imported)
            return
        }
        let event = try ActivityJSON.parseLine(line, lenient: lenient)
        if storableOnly { try EntityJSON.requireStorableMetadata(try EntityJSON.activityLineMetadata(line)) }
        self = .activity(event)
    }
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
    /// delete), summed up per entity type: a generic repository of the type fails to open on
    /// one. Whether the type is a repository's is known only after every line (and the store)
    /// is read, so each type keeps its first such line, its first whose payload is shaped as a
    /// `Codable` field event's, and how many of those: never the lines themselves (100,000
    /// streams starting with a field event kept 100,000 payloads through the checking pass).
    private(set) var fieldEventsWithoutEntity: [String: FieldEventsWithoutEntity] = [:]

    /// One entity type's part of ``fieldEventsWithoutEntity``.
    struct FieldEventsWithoutEntity {
        /// A line: its number, its stream and its event type.
        struct Line {
            var number: Int
            var stream: StreamID
            var eventType: String
        }
        /// The first such line of the type.
        var first: Line
        /// The first whose payload is shaped as a field event's (`{"value": …}`).
        var firstFieldShaped: Line?
        /// How many lines have such a payload.
        var fieldShapedCount = 0
    }

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
        let first = fieldEventsWithoutEntity
            .filter { type, _ in repositoryTypes.contains(type) || storeTypes.contains(type) }
            .map(\.value.first)
            .min { $0.number < $1.number }
        guard let first else { return nil }
        let type = first.stream.entityType
        return (first.number, ActivityJSON.LineError(message: "\(first.eventType) is a field event (\(type) is a generic repository's type) and sets one property of an existing entity, but \(first.stream) has no entity at that point (the line would be its first event, or follow its delete): the application could not open the store (noEntityForFieldEvent). Import the stream's \(type).added first"))
    }

    /// The lines of ``fieldEventsWithoutEntity`` of a type nothing shows is a repository's, whose
    /// payload is shaped as a `Codable` field event's (`{"value": …}`): imported, but said on
    /// stderr, as an application that registers the event could not open the store. One
    /// warning per type, at its first such line, counting the others (one per stream start
    /// gave 100,000 lines for 100,000 streams); in the order of those first lines.
    func fieldEventWarnings(storeTypes: Set<String>) -> [(line: Int, message: String)] {
        fieldEventsWithoutEntity
            .filter { type, _ in !repositoryTypes.contains(type) && !storeTypes.contains(type) }
            .compactMap { _, lines in lines.firstFieldShaped.map { ($0, lines.fieldShapedCount - 1) } }
            .sorted { $0.0.number < $1.0.number }
            .map { first, others in
                let type = first.stream.entityType
                let more = others == 0 ? "" : " (and \(others) more line\(others == 1 ? "" : "s") of \(type) like it)"
                return (first.number, "\(first.eventType) has a field event's payload ({\"value\": …}) and is the first event of \(first.stream) (or follows its delete)\(more); nothing shows \(type) is a generic repository's type, so it is imported as the application's own event. If it is a FieldEvent, an application registering it could not open the store (noEntityForFieldEvent)")
            }
    }

    /// The version of `stream` after the lines checked so far (the store's, before any line of it).
    /// - Throws: What reading the store's version throws.
    func version(of stream: StreamID) throws -> UInt64 {
        try overlay[stream]?.version ?? stored(stream)
    }

    /// Checks one line and counts it.
    /// - Parameter line: The line's number, to name it in ``fieldEventsWithoutEntity``.
    /// - Throws: ``ActivityJSON/LineError`` for a line out of order; what reading the store's
    ///   version throws, as it is (a storage failure is not bad input).
    mutating func check(_ imported: EntityJSON.ImportedEvent, line: Int = 0) throws {
        let stream = imported.event.stream
        let eventType = imported.event.eventType
        guard stream.entityType != ActivityEventCodec.entityType else {
            // The kernel's tombstones of activities are event lines (export writes them so: an
            // activity line has no `$purged`). Activity lines carry no version, so an activity
            // stream's is not tracked here: the tombstone is appended without one.
            guard Tombstone(eventType: eventType) != nil else {
                throw ActivityJSON.LineError(message: "stream type \"\(stream.entityType)\" is the activities': write an activity event line (see Docs/CLI.md)")
            }
            return
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
        var after = exists
        if !repositoryTypes.contains(stream.entityType), EntityJSON.showsRepositoryType(eventType, of: stream.entityType, payload: imported.event.payload) {
            repositoryTypes.insert(stream.entityType)
        }
        if EntityJSON.isRepositoryEvent(eventType, of: stream.entityType) {
            after = !EntityJSON.isDeletion(eventType)
        } else if exists == false, EntityJSON.fieldEventName(eventType, of: stream.entityType, payload: imported.event.payload) != nil {
            let type = stream.entityType
            let here = FieldEventsWithoutEntity.Line(number: line, stream: stream, eventType: eventType)
            var lines = fieldEventsWithoutEntity[type] ?? FieldEventsWithoutEntity(first: here)
            if EntityJSON.isFieldEventPayload(imported.event.payload) {
                if lines.firstFieldShaped == nil { lines.firstFieldShaped = here }
                lines.fieldShapedCount += 1
            }
            fieldEventsWithoutEntity[type] = lines
        }
        overlay[stream] = (current + 1, after)
    }
}
