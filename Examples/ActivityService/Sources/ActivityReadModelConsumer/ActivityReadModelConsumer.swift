import ActivityReadModel
import ArgumentParser
import EventKernel
import Foundation

/// Keeps a SQLite read model (per-day, per-type activity counts and minutes) up to date with an
/// activity store, exactly once: see `ActivityReadModel` and Docs/Consumers.md.
@main
struct ActivityReadModelConsumer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ActivityReadModelConsumer",
        abstract: "Apply an activity store's events to a SQLite read model, exactly once.",
        discussion: "Kill it at any instant: the next run resumes from the checkpoint the database holds.")

    @Option(help: "The activity store's directory (opened for reading, alongside its writer).")
    var store: String

    @Option(help: "The read model's SQLite file (created if needed).")
    var database: String

    @Option(help: "The consumer's name (its checkpoint row).")
    var name = "activity-read-model"

    @Option(help: "The most events per transaction (default 4,096: the consumer's readBatchSize).")
    var batchSize: Int?

    @Flag(help: "Keep following the store's writer until interrupted (default: stop once caught up).")
    var follow = false

    func run() async throws {
        let readModel = try ActivityReadModel(path: database, consumerName: name)
        let eventStore = try ActivityReadModel.openStore(readingFrom: URL(filePath: store, directoryHint: .isDirectory))
        let checkpoint = try await readModel.catchUp(with: eventStore, following: follow, batchSize: batchSize)
        try await eventStore.close()
        print("\(name): applied through position \(checkpoint)")
    }
}
