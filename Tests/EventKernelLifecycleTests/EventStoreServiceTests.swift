import Activities
import EventKernel
import EventKernelLifecycle
import EventKernelTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `EventStoreService`: a service group's graceful shutdown closes the store (final sync,
/// snapshot), in process and, with a real SIGTERM, in a child process writing at the time.
@Suite("EventStoreService: graceful shutdown", .serialized)
struct EventStoreServiceTests {
    static var quietLogger: Logger {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        return logger
    }

    static var onCloseOnly: EventStore.Configuration {
        var configuration = EventStore.Configuration()
        configuration.snapshots = SnapshotPolicy(everyEvents: nil, onClose: true)
        return configuration
    }

    /// The newest snapshot of the activity projection and of the version table.
    static func newestSnapshots(_ directory: URL) -> (activities: SnapshotFile?, versions: SnapshotFile?) {
        let snapshots = SnapshotDirectory(storeDirectory: directory, logger: quietLogger)
        func newest(_ name: String) -> SnapshotFile? {
            snapshots.files(for: name).last.flatMap { try? SnapshotFile(decoding: Array(Data(contentsOf: $0))) }
        }
        return (newest("activities"), newest("$entity-versions"))
    }

    @Test func gracefulShutdownClosesTheStoreAndWritesItsSnapshot() async throws {
        let directory = TemporaryDirectory("ek-svc")
        let repository = try EventSourcedActivityRepository.open(at: directory.url, configuration: Self.onCloseOnly)
        for i in 0..<100 { try await repository.add(crashModel(i)) }
        #expect(Self.newestSnapshots(directory.url).activities == nil, "no snapshot before the shutdown")

        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [EventStoreService(store: repository.store, logger: Self.quietLogger)], logger: Self.quietLogger))
        let running = Task { try await group.run() }
        // The store stays open while the group runs.
        try await repository.add(crashModel(100))
        await group.triggerGracefulShutdown()
        try await running.value

        await #expect(throws: RepositoryError.closed) { try await repository.add(crashModel(101)) }
        let snapshot = try #require(Self.newestSnapshots(directory.url).activities, "the close wrote no snapshot")
        #expect(snapshot.nextPosition == 101)
        #expect(Self.newestSnapshots(directory.url).versions?.nextPosition == 101)
        let reopened = try EventSourcedActivityRepository.open(at: directory.url)
        #expect(reopened.count == 101)
        #expect(reopened.activity(id: crashModel(100).id) == crashModel(100))
        try await reopened.close()
    }

    @Test func cancellationClosesTheStoreToo() async throws {
        let directory = TemporaryDirectory("ek-svc")
        let repository = try EventSourcedActivityRepository.open(at: directory.url, configuration: Self.onCloseOnly)
        try await repository.add(crashModel(0))
        let service = EventStoreService(store: repository.store, logger: Self.quietLogger)
        let running = Task { try await service.run() }
        running.cancel()
        try await running.value
        await #expect(throws: RepositoryError.closed) { try await repository.add(crashModel(1)) }
        #expect(Self.newestSnapshots(directory.url).activities?.nextPosition == 1)
    }

    /// What one SIGTERM trial printed.
    struct Outcome {
        var start: Int?
        var acked: [Int] = []
        var closedAt: UInt64?
        var errorLine: String?
    }

    static let trials = environmentInt("EVENTKERNEL_SIGTERM_TRIALS", default: testScale.pick(6, small: 2))

    /// A real process writing from 8 tasks gets a real SIGTERM; it must exit by itself with
    /// status 0, and the reopened store must hold every activity it acknowledged (each exactly
    /// as added, not merely a valid prefix), nothing it did not try to add, and a snapshot
    /// written by the close at the log's end. `racing`: the store closes under the writers.
    @Test(arguments: ["orderly", "racing"])
    func sigtermDuringWritesLosesNothingAcknowledged(mode: String) async throws {
        var rng = SplitMix64(seed: mode == "orderly" ? 0x5167_7E53 : 0x5167_7E54)
        for trial in 0..<Self.trials {
            let directory = TemporaryDirectory("ek-sigterm")
            let store = directory.file("store")
            let acks = Int.random(in: 1...testScale.pick(400, small: 60), using: &rng)
            let child = try runAndKill(
                builtExecutable("LifecycleTestHelper"), arguments: [mode, store.path, "8"], scratch: directory.url,
                plan: .afterAcks(acks, jitterMicroseconds: Int.random(in: 0...3_000, using: &rng)), signal: SIGTERM)
            var outcome = Outcome()
            for line in child.lines {
                let fields = line.split(separator: " ")
                if fields.first == "start", fields.count == 2 { outcome.start = Int(fields[1]) }
                else if fields.first == "ack", fields.count == 2, let i = Int(fields[1]) { outcome.acked.append(i) }
                else if fields.first == "closed", fields.count == 2 { outcome.closedAt = UInt64(fields[1]) }
                else if line.hasPrefix("error") { outcome.errorLine = line }
            }
            let context = "\(mode) trial \(trial), SIGTERM after \(acks) acks"
            #expect(!child.wasKilled && child.terminationStatus == 0,
                    "\(context): the child did not shut down by itself (status \(child.terminationStatus), \(outcome.errorLine ?? "no error line"))")
            #expect(outcome.start == 0, "\(context)")
            #expect(!outcome.acked.isEmpty, "\(context): nothing was acknowledged")
            let closedAt = try #require(outcome.closedAt, "\(context): no \"closed\" line")

            let reopened = try EventSourcedActivityRepository.open(at: store)
            for i in outcome.acked {
                #expect(reopened.activity(id: crashModel(i).id) == crashModel(i), "\(context): acknowledged activity \(i) lost or changed")
            }
            // Everything present was attempted: writer w adds w, w + 8, ... in order, so an
            // id above the highest ack of its writer plus one round was never tried.
            let present = try reopened.activities(matching: ActivityQuery(sortOrder: .oldestFirst))
            let highest = (outcome.acked.max() ?? 0) + 8
            for activity in present {
                let index = Int(activity.id.uuidString.suffix(12))!
                #expect(index <= highest && activity == crashModel(index), "\(context): \(activity) was never added")
            }
            #expect(present.count >= outcome.acked.count)
            #expect(UInt64(present.count) == closedAt, "\(context): the store reopened at \(present.count), closed at \(closedAt)")
            let snapshots = Self.newestSnapshots(store)
            #expect(snapshots.activities?.nextPosition == closedAt, "\(context): the close wrote no snapshot at the log's end")
            #expect(snapshots.versions?.nextPosition == closedAt, "\(context)")
            try await reopened.close()
        }
    }
}
