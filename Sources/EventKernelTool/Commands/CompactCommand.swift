import ArgumentParser
import EventKernel
import Foundation

/// `eventkernel compact`: `EventStore.compact()`, the one path that removes purged streams'
/// events, with its report.
struct CompactCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Remove the events of purged streams from the sealed segments, online (needs --yes).",
        discussion: """
            Every purged stream whose $purged event lies in a sealed segment is forgotten: its events are removed, \
            its $purged event is replaced by a $forgotten receipt at the same position (the entity type, when and by \
            whom, not the id), and the id stays refused, by its digest (SHA-256's first 16 bytes), across reopens and full replays. \
            Positions do not move: the log keeps gaps. Each rewritten segment replaces the old one atomically; a \
            crash leaves one or the other. Snapshots older than the compaction are replaced (they may name a \
            purged id). When a purge lies in the active segment, that segment is sealed first, so every purge \
            committed before the compaction is forgotten. \
            `eventkernel inspect` shows how many purged streams a compaction would forget now. Docs/Forgetting.md \
            says what is gone and what the audit trail keeps.

            Takes the writer lock for as long as it runs (a store another process writes is refused: compact it \
            from that process, EventStore.compact()).

            Examples:
              eventkernel compact demo --yes
              eventkernel compact --dir demo --yes --json
            """)

    @OptionGroup var store: StoreOptions
    @Flag(help: "Confirm: the purged streams' events are removed for good (a backup made before keeps them).")
    var yes = false
    @Flag(help: "Print the report as JSON.")
    var json = false

    func validate() throws {
        guard yes else {
            throw ValidationError("compaction removes the purged streams' history for good: add --yes to confirm (`eventkernel inspect` shows what it would forget)")
        }
    }

    func run() async throws {
        let repository = try StoreLocation.openWriter(store.url, command: "compact", create: false)
        let report: CompactionReport
        do {
            report = try await repository.store.compact()
            try await repository.close()
        } catch {
            try? await repository.close()
            throw ToolError.from(error, store: store.url)
        }
        if json {
            print(Output.json([
                "store": store.url.path, "streamsForgotten": report.streamsForgotten, "streamsPending": report.streamsPending,
                "eventsRemoved": report.eventsRemoved, "receiptsWritten": report.receiptsWritten,
                "segmentsRead": report.segmentsRead, "segmentsRewritten": report.segmentsRewritten,
                "bytesBefore": report.bytesBefore, "bytesAfter": report.bytesAfter, "snapshotsRemoved": report.snapshotsRemoved,
            ]))
            return
        }
        let saved = report.bytesBefore - report.bytesAfter
        let share = report.bytesBefore > 0 ? String(format: " (%.1f%%)", 100 * Double(saved) / Double(report.bytesBefore)) : ""
        print("compacted \(store.url.path): \(Output.count(report.streamsForgotten)) purged stream\(report.streamsForgotten == 1 ? "" : "s") forgotten")
        print(Output.table(["", ">"], [
            ["events removed", Output.count(report.eventsRemoved)],
            ["$purged events replaced by receipts", Output.count(report.receiptsWritten)],
            ["segments rewritten", "\(Output.count(report.segmentsRewritten)) of \(Output.count(report.segmentsRead)) read"],
            ["segment bytes", "\(Output.bytes(report.bytesBefore)) -> \(Output.bytes(report.bytesAfter)), \(Output.bytes(saved)) freed\(share)"],
            ["older snapshot files removed", Output.count(report.snapshotsRemoved)],
            ["purges committed meanwhile (the next compaction's)", Output.count(report.streamsPending)],
        ]))
    }
}
