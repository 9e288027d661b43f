#if PostgreSQL
import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import PostgresLog
import Testing

@Suite("Scale-out: instances in separate processes on one PostgreSQL log")
struct ScaleOutProcessTests {
    /// Three instances (processes), 16 writers each, for a bounded time; the second is
    /// SIGKILLed midway. Checked afterwards, against the log and the survivors' answers: every
    /// acknowledged add present exactly once, positions gap-free, the survivors' query results
    /// identical (and equal to a fresh store's), every contested id won exactly once.
    @Test("three instances, one killed midway: every acknowledged event once, gap-free, identical projections, contested ids won once")
    func threeInstancesOneKilled() async throws {
        let configuration = try PostgresTestDatabase.configuration()
        defer { Task { await PostgresTestDatabase.drop(configuration) } }
        let scratch = TemporaryDirectory("scale-out")
        let seconds = testScale.pick(4.0, small: 2.0)
        // The schema exists before the instances race to open.
        try await PostgresLog.open(configuration).close()
        let names = ["A", "B", "C"]
        let children = try names.map { name in
            let directory = scratch.file("instance-\(name)")
            return try ChildProcess(builtExecutable("ActivitiesTestHelper"),
                                    arguments: ["instance", directory.path, configuration.schema, name, "\(seconds)", "16"],
                                    scratch: scratch.url)
        }
        let victim = children[1]
        // Killed once it acknowledged some adds and about 40% of the time has passed.
        #expect(victim.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("ack ") }, "B never acknowledged: \(victim.lines.suffix(3)) \(victim.errorOutput)")
        try await Task.sleep(for: .seconds(seconds * 0.4))
        victim.kill()
        #expect(victim.wasKilled)
        let survivors = [children[0], children[2]]
        for child in survivors {
            #expect(child.waitForLine(timeout: .seconds(seconds + 60)) { $0 == "done" || $0.hasPrefix("error") },
                    "\(child.lines.suffix(3)) \(child.errorOutput)")
        }
        // Both stopped writing: each catches up and answers.
        for child in survivors { child.send("report") }
        for child in survivors {
            #expect(child.waitForExit(timeout: .seconds(60)) == 0, "\(child.lines.suffix(3)) \(child.errorOutput)")
        }

        let lines = children.map(\.lines)
        let errors = lines.joined().filter { $0.hasPrefix("error") }
        #expect(errors.isEmpty, "\(errors)")
        let acknowledged = Set(lines.joined().filter { $0.hasPrefix("ack ") }.map { String($0.dropFirst(4)) })
        let won = lines.joined().filter { $0.hasPrefix("won ") }.map { String($0.dropFirst(4)) }
        let lost = lines.joined().filter { $0.hasPrefix("lost ") }.map { String($0.dropFirst(5)) }
        print("scale-out: \(acknowledged.count) acknowledged adds (\(lines[1].filter { $0.hasPrefix("ack ") }.count) by the killed instance), \(won.count) contested ids won, \(lost.count) lost")
        #expect(acknowledged.count > 100, "too few adds to mean anything: \(acknowledged.count)")
        #expect(lines[1].contains { $0.hasPrefix("ack ") })

        // The log: gap-free, each item added exactly once.
        let store = try await EventStore.open(postgres: configuration)
        let items = try ScaleOutItem.repository(on: store)
        let events = try store.read()
        #expect(events.map(\.position) == Array(0..<UInt64(events.count)))
        var added: [EntityID: Int] = [:]
        for event in events { added[event.entityID, default: 0] += 1 }
        #expect(added.values.allSatisfy { $0 == 1 }, "ids added more than once: \(added.filter { $0.value > 1 }.keys.prefix(5))")
        #expect(events.allSatisfy { $0.entityVersion == 1 })
        for id in acknowledged { #expect(items.fetch(id: id) != nil, "acknowledged \(id) is missing") }
        // Contested ids: at most one winner each (the killed instance may have won one it never
        // reported); a reported loss means someone else's add is there.
        #expect(Set(won).count == won.count, "an id won twice: \(won.count - Set(won).count)")
        for id in won { #expect(items.fetch(id: id) != nil) }
        for id in lost { #expect(items.fetch(id: id) != nil, "\(id) was lost to nobody") }
        #expect(Set(lost).intersection(won).count > 0 || lost.isEmpty, "no id was contested by two instances")

        // The survivors' projections answer exactly as a fresh store does.
        let expected = try ScaleOutItem.report(items).map { "result \($0)" }
        for child in survivors {
            #expect(child.lines.filter { $0.hasPrefix("result ") } == expected)
        }
        try await store.close()
    }
}
#endif
