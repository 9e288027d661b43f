import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct TailCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tail", abstract: "Print events from a position on; with --follow, keep printing what writers append.")

    @OptionGroup var store: ReadableStoreOptions
    @Flag(help: "Keep polling for new events (every 200 ms) until interrupted.") var follow = false
    @Option(help: ArgumentHelp("Start at position N (default 0).", valueName: "N")) var from: UInt64 = 0
    @Flag(help: "One JSON object per line (the export schema, plus version).") var json = false

    func run() async throws {
        let log = try await StoreLocation.openLog(store)
        signal(SIGINT) { _ in terminate(0) }
        signal(SIGPIPE) { _ in terminate(0) }
        let codec = ActivityEventCodec()
        var next = from
        while true {
            let end = log.bounds.nextPosition
            if next < end {
                try withToolErrorsSync(store: store.url) {
                    try log.forEachRecord(from: next, through: end - 1) { view in
                        let envelope = try EventEnvelope(view)
                        print(line(envelope, codec))
                        return true
                    }
                }
                next = end
                Output.flush()
            }
            guard follow else { return }
            try await Task.sleep(for: .milliseconds(200))
            // A directory is read again; a PostgreSQL log also learns by notification.
            _ = try withToolErrorsSync(store: store.url) { try log.refresh() }
        }
    }

    private func line(_ envelope: EventEnvelope, _ codec: ActivityEventCodec) -> String {
        guard ActivityEventCodec.isActivityEvent(envelope), let event = try? codec.decode(envelope) else {
            return json
                ? "{\"position\":\(envelope.position),\"recordedAt\":\(ActivityJSON.escape(ISODate.format(envelope.timestamp))),\"eventType\":\(ActivityJSON.escape(envelope.eventType)),\"entity\":\(ActivityJSON.escape(envelope.entityID.description))}"
                : "\(envelope.position)  \(ISODate.format(envelope.timestamp))  \(envelope.eventType)  \(envelope.entityID)"
        }
        if json { return ActivityJSON.event(event, position: envelope.position, recordedAt: envelope.timestamp, version: envelope.entityVersion) }
        return "\(envelope.position)  \(ISODate.format(envelope.timestamp))  \(ActivityJSON.name(event))  \(event.activityID.uuidString)  \(ActivityJSON.details(event))"
    }
}
