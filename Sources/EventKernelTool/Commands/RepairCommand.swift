import ArgumentParser
import EventLog
import Foundation

struct RepairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "repair",
        abstract: "Cut the log at its first damage so that it opens again (needs --yes).",
        discussion: "Everything from the first damaged batch on is removed (kept under recovered/). Run verify first.")

    @OptionGroup var store: StoreOptions
    @Flag(help: "Confirm: drop every event from the first damaged batch on.") var yes = false

    func run() async throws {
        try StoreLocation.requireStore(store.url)
        guard yes else {
            throw ToolError(.badInput, "repair removes every event from the first damaged batch to the end of the log (the removed bytes are kept under \(store.url.path)/recovered/). Run `eventkernel verify` to see the damage, then `eventkernel repair --yes` to proceed")
        }
        let report = try withToolErrorsSync(store: store.url) { try SegmentedLog.repair(at: store.url) }
        guard let cut = report.cut else {
            print("no damage found: nothing was dropped")
            return
        }
        print("cut at: \(cut)")
        print("dropped: \(Output.count(report.droppedRecords)) events\(report.firstDroppedPosition.map { " from position \($0)" } ?? ""), \(Output.bytes(report.droppedBytes))")
        for file in report.savedFiles { print("saved: \(file)") }
    }
}
