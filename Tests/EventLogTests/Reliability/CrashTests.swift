@testable import EventLog
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
import EventKernelTestSupport

/// SIGKILL crash tests: a child process (`EventLogTestHelper append DIR COUNT 4096`) appends
/// synced single records into 4 KiB segments (a roll every ~50 appends) and prints `ack P I`
/// after each acknowledged append; the test kills it at a random moment and checks that the
/// store reopens with every acknowledged record, gap-free, and nothing but a prefix of what
/// the child attempted.
///
/// `EVENTKERNEL_CRASH_TRIALS` sets the number of single-kill trials (default 100, 20 under
/// `EVENTKERNEL_TEST_SCALE=small`); `EVENTKERNEL_CRASH_SEED` the seed.
@Suite("Reliability: SIGKILL crash recovery", .serialized)
struct CrashTests {
    static let segmentBytes = 4096
    static let trials = environmentInt("EVENTKERNEL_CRASH_TRIALS", default: testScale.pick(100, small: 20))
    static let seed = UInt64(environmentInt("EVENTKERNEL_CRASH_SEED", default: 0x5EED_C0DE))

    /// A kill moment for one trial, drawn from the seed.
    static func randomPlan(using rng: inout SplitMix64) -> KillPlan {
        switch Int.random(in: 0..<100, using: &rng) {
        case 0..<15: .after(microseconds: Int.random(in: 0...3_000, using: &rng))           // before/at open
        case 15..<30: .after(microseconds: Int.random(in: 3_000...40_000, using: &rng))     // first segment, first appends
        case 30..<65: .after(microseconds: Int.random(in: 40_000...200_000, using: &rng))
        default:
            // ~50 appends fill a 4 KiB segment: aim at the appends around a roll.
            .afterAcks(52 * Int.random(in: 1...5, using: &rng) + Int.random(in: -2...2, using: &rng),
                       jitterMicroseconds: Int.random(in: 0...1_500, using: &rng))
        }
    }

    struct Outcome {
        var start: Int?
        var acked: [Int]
    }

    /// Spawns the helper, kills it per `plan`, and returns what it printed before dying.
    static func runAndKill(_ dir: TemporaryDirectory, plan: KillPlan) throws -> Outcome {
        let child = try EventKernelTestSupport.runAndKill(
            builtExecutable("EventLogTestHelper"), arguments: ["append", dir.path, "1000000", "\(segmentBytes)"],
            scratch: dir.url.deletingLastPathComponent(), plan: plan)
        var outcome = Outcome(start: nil, acked: [])
        for line in child.lines {
            let fields = line.split(separator: " ")
            if fields.first == "start", fields.count == 2 { outcome.start = Int(fields[1]) }
            if fields.first == "ack", fields.count == 3, let p = Int(fields[1]), let i = Int(fields[2]) {
                #expect(p == i, "child acknowledged record-\(i) at position \(p)")
                outcome.acked.append(p)
            }
        }
        #expect(child.wasKilled || child.terminationStatus == 0 || outcome.start == nil,
                "helper failed on its own (status \(child.terminationStatus)): \(child.lines.suffix(3))")
        return outcome
    }

    /// What recovery had to do, for the summary.
    struct Tally {
        var trials = 0, noAcks = 0, acked = 0, tornTails = 0, reinitialized = 0, rebuiltIndexes = 0, extraUnacked = 0
        var maxSegments = 0
    }

    /// Reopens the store and checks the crash rule; returns the number of records.
    static func checkStore(_ dir: TemporaryDirectory, ackedThrough acked: Int, attemptedAtMost attempted: Int,
                           tally: inout Tally, context: String) async throws -> Int {
        // Killed before it created the store: nothing can have been acknowledged.
        guard SegmentedLog.isStore(at: dir.url) else {
            #expect(acked == 0, "\(context): \(acked) appends acknowledged but no store file")
            return 0
        }
        let before = try SegmentedLog.verify(at: dir.url)
        #expect(before.isIntact, "\(context): verify after the crash found damage: \(before)")
        let log = try SegmentedLog.open(at: dir.url, configuration: SegmentedLog.Configuration(segmentSize: segmentBytes))
        // Closed and awaited before the next trial: a close left to an unstructured task ran only
        // when the trials' loop let go of the cooperative threads, and each trial's descriptors
        // piled up meanwhile (about 700 open in this suite).
        return try await withClosing({ try await log.close() }) {
            try checkRecords(of: log, ackedThrough: acked, attemptedAtMost: attempted, tally: &tally, context: context)
        }
    }

    /// The crash rule over an open log: every acknowledged record, in place, none beyond the attempted.
    private static func checkRecords(of log: SegmentedLog, ackedThrough acked: Int, attemptedAtMost attempted: Int,
                                     tally: inout Tally, context: String) throws -> Int {
        let report = log.recoveryReport
        if report.truncatedTail != nil { tally.tornTails += 1 }
        if !report.reinitializedSegments.isEmpty { tally.reinitialized += 1 }
        if !report.rebuiltIndexes.isEmpty { tally.rebuiltIndexes += 1 }
        tally.maxSegments = max(tally.maxSegments, log.segmentCount)
        var count = 0
        var wrong = 0
        try log.forEachRecord(from: 0, through: nil) { record in
            if record.position != LogPosition(count) || Array(record.payload) != Array("record-\(record.position)".utf8) {
                wrong += 1
                return false
            }
            count += 1
            return true
        }
        #expect(wrong == 0, "\(context): record \(count) is wrong or out of place")
        #expect(count >= acked, "\(context): \(acked) appends acknowledged, only \(count) recovered (\(report))")
        #expect(count <= attempted, "\(context): \(count) records recovered, the child attempted at most \(attempted)")
        #expect(log.bounds.nextPosition == LogPosition(count))
        if count > acked { tally.extraUnacked += 1 }
        return count
    }

    @Test("SIGKILL at random moments never loses an acknowledged append")
    func killAtRandomMoments() async throws {
        var rng = SplitMix64(seed: Self.seed)
        var tally = Tally()
        let clock = ContinuousClock.now
        for trial in 0..<Self.trials {
            let plan = Self.randomPlan(using: &rng)
            let dir = TemporaryDirectory("crash")
            let outcome = try Self.runAndKill(dir, plan: plan)
            #expect(outcome.acked == Array(0..<outcome.acked.count), "trial \(trial): acks out of order")
            let context = "trial \(trial) (seed \(Self.seed), \(plan), \(outcome.acked.count) acks)"
            tally.trials += 1
            tally.acked += outcome.acked.count
            if outcome.acked.isEmpty { tally.noAcks += 1 }
            // At most one append is in flight beyond the last printed ack.
            _ = try await Self.checkStore(dir, ackedThrough: outcome.acked.count, attemptedAtMost: outcome.acked.count + 1,
                                    tally: &tally, context: context)
        }
        print("crash trials: \(tally) in \(ContinuousClock.now - clock)")
    }

    @Test("killed, restarted to append more, killed again: recovery then continuation")
    func killRestartKill() async throws {
        var rng = SplitMix64(seed: Self.seed ^ 0xABCD)
        var tally = Tally()
        for scenario in 0..<testScale.pick(8, small: 3) {
            let dir = TemporaryDirectory("crash-restart")
            var acked = 0
            for round in 0..<4 {
                let plan: KillPlan = round == 0 && scenario % 2 == 0
                    ? .afterAcks(52 + scenario, jitterMicroseconds: Int.random(in: 0...1_000, using: &rng))
                    : .after(microseconds: Int.random(in: 20_000...150_000, using: &rng))
                let outcome = try Self.runAndKill(dir, plan: plan)
                let context = "scenario \(scenario) round \(round) (\(plan))"
                if let start = outcome.start {
                    // The restarted child recovered everything acknowledged before.
                    #expect(start >= acked, "\(context): restarted at \(start), but \(acked) were acknowledged")
                    #expect(outcome.acked == Array(start..<(start + outcome.acked.count)), "\(context): acks not contiguous")
                    if let last = outcome.acked.last { acked = last + 1 }
                    let count = try await Self.checkStore(dir, ackedThrough: acked, attemptedAtMost: max(start, acked) + 1,
                                                    tally: &tally, context: context)
                    #expect(count >= start)
                } else {
                    #expect(outcome.acked.isEmpty)
                }
            }
        }
        print("crash restart scenarios: \(tally)")
    }

    @Test("a leader killed mid-sync with followers waiting: every acknowledged append was durable")
    func killLeaderMidSync() async throws {
        // The child's file layer holds writes until their sync and stretches each sync by 2 ms:
        // a kill models a power loss and usually lands while a leader syncs and followers wait.
        // Any acknowledgement given before its sync completed shows up as a missing record.
        var rng = SplitMix64(seed: Self.seed ^ 0x1EAD)
        var acked = 0, recovered = 0, lost = 0
        for trial in 0..<testScale.pick(30, small: 8) {
            let dir = TemporaryDirectory("crash-leader")
            let plan: KillPlan = .afterAcks(Int.random(in: 1...300, using: &rng), jitterMicroseconds: Int.random(in: 0...3_000, using: &rng))
            let child = try EventKernelTestSupport.runAndKill(
                builtExecutable("EventLogTestHelper"), arguments: ["append-concurrent", dir.path, "16", "\(Self.segmentBytes)"],
                scratch: dir.url.deletingLastPathComponent(), plan: plan)
            let context = "trial \(trial) (\(plan))"
            #expect(child.wasKilled, "\(context): the helper ended by itself: \(child.lines.suffix(3))")
            var acknowledged: [LogPosition: String] = [:]
            for line in child.lines {
                let fields = line.split(separator: " ")
                guard fields.first == "ack", fields.count == 4, let p = LogPosition(fields[1]) else { continue }
                acknowledged[p] = "t-\(fields[2])-k-\(fields[3])"
            }
            acked += acknowledged.count
            guard SegmentedLog.isStore(at: dir.url) else {
                #expect(acknowledged.isEmpty, "\(context): acknowledged appends but no store")
                continue
            }
            let log = try SegmentedLog.open(at: dir.url, configuration: SegmentedLog.Configuration(segmentSize: Self.segmentBytes))
            var found: [LogPosition: String] = [:]
            // Closed and awaited before the next trial (checkStore says why).
            try await withClosing({ try await log.close() }) {
                try Self.readRecords(of: log, into: &found, context: context)
            }
            recovered += found.count
            for (position, payload) in acknowledged where found[position] != payload {
                lost += 1
                Issue.record("\(context): acknowledged \(payload) at \(position), recovered \(found[position] ?? "nothing")")
            }
        }
        print("leader-kill trials: \(acked) acknowledged, \(recovered) recovered, \(lost) lost")
    }

    /// Every record of the concurrent appenders' log by position, each task's in its order.
    private static func readRecords(of log: SegmentedLog, into found: inout [LogPosition: String], context: String) throws {
        var nextK: [String: Int] = [:]
        try log.forEachRecord(from: 0, through: nil) { record in
            let text = String(decoding: record.payload, as: UTF8.self)
            found[record.position] = text
            // Each task awaits each append: its records are its first appends, in order.
            let parts = text.split(separator: "-")
            if parts.count == 4, let k = Int(parts[3]) {
                #expect(k == nextK[String(parts[1]), default: 0], "\(context): task \(parts[1]) record \(k) out of order at \(record.position)")
                nextK[String(parts[1])] = k + 1
            } else {
                Issue.record("\(context): unexpected record \(text) at \(record.position)")
            }
            return true
        }
    }
}
