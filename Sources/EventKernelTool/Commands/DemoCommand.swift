import Activities
import ActivityWorkload
import ArgumentParser
import EventKernel
import EventLog
import Foundation
import KernelPrimitives

/// Generates a realistic history, appends it, reopens from the snapshot, replays in full,
/// runs sample queries, verifies, and prints a summary.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo", abstract: "Generate, store, reopen, replay, query and verify a realistic activity history.",
        discussion: """
            Every event is recorded when the demo runs: the activities' own dates span two years before that, so \
            replay --as-of (recording time) sees them all or none; query by their dates.

            Examples:
              eventkernel demo demo --activities 50000
              eventkernel demo --dir /tmp/ek-demo --activities 100000 --buffered --reset
            """)

    @OptionGroup var store: StoreOptions
    @Option(help: "Activities to generate.") var activities = 1_000_000
    @Option(help: "The generator's seed.") var seed: UInt64 = 42
    @Flag(help: "Buffered durability (acknowledge after write(2); sync every 100 ms) instead of fdatasync per batch.") var buffered = false
    @Flag(help: "Delete the store at --dir first (only its own files; a directory holding anything else is refused).") var reset = false
    @Option(help: "Events per atomic batch.") var batchSize = 1_000
    @Option(help: "Repetitions of each sample query.") var repetitions = 2_000

    func validate() throws {
        guard activities > 0 else { throw ValidationError("--activities must be positive") }
        guard batchSize > 0, repetitions > 0 else { throw ValidationError("--batch-size and --repetitions must be positive") }
    }

    func run() async throws {
        let directory = store.url
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw ToolError(.storeUnavailable, "\(directory.path) is a file, not a directory: the demo needs a fresh directory (pass another --dir)")
            }
            // Hidden files (.DS_Store, .keep) are no store's and in no store's way.
            let contents = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { !$0.hasPrefix(".") }
            if !contents.isEmpty {
                // Before --reset: a backup's files are a store's, and removing them would lose it.
                try StoreLocation.refuseBackup(directory, command: "demo")
                guard reset else {
                    throw ToolError(.badInput, "\(directory.path) is not empty; the demo needs a fresh directory (pass --reset to delete the store there first, or another --dir)")
                }
                // Only a store's own files are deleted, and only when nothing else is there:
                // a directory of other files is refused whole (exit 2), as import refuses it.
                let removal = try withToolErrorsSync(store: directory) { try SegmentedLog.removeStore(at: directory) }
                let files = removal.removed.filter { !$0.hasSuffix("/") }.count
                Output.note("--reset: deleted the store at \(directory.path) (\(files) file\(files == 1 ? "" : "s"))" +
                            (removal.kept.isEmpty ? "" : "; kept \(removal.kept.joined(separator: ", "))"))
            }
        }

        // 1. Generate and append. The writer is gone when this returns: no step below holds
        // more than one copy of the state (issue 31: every command peaks within 1.5x of the open
        // store; the writer, the snapshot open and the replay alive together made 3.6x).
        let generator = ActivityHistoryGenerator(seed: seed, activityCount: activities)
        let (events, liveActivities, appendSeconds) = try await appendHistory(from: generator, into: directory)

        // 2. Startup from the snapshot vs a full replay, one at a time.
        let snapshotSeconds: Double
        do {
            let (reopened, seconds) = try measure { try StoreLocation.openReadOnly(directory) }
            snapshotSeconds = seconds
            guard reopened.count == liveActivities else {
                throw ToolError(.damage, "state mismatch: \(liveActivities) activities written, \(reopened.count) after snapshot startup")
            }
        }
        FreedMemory.release()
        // Optional so that it goes before the verify below, which decodes every snapshot (a
        // second state beside it was the demo's peak: 1.6x of the open store at 1M).
        var (replayed, replaySeconds): (EventSourcedActivityRepository?, Double) = try measure {
            try withToolErrorsSync(store: directory) { () throws -> EventSourcedActivityRepository in
                let log = try SegmentedLog.openReadOnly(at: directory)
                return try EventSourcedActivityRepository(store: EventStore(log: log, directory: nil, snapshotPolicy: .never, logger: StoreLocation.logger))
            }
        }
        guard replayed?.count == liveActivities else {
            throw ToolError(.damage, "state mismatch: \(liveActivities) activities written, \(replayed?.count ?? 0) after full replay")
        }
        print("reopened from snapshot in \(Output.seconds(snapshotSeconds)); full replay in \(Output.seconds(replaySeconds))")
        Output.flush()

        // 3. Sample queries at random points of the history.
        let historyStart = generator.start
        let span = generator.span
        var rng = SeededRandom(seed: seed ^ 0x5EED)
        func randomDate() -> Date { historyStart.addingTimeInterval(Double.random(in: 0..<span, using: &rng)) }
        let week: TimeInterval = 7 * 86_400
        var queryRows: [[String]] = []
        var queryRates: [(String, Double)] = []
        func time(_ name: String, _ body: (Date) throws -> Int) throws {
            var total = 0
            let dates = (0..<repetitions).map { _ in randomDate() }
            let (_, seconds) = try measure { for d in dates { total += try body(d) } }
            let rate = Double(repetitions) / seconds
            queryRates.append((name, rate))
            queryRows.append([name, Output.count(repetitions), Output.rate(rate), String(format: "%.1f µs", seconds / Double(repetitions) * 1e6),
                              String(format: "%.1f", Double(total) / Double(repetitions))])
        }
        let twoTypes: Set<ActivityType> = [.sleep, "feeding"]
        try withToolErrorsSync(store: directory) {
            try time("7-day window, newest 50") { d in
                try replayed!.activities(matching: ActivityQuery(afterDate: d - week, beforeDate: d, limit: 50, sortOrder: .newestFirst)).count
            }
            try time("7-day window, 2 types, newest 50") { d in
                try replayed!.activities(matching: ActivityQuery(afterDate: d - week, beforeDate: d, types: twoTypes, limit: 50, sortOrder: .newestFirst)).count
            }
            try time("starting in a 1-day range") { d in
                try replayed!.activities(in: ActivityRangeQuery(.startingIn, from: d - 86_400, to: d)).count
            }
            try time("overlapping a 1-hour range") { d in
                try replayed!.activities(in: ActivityRangeQuery(.overlapping, from: d - 3_600, to: d)).count
            }
        }

        // 4. Verify, the replayed state released first.
        replayed = nil
        FreedMemory.release()
        let (check, verifySeconds) = try measure { try StoreCheck.run(directory, checkProjection: false) }

        // 5. Summary.
        let disk = StoreLocation.diskUsage(directory)
        let snapshotBytes = StoreLocation.diskUsage(directory, under: "snapshots")
        let logBytes = check.log.segments.reduce(Int64(0)) { $0 + $1.fileBytes }
        let ratio = check.log.storedPayloadBytes > 0 ? Double(check.log.uncompressedPayloadBytes) / Double(check.log.storedPayloadBytes) : 1
        print("")
        print(Output.table(["metric", ">value"], [
            ["activities (live)", Output.count(liveActivities)],
            ["events", Output.count(events)],
            ["batches", Output.count(check.log.batches)],
            ["bytes on disk (total)", Output.bytes(disk)],
            ["  log segments", Output.bytes(logBytes)],
            ["  snapshots", Output.bytes(snapshotBytes)],
            ["log bytes per activity", String(format: "%.1f B", Double(logBytes) / Double(max(1, liveActivities)))],
            ["compression ratio (LZ4)", String(format: "%.2f×", ratio)],
            ["append rate (\(buffered ? "buffered" : "synced"))", Output.rate(Double(events) / appendSeconds)],
            ["append time", Output.seconds(appendSeconds)],
            ["startup from snapshot", Output.seconds(snapshotSeconds)],
            ["startup by full replay", Output.seconds(replaySeconds)],
            ["replay / snapshot", String(format: "%.1f×", replaySeconds / max(snapshotSeconds, 1e-9))],
            ["verify (every byte)", Output.seconds(verifySeconds)],
            ["integrity", check.isIntact ? "intact" : "DAMAGED"],
        ]))
        print("")
        print(Output.table(["query", ">runs", ">rate", ">mean", ">avg results"], queryRows))
        for problem in check.problems { print(problem.text) }
        if !check.isIntact { throw ExitCode(ToolExit.damage.rawValue) }
    }

    /// Appends `generator`'s history to a new store at `directory` in batches of `batchSize`
    /// events, then closes it (writing its snapshot).
    /// - Returns: The events appended, the activities live at the end and the appending time.
    private func appendHistory(from generator: ActivityHistoryGenerator, into directory: URL) async throws
        -> (events: Int, live: Int, appendSeconds: Double) {
        var configuration = EventStore.Configuration()
        if buffered { configuration.log.durability = .buffered }
        let repository = try StoreLocation.openWriter(directory, command: "demo", create: true, configuration: configuration)
        print("Generating \(Output.count(activities)) activities (seed \(seed)) into \(directory.path), \(buffered ? "buffered" : "synced") durability, batches of \(Output.count(batchSize)) events")
        Output.flush()
        var progress = ProgressBar("appending", total: activities)
        var chunk: [ActivityEvent] = []
        chunk.reserveCapacity(batchSize)
        var events = 0
        var added = 0
        let start = DispatchTime.now().uptimeNanoseconds
        try await withToolErrors(store: directory) {
            for operation in generator {
                switch operation {
                case .add(let model): chunk.append(.added(model)); added += 1
                case .update(let model): chunk.append(.updated(model))
                case .end(let id, let at): chunk.append(.ended(id: id, at: at))
                case .delete(let id): chunk.append(.deleted(id: id))
                }
                if chunk.count == batchSize {
                    try await repository.apply(chunk)
                    events += chunk.count
                    chunk.removeAll(keepingCapacity: true)
                    progress.update(added)
                }
            }
            if !chunk.isEmpty { try await repository.apply(chunk); events += chunk.count }
        }
        let appendSeconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        progress.finish()
        let live = repository.count
        let (_, closeSeconds) = try await measure { try await withToolErrors(store: directory) { try await repository.close() } }
        print("appended \(Output.count(events)) events in \(Output.seconds(appendSeconds)); closed (snapshot written) in \(Output.seconds(closeSeconds))")
        Output.flush()
        return (events, live, appendSeconds)
    }
}
