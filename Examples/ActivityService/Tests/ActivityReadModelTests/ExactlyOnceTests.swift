import Activities
import ActivityReadModel
import ActivityWorkload
import EventKernel
import EventLog
import Foundation
import GRDB
import Testing

/// The read model of `ActivityReadModel` is exactly once under SIGKILL: its consumer process
/// is killed at random instants, and after every kill the database holds exactly the effects
/// of the events below its checkpoint; a last run ends with every event applied once.
@Suite(.serialized)
struct ExactlyOnceTests {
    /// Kill rounds per test: 10 by default (CI), `EVENTKERNEL_READ_MODEL_KILL_ROUNDS=100` for the bar.
    static let rounds = ProcessInfo.processInfo.environment["EVENTKERNEL_READ_MODEL_KILL_ROUNDS"].flatMap(Int.init) ?? 10

    @Test func everyEventOnceAfterRandomKills() async throws {
        let scratch = try Scratch()
        let repository = try EventSourcedActivityRepository.open(at: scratch.store)
        var workload = Workload(seed: 29)
        try await workload.append(events: 20_000, to: repository)
        let end = repository.store.nextPosition
        #expect(end >= 20_000)

        var rng = SeededRandom(seed: 2929)
        var interrupted = 0
        for _ in 0..<Self.rounds {
            // The whole catch-up takes a few hundred milliseconds in small batches: most kills land inside it.
            let outcome = try runConsumer(scratch, killAfter: .milliseconds(Int.random(in: 5...400, using: &rng)))
            let checkpoint = try ActivityReadModel(path: scratch.database.path).checkpoint() ?? 0
            if outcome == .killed && checkpoint < end { interrupted += 1 }
            try expectAppliedExactly(through: checkpoint, scratch: scratch, repository: repository)
            if checkpoint >= end { try reset(scratch) }
        }
        #expect(interrupted > 0, "no kill landed while the consumer was applying: the test proved nothing")

        #expect(try runConsumer(scratch, killAfter: nil) == .exited(0))
        let readModel = try ActivityReadModel(path: scratch.database.path)
        #expect(try readModel.checkpoint() == end)
        #expect(try readModel.dailyTotals() == DailyTotal.of(repository.activities(matching: ActivityQuery()).lazy))
        try await repository.close()
    }

    @Test func everyEventOnceWhileTheWriterKeepsAppending() async throws {
        let scratch = try Scratch()
        let repository = try EventSourcedActivityRepository.open(at: scratch.store)
        var workload = Workload(seed: 2929)
        try await workload.append(events: 5_000, to: repository)

        var rng = SeededRandom(seed: 29)
        var interrupted = 0
        for _ in 0..<Self.rounds {
            // The writer appends while the consumer (a reader of its log) follows it and is killed.
            // It appends from before the consumer starts until after it is killed, so that the
            // consumer is applying new batches for its whole life.
            let writer = Task { [workload] in
                var workload = workload
                while !Task.isCancelled {
                    try await workload.append(events: 50, to: repository)
                    try? await Task.sleep(for: .milliseconds(5))
                }
                return workload
            }
            let outcome = try runConsumer(scratch, following: true, killAfter: .milliseconds(Int.random(in: 100...600, using: &rng)))
            writer.cancel()
            workload = try await writer.value
            let checkpoint = try ActivityReadModel(path: scratch.database.path).checkpoint() ?? 0
            if outcome == .killed && checkpoint < repository.store.nextPosition { interrupted += 1 }
            try expectAppliedExactly(through: checkpoint, scratch: scratch, repository: repository)
        }
        #expect(interrupted > 0, "no kill landed while the consumer was applying: the test proved nothing")

        #expect(try runConsumer(scratch, killAfter: nil) == .exited(0))
        let readModel = try ActivityReadModel(path: scratch.database.path)
        #expect(try readModel.checkpoint() == repository.store.nextPosition)
        #expect(try readModel.dailyTotals() == DailyTotal.of(repository.activities(matching: ActivityQuery()).lazy))
        try await repository.close()
    }

    @Test func aBatchDeliveredAgainIsNotAppliedTwice() async throws {
        let scratch = try Scratch()
        let repository = try EventSourcedActivityRepository.open(at: scratch.store)
        var workload = Workload(seed: 7)
        try await workload.append(events: 600, to: repository)
        let readModel = try ActivityReadModel(path: scratch.database.path)
        let events = try repository.store.read(from: 0)
        let consumer = try readModel.consumer(of: repository.store)
        try readModel.apply(Array(events[0..<300]), from: consumer)
        // A consumer that crashed after the transaction but before it learnt of it delivers again.
        try readModel.apply(Array(events[200..<600]), from: consumer)
        try readModel.apply(Array(events[0..<600]), from: consumer)
        #expect(try readModel.checkpoint() == events[599].position + 1)
        // The next start is the stored position bound to the log's history, not a bare one.
        #expect(try readModel.start() == .checkpoint(try consumer.position(after: events[599])))
        #expect(try readModel.dailyTotals() == DailyTotal.of(repository.activities(throughPosition: events[599].position).all()))
        try await repository.close()
    }

    @Test func anEventThatDoesNotApplyRollsBackItsBatch() async throws {
        let scratch = try Scratch()
        let repository = try EventSourcedActivityRepository.open(at: scratch.store)
        let model = ActivityModel(startDate: Date(timeIntervalSince1970: 1_750_000_000), type: .sleep)
        try await repository.add(model)
        try await repository.end(id: model.id, at: model.startDate.addingTimeInterval(3_600))
        let events = try repository.store.read(from: 0)
        let readModel = try ActivityReadModel(path: scratch.database.path)
        let consumer = try readModel.consumer(of: repository.store)
        // The end without its add: the read model cannot apply it, and writes nothing of the batch.
        let error = #expect(throws: ActivityReadModelError.self) { try readModel.apply([events[1]], from: consumer) }
        #expect(error?.position == events[1].position)
        #expect(try readModel.checkpoint() == nil)
        #expect(try readModel.dailyTotals().isEmpty)
        try readModel.apply(events, from: consumer)
        #expect(try readModel.dailyTotals() == [DailyTotal(day: "2025-06-15", type: "sleep", count: 1, minutes: 60)])
        try await repository.close()
    }

    // MARK: Helpers

    /// After a kill: the read model holds exactly the effects of the events below `checkpoint`.
    private func expectAppliedExactly(through checkpoint: LogPosition, scratch: Scratch,
                                      repository: EventSourcedActivityRepository) throws {
        let readModel = try ActivityReadModel(path: scratch.database.path)
        let expected = checkpoint == 0 ? [] : DailyTotal.of(try repository.activities(throughPosition: checkpoint - 1).all())
        let actual = try readModel.dailyTotals()
        #expect(actual == expected, "read model at checkpoint \(checkpoint): \(actual.count) totals, expected \(expected.count); first difference: \(zip(actual, expected).first { $0 != $1 }.map { "\($0) vs \($1)" } ?? "in length")")
    }

    /// Starts over from an empty read model, so that the next kills land inside a catch-up again.
    private func reset(_ scratch: Scratch) throws {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: scratch.database.path + suffix) }
    }

    enum Outcome: Equatable { case killed, exited(Int32) }

    /// Runs the consumer executable to the end (`killAfter == nil`) or kills it with SIGKILL after
    /// `killAfter` (if it has not finished by then; a follower never finishes).
    private func runConsumer(_ scratch: Scratch, following: Bool = false, killAfter: Duration?) throws -> Outcome {
        let process = Process()
        process.executableURL = builtExecutable("ActivityReadModelConsumer")
        process.arguments = ["--store", scratch.store.path, "--database", scratch.database.path, "--batch-size", "64"]
            + (following ? ["--follow"] : [])
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        if let killAfter {
            let deadline = ContinuousClock.now.advanced(by: killAfter)
            while process.isRunning && ContinuousClock.now < deadline { usleep(200) }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return .killed
            }
        }
        process.waitUntilExit()
        return process.terminationReason == .uncaughtSignal ? .killed : .exited(process.terminationStatus)
    }
}

/// A temporary directory holding a store and a read model's database.
struct Scratch {
    let directory: URL
    var store: URL { directory.appending(path: "store", directoryHint: .isDirectory) }
    var database: URL { directory.appending(path: "read-model.sqlite") }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appending(path: "read-model-\(UUID().uuidString)", directoryHint: .isDirectory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }
}

/// The seeded activity history (adds, updates, ends, deletes), appended in chunks.
struct Workload {
    var operations: ActivityHistoryGenerator.Iterator

    init(seed: UInt64) {
        operations = ActivityHistoryGenerator(seed: seed, activityCount: 1_000_000).makeIterator()
    }

    /// Appends `events` events, 100 per batch.
    mutating func append(events: Int, to repository: EventSourcedActivityRepository) async throws {
        var left = events
        while left > 0 {
            var chunk: [ActivityEvent] = []
            while chunk.count < min(100, left), let operation = operations.next() {
                switch operation {
                case .add(let model): chunk.append(.added(model))
                case .update(let model): chunk.append(.updated(model))
                case .end(let id, let date): chunk.append(.ended(id: id, at: date))
                case .delete(let id): chunk.append(.deleted(id: id))
                }
            }
            guard !chunk.isEmpty else { return }
            try await repository.apply(chunk)
            left -= chunk.count
        }
    }
}

/// The built executable `name`, found from the running test bundle upwards (SwiftPM puts test
/// bundles and executables side by side), as the root package's tests find theirs.
func builtExecutable(_ name: String) -> URL {
    var directory = URL(filePath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    while !FileManager.default.fileExists(atPath: directory.appending(path: name).path), directory.path != "/" {
        directory = directory.deletingLastPathComponent()
    }
    return directory.appending(path: name)
}
