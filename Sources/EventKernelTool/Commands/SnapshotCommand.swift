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
        let repository = try StoreLocation.openWriter(store.url, create: false)
        try await withToolErrors(store: store.url) {
            try await repository.store.writeSnapshots()
            try await repository.close()
        }
        let newest = StoreCheck.inspectSnapshots(store.url, decodeState: false).filter { $0.error == nil }.max { ($0.nextPosition ?? 0) < ($1.nextPosition ?? 0) }
        print("snapshot written: \(newest.map { "\(($0.file as NSString).lastPathComponent) (position \($0.nextPosition ?? 0), \(Output.bytes($0.bytes)))" } ?? "none")")
    }
}
