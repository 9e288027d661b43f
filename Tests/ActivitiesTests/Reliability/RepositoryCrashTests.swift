import Activities
import EventKernel
import EventLog
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
import EventKernelTestSupport

/// SIGKILL crashes of a repository writer that snapshots constantly: the child
/// (`ActivitiesTestHelper crash DIR`) adds activities one by one with synced durability into
/// 16 KiB segments (a roll every ~150 adds), snapshotting every 5 events (growthFraction 0) and
/// explicitly after every 17th add; the test kills it at a seeded random moment (often just
/// after a snapshot boundary) and checks, per trial, that the reopened repository holds every
/// acknowledged activity exactly, nothing the child did not try to add, gap-free positions, no
/// integrity issue, an intact log (or a torn tail only), a working version map (a duplicate add
/// is refused, a new one accepted), identical results after a snapshot-on-close and a reopen,
/// and no leftover `*.tmp` snapshot file once a writer has opened the store.
///
/// `EVENTKERNEL_CRASH_TRIALS` (default 100, 12 under `EVENTKERNEL_TEST_SCALE=small`),
/// `EVENTKERNEL_CRASH_SEED`.
@Suite("Reliability: repository SIGKILL crashes during snapshots and rolls", .serialized)
struct RepositoryCrashTests {
    static let trials = environmentInt("EVENTKERNEL_CRASH_TRIALS", default: testScale.pick(100, small: 12))
    static let seed = UInt64(environmentInt("EVENTKERNEL_CRASH_SEED", default: 0xAC71_C0DE))
    /// Trials per store before starting a fresh one (so stores grow over several segments).
    static let trialsPerStore = 10

    static var configuration: EventStore.Configuration {
        var configuration = EventStore.Configuration()
        configuration.log.segmentSize = 16 << 10
        configuration.log.durability = .synced
        var policy = SnapshotPolicy(everyEvents: 5, onClose: true, keep: 2)
        policy.growthFraction = 0
        configuration.snapshots = policy
        return configuration
    }

    /// A kill moment for one trial, drawn from the seed.
    static func randomPlan(using rng: inout SplitMix64) -> KillPlan {
        switch Int.random(in: 0..<100, using: &rng) {
        case 0..<12: .after(microseconds: Int.random(in: 0...30_000, using: &rng))          // spawn, open, snapshot load
        case 12..<40: .after(microseconds: Int.random(in: 30_000...150_000, using: &rng))
        case 40..<60: .after(microseconds: Int.random(in: 150_000...400_000, using: &rng))
        default:
            // Aim at snapshot boundaries (every 5 events, explicit every 17 adds).
            .afterAcks(5 * Int.random(in: 1...40, using: &rng), jitterMicroseconds: Int.random(in: 0...2_000, using: &rng))
        }
    }

    struct Outcome {
        var start: Int?
        var acked: [Int] = []
        var errorLine: String?
    }

    static func runAndKill(_ store: URL, plan: KillPlan) throws -> Outcome {
        let child = try EventKernelTestSupport.runAndKill(
            builtExecutable("ActivitiesTestHelper"), arguments: ["crash", store.path],
            scratch: store.deletingLastPathComponent(), plan: plan)
        var outcome = Outcome()
        for line in child.lines {
            let fields = line.split(separator: " ")
            if fields.first == "start", fields.count == 2 { outcome.start = Int(fields[1]) }
            else if fields.first == "ack", fields.count == 2, let i = Int(fields[1]) { outcome.acked.append(i) }
            else if line.hasPrefix("error") { outcome.errorLine = line }
        }
        return outcome
    }

    struct Tally: CustomStringConvertible {
        var trials = 0, noAcks = 0, acks = 0, tornTails = 0, unackedPresent = 0, tmpLeftovers = 0, maxActivities = 0, maxSnapshots = 0
        var description: String {
            "repository crash trials: \(trials), total acks \(acks), kills with no ack \(noAcks), torn tails \(tornTails), "
                + "unacknowledged add present \(unackedPresent), stale .tmp snapshot files found \(tmpLeftovers), "
                + "largest store \(maxActivities) activities, most snapshot files \(maxSnapshots)"
        }
    }

    @Test func killedWriterLosesNothingAcknowledged() async throws {
        var rng = SplitMix64(seed: Self.seed)
        var tally = Tally()
        var directory = TemporaryDirectory("ek-repocrash")
        var store = directory.file("store")
        var known = 0  // activities established by the previous trial's checks
        let clock = ContinuousClock.now
        for trial in 0..<Self.trials {
            if trial > 0 && trial % Self.trialsPerStore == 0 {
                directory = TemporaryDirectory("ek-repocrash")
                store = directory.file("store")
                known = 0
            }
            let plan = Self.randomPlan(using: &rng)
            let context = "trial \(trial) (seed \(Self.seed), \(plan))"
            let outcome = try Self.runAndKill(store, plan: plan)
            #expect(outcome.errorLine == nil, "\(context): helper failed: \(outcome.errorLine ?? "")")
            if let start = outcome.start { #expect(start == known, "\(context): child started at \(start), expected \(known)") }
            let expectedAcks = Array(known..<(known + outcome.acked.count))
            #expect(outcome.acked == expectedAcks, "\(context): acks are not consecutive from \(known)")
            tally.trials += 1
            tally.acks += outcome.acked.count
            if outcome.acked.isEmpty { tally.noAcks += 1 }
            let lastAcked = outcome.acked.last ?? (known - 1)
            // Killed before it created the store (the directory, or its store file).
            guard SegmentedLog.isStore(at: store) else {
                #expect(outcome.acked.isEmpty, "\(context): acknowledged adds but no store")
                continue
            }
            known = try await Self.check(store, known: known, lastAcked: lastAcked, tally: &tally, context: context)
        }
        print(tally, "in \(ContinuousClock.now - clock)")
    }

    /// Reopens the store, checks the crash rule and returns the number of activities after a probe add.
    static func check(_ store: URL, known: Int, lastAcked: Int, tally: inout Tally, context: String) async throws -> Int {
        let report = try SegmentedLog.verify(at: store)
        #expect(report.problems.allSatisfy { $0.severity == .warning }, "\(context): verify found damage: \(report)")
        if report.problems.contains(where: { $0.error.code != .notAStore }) { tally.tornTails += 1 }
        let hidden = Reliability.snapshotFiles(store, includingHidden: true).filter { $0.hasSuffix(".tmp") }
        tally.tmpLeftovers += hidden.count

        let repository = try EventSourcedActivityRepository.open(at: store, configuration: configuration)
        let all = try Reliability.all(repository)
        let n = all.count
        #expect(n >= lastAcked + 1, "\(context): \(n) activities but \(lastAcked + 1) were acknowledged")
        #expect(n <= lastAcked + 2, "\(context): \(n) activities but the child tried at most \(lastAcked + 2)")
        if n == lastAcked + 2 { tally.unackedPresent += 1 }
        let wrong = all.enumerated().filter { $0.element != crashModel($0.offset) }.count
        #expect(wrong == 0, "\(context): \(wrong) activities differ from what was added")
        #expect(repository.count == n)
        #expect(repository.projection.integrityIssues.isEmpty, "\(context): \(repository.projection.integrityIssues)")
        let positions = try repository.store.log.read(from: 0).map(\.position)
        #expect(positions == (0..<LogPosition(n)).map { $0 }, "\(context): positions are not 0..<\(n)")
        #expect(repository.store.nextPosition == LogPosition(n))
        // Stale temporary snapshot files are removed once a writer opens the store.
        let stale = Reliability.snapshotFiles(store, includingHidden: true).filter { $0.hasSuffix(".tmp") }
        #expect(stale.isEmpty, "\(context): stale snapshot temporaries after open: \(stale)")

        // The entity-version map (itself restored from a snapshot) still refuses a duplicate add.
        if n > 0 {
            await #expect(throws: RepositoryError.alreadyExists(.uuid(crashModel(n - 1).id)), "\(context)") {
                try await repository.add(crashModel(n - 1))
            }
        }
        try await repository.add(crashModel(n))
        let expected = (0...n).map(crashModel)
        try await repository.close()  // snapshots on close

        let reopened = try EventSourcedActivityRepository.open(at: store, configuration: configuration)
        let again = try Reliability.all(reopened)
        #expect(again == expected, "\(context): results differ after a snapshot-on-close and reopen")
        #expect(reopened.projection.integrityIssues.isEmpty)
        tally.maxActivities = max(tally.maxActivities, again.count)
        tally.maxSnapshots = max(tally.maxSnapshots, Reliability.snapshotFiles(store).count)
        try await reopened.close()
        return n + 1
    }
}
