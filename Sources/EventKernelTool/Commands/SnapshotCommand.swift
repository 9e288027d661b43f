import ArgumentParser
import Foundation

struct SnapshotCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapshot", abstract: "Write a snapshot of the projections now (takes the writer lock briefly).",
        discussion: """
            Examples:
              eventkernel snapshot demo
              eventkernel snapshot --dir demo
            """)

    @OptionGroup var store: StoreOptions

    func run() async throws {
        let repository = try StoreLocation.openWriter(store.url, command: "snapshot", create: false)
        let position = repository.store.log.bounds.nextPosition
        try await withToolErrors(store: store.url) {
            try await repository.store.writeSnapshots()
            try await repository.close()
        }
        // Every projection's file at the position just written (the store's entity versions and
        // each registered projection): the files this command wrote, or rewrote in place.
        let written = StoreCheck.inspectSnapshots(store.url, decodeState: false)
            .filter { $0.error == nil && $0.nextPosition == position }
        guard !written.isEmpty else { throw ToolError(.io, "no snapshot file at position \(position) was found in \(store.url.path)/snapshots after writing") }
        let total = written.reduce(Int64(0)) { $0 + $1.bytes }
        print("snapshot written at position \(position): \(written.count) file\(written.count == 1 ? "" : "s"), \(Output.bytes(total))")
        print(Output.table(["file", "projection", ">bytes"], written.map { entry in
            ["snapshots/" + (entry.file as NSString).lastPathComponent, entry.projection ?? "?", Output.bytes(entry.bytes)]
        }))
    }
}
