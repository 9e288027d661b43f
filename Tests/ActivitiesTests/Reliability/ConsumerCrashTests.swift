import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// SIGKILL crashes of a process that appends and consumes at once (`ActivitiesTestHelper
/// consume`): its consumer's handler records each handled position in a file, fsynced before
/// the handler returns, so before the commit. After every kill, at a seeded random instant,
/// the committed position must never be ahead of what was handled (every position below it is
/// in the file); after the last round, a run to the end must have handled every event at
/// least once or parked, none skipped. The helper's handler fails on purpose (always on some
/// positions, which are parked after their batch is split; once on others, which a retry
/// handles), so retries, splits and parking are killed too.
///
/// `EVENTKERNEL_CONSUMER_CRASH_ROUNDS` (default 10; 100 for the issue's bar),
/// `EVENTKERNEL_CRASH_SEED`.
@Suite("Reliability: consumer SIGKILL crashes", .serialized)
struct ConsumerCrashTests {
    static let rounds = environmentInt("EVENTKERNEL_CONSUMER_CRASH_ROUNDS", default: 10)
    static let seed = UInt64(environmentInt("EVENTKERNEL_CRASH_SEED", default: 0xC0_4511_3E))

    /// The positions in the handled file (a line cut by the kill is not counted).
    static func handled(_ file: URL) -> [UInt64] {
        let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        if !text.hasSuffix("\n"), !lines.isEmpty { lines.removeLast() }
        return lines.compactMap { UInt64($0) }
    }

    @Test func theCommittedPositionIsNeverAheadOfWhatWasHandledAndNothingIsSkipped() async throws {
        let temp = TemporaryDirectory("ek-consumer-crash")
        let store = temp.file("store")
        let file = temp.file("handled.txt")
        let total = UInt64(400 * max(1, Self.rounds))
        var rng = SplitMix64(seed: Self.seed)
        var kills = 0
        var killsWhileConsuming = 0
        for round in 0..<Self.rounds {
            let plan: KillPlan = Bool.random(using: &rng)
                ? .after(microseconds: Int.random(in: 20_000...400_000, using: &rng))
                : .afterAcks(Int.random(in: 1...40, using: &rng), jitterMicroseconds: Int.random(in: 0...3_000, using: &rng))
            let child = try await runAndKillOffThePool(builtExecutable("ActivitiesTestHelper"), arguments: ["consume", store.path, file.path, String(total)],
                                       scratch: temp.url, plan: plan)
            #expect(!child.lines.contains { $0.hasPrefix("error") }, "round \(round): \(child.lines.filter { $0.hasPrefix("error") })")
            if child.wasKilled { kills += 1 }
            guard FileManager.default.fileExists(atPath: store.appending(path: "consumers/crash.checkpoint").path) else { continue }
            let consumers = ConsumerDirectory(storeDirectory: store)
            let committed = try #require(try consumers.checkpoint(named: "crash")).committed
            let seen = Set(Self.handled(file)).union(try consumers.parked(named: "crash").map(\.position))
            let missing = (0..<committed).filter { !seen.contains($0) }
            #expect(missing.isEmpty, "round \(round) (\(plan)): committed \(committed) but never handled nor parked \(missing.prefix(5))")
            // Killed mid-way: it had handled a batch this round (an ack) and not finished.
            if child.wasKilled, child.lines.contains(where: { $0.hasPrefix("ack") }), committed < total { killsWhileConsuming += 1 }
        }
        #expect(Self.rounds == 0 || killsWhileConsuming > 0, "no kill landed while the consumer was consuming (\(kills) kills)")
        // The last run goes to the end.
        let final = try await runAndKillOffThePool(builtExecutable("ActivitiesTestHelper"), arguments: ["consume", store.path, file.path, String(total)],
                                   scratch: temp.url, plan: .afterAcks(Int.max, jitterMicroseconds: 0))
        let log = try SegmentedLog.openReadOnly(at: store)
        try #require(final.lines.last == "done", "the final run did not finish: \(final.lines.suffix(3))")
        let consumers = ConsumerDirectory(storeDirectory: store)
        #expect(try consumers.checkpoint(named: "crash")?.committed == total)
        #expect(log.bounds.nextPosition == total)
        let handled = Self.handled(file)
        let parked = Set(try consumers.parked(named: "crash").map(\.position))
        let seen = Set(handled)
        // Those the handler always refuses are parked, and only those; every other was handled.
        #expect(parked == Set((0..<total).filter { $0 % 101 == 7 }))
        let missing = (0..<total).filter { !seen.contains($0) && !parked.contains($0) }
        #expect(missing.isEmpty, "every event was handled at least once or parked; neither: \(missing.prefix(5)) (\(missing.count))")
        #expect(seen.isDisjoint(with: parked))
        #expect(handled.allSatisfy { $0 < log.bounds.nextPosition })
        let committed = total
        print("consumer crash rounds: \(Self.rounds), killed \(kills), handled \(handled.count) lines for \(committed) committed events (duplicates \(handled.count - seen.count)), final run \(final.lines.last ?? "-")")
    }
}
