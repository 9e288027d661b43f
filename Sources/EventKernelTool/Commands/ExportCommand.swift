import Activities
import ArgumentParser
import EventKernel
import Foundation

struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export", abstract: "Write the store as JSON Lines: every event, or the current activities.",
        discussion: """
            Always JSON Lines (the import schema): --format chooses which rows, events or activities.

            Examples:
              eventkernel export demo --output events.jsonl
              eventkernel export demo --format activities --output activities.jsonl
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case events, activities }

    @OptionGroup var store: ReadableStoreOptions
    @Option(help: "events: one event per line with position and recordedAt; activities: one activity per line.")
    var format: Format = .events
    @Option(help: ArgumentHelp("Write to FILE instead of stdout.", valueName: "FILE"))
    var output: String?

    func run() async throws {
        let repository = try await StoreLocation.openReadOnly(store)
        var sink: FileHandle = .standardOutput
        if let output {
            guard FileManager.default.createFile(atPath: output, contents: nil) else {
                throw ToolError(.io, "cannot create \(output)")
            }
            guard let handle = FileHandle(forWritingAtPath: output) else { throw ToolError(.io, "cannot open \(output) for writing") }
            sink = handle
        }
        var buffer = ""
        buffer.reserveCapacity(1 << 20)
        var lines = 0
        func emit(_ line: String) {
            buffer += line
            buffer += "\n"
            lines += 1
            if buffer.utf8.count >= 1 << 20 { sink.write(Data(buffer.utf8)); buffer.removeAll(keepingCapacity: true) }
        }
        switch format {
        case .activities:
            for model in repository.projection.read({ $0.all(sortedBy: .oldestFirst) }) { emit(ActivityJSON.activity(model)) }
        case .events:
            let codec = ActivityEventCodec()
            try withToolErrorsSync(store: store.url) {
                try repository.store.forEachEnvelope(from: 0, through: nil) { envelope in
                    guard ActivityEventCodec.isActivityEvent(envelope) else { return true }
                    emit(ActivityJSON.event(try codec.decode(envelope), position: envelope.position, recordedAt: envelope.timestamp))
                    return true
                }
            }
        }
        sink.write(Data(buffer.utf8))
        if let output {
            try? sink.close()
            Output.note("exported \(Output.count(lines)) \(format == .events ? "events" : "activities") to \(output)")
        }
    }
}
