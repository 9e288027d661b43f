import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation

struct RepairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "repair",
        abstract: "Cut the log at its first damage so that it opens again (needs --yes).",
        discussion: """
            Everything from the first damaged batch on is removed (kept under recovered/). Run verify first.

            Examples:
              eventkernel verify demo
              eventkernel repair demo --yes
            """)

    @OptionGroup var store: StoreOptions
    @Flag(help: "Confirm: drop every event from the first damaged batch on.") var yes = false

    func run() async throws {
        try StoreLocation.requireStore(store.url)
        try StoreLocation.refuseBackup(store.url, command: "repair")
        guard yes else {
            throw ToolError(.badInput, "repair removes every event from the first damaged batch to the end of the log (the removed bytes are kept under \(store.url.path)/recovered/). Run `eventkernel verify` to see the damage, then `eventkernel repair --yes` to proceed")
        }
        let report = try withToolErrorsSync(store: store.url) { try SegmentedLog.repair(at: store.url) }
        guard let cut = report.cut else {
            // The log is intact; its snapshots may still record events it lost without a trace.
            if let contradiction = Self.snapshotContradiction(store.url) {
                let epoch = try withToolErrorsSync(store: store.url) { try SegmentedLog.startNewHistoryEpoch(at: store.url) }
                print("the log is intact, but \(contradiction.file ?? "a snapshot") records events it no longer holds (\(contradiction.message))")
                print("accepted the loss: started history epoch \(epoch); such snapshots are no longer used, and the next writer removes them")
                return
            }
            print("no damage in the log: nothing was dropped (repair mends only the log; damage `eventkernel verify` reports in a snapshot or a consumer's file is mended as its message says)")
            return
        }
        print("cut at: \(cut)")
        let range = report.firstDroppedPosition.map { " (positions \($0)..<\($0 + report.droppedRecords))" } ?? ""
        print("dropped: \(report.droppedRecordsAreExact ? "" : "at least ")\(Output.count(report.droppedRecords)) events\(range), \(Output.bytes(report.droppedBytes))")
        for file in report.removedSideFiles { print("removed: \(file)") }
        for file in report.rewrittenFiles { print("rewrote: \(file)") }
        for file in report.savedFiles { print("saved: \(file)") }
    }

    /// The damage a snapshot reports against the log, if opening the store meets one.
    static func snapshotContradiction(_ directory: URL) -> LogError? {
        do {
            let repository = try EventSourcedActivityRepository.openReadOnly(at: directory, logger: StoreLocation.logger)
            _ = repository
            return nil
        } catch let error as RepositoryError {
            guard let log = error.logError, log.code == .corruption, log.file?.contains("/snapshots/") == true else { return nil }
            return log
        } catch {
            return nil
        }
    }
}
