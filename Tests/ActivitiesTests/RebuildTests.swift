import Activities
import EventKernel
import EventLog
import Foundation
import Synchronization
import Testing
import EventKernelTestSupport

/// What a test's tasks share.
private final class Shared: Sendable {
    let failures = Mutex<[String]>([])
    let stopped = Mutex(false)
    let reports = Mutex<[RebuildProgress]>([])
    var isStopped: Bool { stopped.withLock { $0 } }
    /// Readers that have made their first check.
    let started = Mutex(0)
    /// Waits until `count` readers have made a check: on a busy machine (the whole suite in
    /// parallel) a reader task could otherwise first run after the rebuild, and the race the
    /// test is about would not happen.
    func waitForReaders(_ count: Int) async {
        while started.withLock({ $0 }) < count { try? await Task.sleep(for: .milliseconds(1)) }
    }
    func fail(_ message: String) { failures.withLock { $0.append(message) } }
}

/// The Activities repository's rebuild: the same mechanism as the generic repository's
/// (`EventStore.rebuild(_:from:progress:)`, issue 29 item 5), through `ActivityProjection`.
@Suite struct ActivityRebuildTests {
    static let day0 = Date(timeIntervalSince1970: 1_700_000_000)
    static func activity(_ number: Int) -> ActivityModel {
        ActivityModel(startDate: day0 + Double(number) * 60, type: number.isMultiple(of: 3) ? .sleep : .tummyTime)
    }

    /// While readers query and writers add, every answer comes from the complete old index or
    /// the complete new one: the count never falls, nor the sleeps of the first day; every
    /// write is in the new index; an observer registered before goes on after the switch.
    @Test func rebuildWhileQueryingAndWriting() async throws {
        let count = testScale.pick(20_000, small: 2_000)
        let repository = try EventSourcedActivityRepository(log: InMemoryLog())
        for start in stride(from: 0, to: count, by: 2_000) {
            try await repository.apply((start..<min(start + 2_000, count)).map { .added(Self.activity($0)) })
        }
        let firstDay = ActivityQuery(afterDate: Self.day0 - 1, beforeDate: Self.day0 + 86_400, types: Set([ActivityType.sleep]))
        let sleepsOfFirstDay = try repository.activities(matching: firstDay).count
        #expect(sleepsOfFirstDay == (0..<min(count, 1_440)).count { $0.isMultiple(of: 3) })
        let shared = Shared()
        let observed = repository.observe(query: ActivityQuery(afterDate: Self.day0 - 86_400, beforeDate: Self.day0 - 1))
        var observations = observed.makeAsyncIterator()
        #expect(await observations.next() == [])

        let readers = (0..<2).map { reader in
            Task {
                var last = count, checks = 0
                while !shared.isStopped {
                    let now = repository.count
                    if now < last { shared.fail("reader \(reader): count fell from \(last) to \(now)") }
                    last = max(last, now)
                    do {
                        let sleeps = try repository.activities(matching: firstDay).count
                        if sleeps < sleepsOfFirstDay { shared.fail("reader \(reader): \(sleeps) sleeps of \(sleepsOfFirstDay)") }
                    } catch {
                        shared.fail("reader \(reader): \(error)")
                    }
                    checks += 1
                    if checks == 1 { shared.started.withLock { $0 += 1 } }
                    try? await Task.sleep(for: .microseconds(200))
                }
                return checks
            }
        }
        let writer = Task {
            var written: [ActivityModel] = []
            var afterStop = 0
            while afterStop < 10 {
                if shared.isStopped { afterStop += 1 }
                let model = Self.activity(count + written.count)
                try await repository.add(model)
                written.append(model)
                try? await Task.sleep(for: .microseconds(100))
            }
            return written
        }

        await shared.waitForReaders(readers.count)
        try await repository.rebuild { report in shared.reports.withLock { $0.append(report) } }
        shared.stopped.withLock { $0 = true }
        var checks = 0
        for reader in readers { checks += await reader.value }
        let written = try await writer.value

        #expect(shared.failures.withLock { $0 } == [])
        #expect(checks > 0)
        #expect(repository.count == count + written.count)
        for model in written { #expect(repository.activity(id: model.id) == model) }
        let last = try #require(shared.reports.withLock { $0.last })
        #expect(last.switched && last.folded == last.total && last.projection == "activities")
        // The observer registered before the rebuild sees an add after it.
        let early = ActivityModel(startDate: Self.day0 - 3_600, type: .sleep)
        try await repository.add(early)
        #expect(await observations.next() == [early])
        try await repository.close()
    }

    /// Cancelled, the rebuild leaves the index in place; the repository goes on.
    @Test func cancellationKeepsTheIndex() async throws {
        let repository = try EventSourcedActivityRepository(log: InMemoryLog())
        try await repository.apply((0..<500).map { .added(Self.activity($0)) })
        let task = Task { try await repository.rebuild { _ in withUnsafeCurrentTask { $0?.cancel() } } }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(repository.count == 500)
        try await repository.add(Self.activity(500))
        #expect(repository.count == 501)
        try await repository.rebuild()
        #expect(repository.count == 501)
        try await repository.close()
    }
}
