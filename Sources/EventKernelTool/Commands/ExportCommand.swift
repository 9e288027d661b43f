import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation
import KernelPrimitives

struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export", abstract: "Write the store as JSON Lines: every event, or the current activities.",
        discussion: """
            Always JSON Lines (the import schema): --format chooses which rows, events or activities. Events \
            are every event of every entity type: activities in the activity schema, any other type's with \
            its stream, version and payload decoded to JSON (Docs/CLI.md, "Events of any entity type").

            Examples:
              eventkernel export demo --output events.jsonl
              eventkernel export demo --format activities --output activities.jsonl
              eventkernel export demo | eventkernel import demo-copy -
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case events, activities }

    @OptionGroup var store: ReadableStoreOptions
    @Option(help: "events: one event per line with position and recordedAt; activities: one activity per line.")
    var format: Format = .events
    @Option(help: ArgumentHelp("Write to FILE instead of stdout.", valueName: "FILE"))
    var output: String?

    func run() async throws {
        // Events need only the log: no projection (its snapshot restored or the log replayed)
        // and no version table.
        let repository = format == .activities ? try await StoreLocation.openReadOnly(store) : nil
        let log = format == .events ? try await StoreLocation.openLog(store) : nil
        if format == .events, store.postgresURL == nil { LogDamage.warnIfDamaged(store.url) }
        var sink: FileHandle = .standardOutput
        if let output {
            // A read-only command never writes into the store: an output among its files (a
            // segment, a snapshot) was truncated and written over, and `verify` then found the
            // store damaged.
            if store.postgresURL == nil, StoreDirectory.isWithin(output, directory: store.url.path) {
                throw ToolError(.badInput, "--output \(output) is inside the store \(store.url.path): export would write over the store's own files; write it outside the store's directory")
            }
            // Opened as a shell's `>` opens it: created when missing, else truncated in place.
            // Never `FileManager.createFile`, which writes a new file and renames it over the
            // path: it replaced a symbolic link with a file, and `--output /dev/null`, run as
            // root, replaced the null device with a regular file (every later reader of
            // /dev/null on the machine got what was written to it).
            let descriptor: Int32
            do { descriptor = try SystemCall.open(output, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o666) } catch {
                throw ToolError(.io, "cannot open \(output) for writing: \(String(cString: strerror(error.errorNumber)))")
            }
            sink = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        }
        // Lines are formatted as bytes into one buffer, written out a megabyte at a time.
        var buffer = JSONBuffer(capacity: 1 << 20 + 4096)
        var lines = 0
        var opaque = OpaquePayloads()
        func endLine() throws {
            buffer.appendByte(0x0A)
            lines += 1
            if buffer.bytes.count >= 1 << 20 { try flush() }
        }
        // A write that failed may have written part of the buffer: nothing is written after it
        // (writing the buffer again would repeat that part).
        var sinkFailed = false
        func flush() throws {
            guard !sinkFailed else { return }
            do { try sink.write(contentsOf: buffer.bytes) } catch {
                sinkFailed = true
                throw ToolError(.io, "cannot write to \(output ?? "standard output"): \(error.localizedDescription)")
            }
            buffer.removeAll()
        }
        // What was formatted before a failure is written too: the lines are whole events.
        do {
        switch format {
        case .activities:
            for model in repository!.projection.read({ $0.all(sortedBy: .oldestFirst) }) {
                ActivityJSON.write(model, to: &buffer)
                try endLine()
            }
        case .events:
            let codec = ActivityEventCodec()
            try withToolErrorsSync(store: store.url) {
                try EventStore.forEachEnvelope(in: log!, from: 0, through: nil) { envelope in
                    // A kernel tombstone, of any type, is written as the kernel's event it is
                    // (`"event":"$purged"`), never as an activity's `deleted`: import takes it
                    // back as the same tombstone, so a purge survives the round trip.
                    guard ActivityEventCodec.isActivityEvent(envelope), Tombstone(eventType: envelope.eventType) == nil else {
                        // Every other entity type's event, decoded without its code (EntityJSON).
                        let undecoded = EntityJSON.write(envelope, to: &buffer)
                        try endLine()
                        if let undecoded { opaque.note(envelope, reason: undecoded.reason, damaged: undecoded.damaged) }
                        return true
                    }
                    do {
                        let event = try codec.decode(envelope)
                        ActivityJSON.write(event, position: envelope.position, recordedAt: envelope.timestamp, metadata: envelope.metadata, to: &buffer)
                    } catch {
                        // Written with its bytes and why, then exit 3 at the end (as tail does):
                        // the events after it are exported too.
                        let reason = "activity event does not decode: \(EntityJSON.describe(error))"
                        EntityJSON.write(envelope, payload: .bytes(reason: reason, damaged: true), to: &buffer)
                        opaque.note(envelope, reason: reason, damaged: true)
                    }
                    try endLine()
                    return true
                }
            }
        }
        } catch {
            try? flush()
            throw error
        }
        try flush()
        if let output {
            try? sink.close()
            Output.note("exported \(Output.count(lines)) \(format == .events ? "events" : "activities") to \(output)")
        }
        opaque.report()
    }
}

/// The events whose payloads export wrote as base64: never in silence. A payload that is not
/// self-describing (a domain's payload codec) is a note, exit 0: the line holds its bytes and
/// import takes them back. One that starts as the binary entity format but does not decode is
/// damage (exit 3), reported after every line was written.
struct OpaquePayloads {
    private(set) var count = 0
    private(set) var damaged = 0
    private var first: String?
    private var firstDamaged: String?

    mutating func note(_ envelope: EventEnvelope, reason: String, damaged isDamaged: Bool) {
        count += 1
        let place = "position \(envelope.position) (\(envelope.stream), \(envelope.eventType)): \(reason)"
        if !isDamaged, first == nil { first = place }
        if isDamaged {
            damaged += 1
            if firstDamaged == nil { firstDamaged = place }
        }
    }

    func report() {
        guard count > 0 else { return }
        if let firstDamaged {
            Output.error("\(Output.count(damaged)) event payload\(damaged == 1 ? " does not decode and was" : "s do not decode and were") written as base64 with a reason; first at \(firstDamaged)")
            DeferredExit.record(.damage)
        }
        if count > damaged, let first {
            Output.note("\(Output.count(count - damaged)) event payload\(count - damaged == 1 ? " is" : "s are") not self-describing and were written as base64 (\"codec\":\"bytes\"); first at \(first)")
        }
    }
}
