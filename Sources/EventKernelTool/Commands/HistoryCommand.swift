import Activities
import ArgumentParser
import Foundation

struct HistoryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history", abstract: "Every event of one activity, with position, time recorded and version.")

    @OptionGroup var store: ReadableStoreOptions
    @Argument(help: "The activity's id (a UUID).") var id: String
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        guard let uuid = UUID(uuidString: id) else { throw ToolError(.badInput, "\"\(id)\" is not a UUID") }
        let repository = try await StoreLocation.openReadOnly(store)
        let entries = try withToolErrorsSync(store: store.url) { try repository.history(of: uuid) }
        guard !entries.isEmpty else { throw ToolError(.badInput, "no activity with id \(uuid.uuidString) has any event in \(store.name)") }
        if json {
            let objects: [[String: Any]] = entries.map { e in
                var o: [String: Any] = ["position": e.position, "recordedAt": ISODate.format(e.timestamp),
                                        "version": e.entityVersion, "event": ActivityJSON.name(e.event)]
                switch e.event {
                case .added(let m), .updated(let m): o["activity"] = ActivityJSON.object(m)
                case .ended(_, let at): o["at"] = ISODate.format(at)
                case .deleted: break
                }
                return o
            }
            print(Output.json(["id": uuid.uuidString, "events": objects] as [String: Any]))
            return
        }
        print("History of \(uuid.uuidString)")
        print(Output.table([">position", "recorded at", ">version", "event", "details"], entries.map { e in
            [String(e.position), ISODate.format(e.timestamp), String(e.entityVersion), ActivityJSON.name(e.event), ActivityJSON.details(e.event)]
        }))
    }
}

func withToolErrorsSync<T>(store: URL? = nil, _ body: () throws -> T) throws -> T {
    do { return try body() } catch { throw ToolError.from(error, store: store) }
}
