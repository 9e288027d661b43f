import Activities
import EventKernel
import EventLog
import Foundation
import Synchronization
import Testing
import EventKernelTestSupport

/// 64 writers, 64 readers and 8 observers on one durable repository (buffered durability) for
/// `EVENTKERNEL_STRESS_SECONDS` (default 5, 2 under `EVENTKERNEL_TEST_SCALE=small`).
///
/// - Writers own disjoint ids and add, update, end and delete them; each records every model
///   it is about to write (before the write) and the final state of each id it acknowledged.
/// - Readers run random queries and check what is checkable at any position: strict sort order
///   (no duplicates), the limit, the filter (`ActivityQuery.matches`), and that every returned
///   model is one some writer wrote (the current or an earlier version, never a mix).
/// - Observers keep their last value; once the writers are done it must equal a fresh query.
/// - At the end, and after a close and reopen: the log's positions are gap-free, there are as
///   many events as acknowledged writes, and the repository holds exactly every writer's
///   acknowledged final state.
@Suite("Reliability: concurrency stress", .serialized)
struct ConcurrencyStressTests {
    static let seconds = environmentInt("EVENTKERNEL_STRESS_SECONDS", default: testScale.pick(5, small: 2))
    static let writers = 64, readers = 64
    static let base = Date(timeIntervalSince1970: 1_760_000_000)
    static let types: [ActivityType] = [.sleep, "feeding", "bath", .tummyTime]

    /// Every model any writer was about to write, by id.
    final class Written: Sendable {
        let models = Mutex<[UUID: Set<ActivityModel>]>([:])
        func record(_ model: ActivityModel) { models.withLock { _ = $0[model.id, default: []].insert(model) } }
        func contains(_ model: ActivityModel) -> Bool { models.withLock { $0[model.id]?.contains(model) ?? false } }
    }

    final class Latest: Sendable {
        let values = Mutex<[Int: [ActivityModel]]>([:])
    }

    struct WriterResult: Sendable {
        var final: [UUID: ActivityModel] = [:]
        var events = 0
    }

    struct ReaderResult: Sendable {
        var queries = 0, returned = 0, problems: [String] = []
    }

    static func randomQuery(_ rng: inout SplitMix64, span: TimeInterval) -> ActivityQuery {
        var query = ActivityQuery(sortOrder: Bool.random(using: &rng) ? .oldestFirst : .newestFirst)
        if Int.random(in: 0..<3, using: &rng) > 0 {
            let a = Double.random(in: -60...span, using: &rng), b = Double.random(in: -60...span, using: &rng)
            query.afterDate = base.addingTimeInterval(min(a, b))
            if Bool.random(using: &rng) { query.beforeDate = base.addingTimeInterval(max(a, b)) }
        }
        if Int.random(in: 0..<3, using: &rng) == 0 { query.types = Set(types.filter { _ in Bool.random(using: &rng) }) }
        if Bool.random(using: &rng) { query.limit = Int.random(in: 0...50, using: &rng) }
        if Int.random(in: 0..<4, using: &rng) == 0 { query.offset = Int.random(in: 0...20, using: &rng) }
        return query
    }

    static func writer(_ w: Int, _ repository: EventSourcedActivityRepository, written: Written, until deadline: ContinuousClock.Instant) async throws -> WriterResult {
        var rng = SplitMix64(seed: 0x57E5 &+ UInt64(w))
        var result = WriterResult()
        var k = 0
        while ContinuousClock.now < deadline {
            let live = Array(result.final.keys)
            let choice = live.isEmpty ? 0 : Int.random(in: 0..<10, using: &rng)
            switch choice {
            case 0..<6:
                let id = UUID(uuidString: String(format: "%08x-0000-4000-8000-%012x", w, k))!
                let start = base.addingTimeInterval(Double(k * writers + w) * 7 + Double.random(in: 0..<1, using: &rng))
                let model = ActivityModel(id: id, startDate: start, type: types[Int.random(in: 0..<types.count, using: &rng)])
                k += 1
                written.record(model)
                try await repository.add(model)
                result.final[id] = model
            case 6, 7:
                var model = result.final[live.randomElement(using: &rng)!]!
                model.type = types[Int.random(in: 0..<types.count, using: &rng)]
                model.startDate = model.startDate.addingTimeInterval(Double.random(in: 0..<3, using: &rng))
                model.endDate = nil
                written.record(model)
                try await repository.update(model)
                result.final[model.id] = model
            case 8:
                var model = result.final[live.randomElement(using: &rng)!]!
                let end = model.startDate.addingTimeInterval(Double.random(in: 0..<600, using: &rng))
                model.endDate = end
                written.record(model)
                try await repository.end(id: model.id, at: end)
                result.final[model.id] = model
            default:
                let id = live.randomElement(using: &rng)!
                try await repository.delete(id: id)
                result.final[id] = nil
            }
            result.events += 1
        }
        return result
    }

    static func reader(_ r: Int, _ repository: EventSourcedActivityRepository, written: Written, until deadline: ContinuousClock.Instant) async -> ReaderResult {
        var rng = SplitMix64(seed: 0x4EAD &+ UInt64(r))
        var result = ReaderResult()
        let span = Double(writers) * 7 * 400
        while ContinuousClock.now < deadline {
            let query = randomQuery(&rng, span: span)
            let models: [ActivityModel]
            do { models = try repository.activities(matching: query) } catch {
                result.problems.append("query \(query) failed: \(error)")
                continue
            }
            result.queries += 1
            result.returned += models.count
            // Limit 0 means no limit (as Core Data's fetchLimit).
            if let limit = query.limit, limit > 0, models.count > limit { result.problems.append("\(models.count) results over limit \(limit)") }
            for (a, b) in zip(models, models.dropFirst()) {
                let ordered = query.sortOrder == .oldestFirst ? ActivityCursor(after: a) < ActivityCursor(after: b) : ActivityCursor(after: b) < ActivityCursor(after: a)
                if !ordered { result.problems.append("results out of order or duplicated: \(a.id) then \(b.id)"); break }
            }
            for model in models where !query.matches(model) { result.problems.append("\(model) does not match \(query)"); break }
            for model in models where !written.contains(model) {
                let known = written.models.withLock { $0[model.id] ?? [] }.map { "\($0.startDate.timeIntervalSince1970) \($0.endDate?.timeIntervalSince1970 ?? -1) \($0.type)" }
                result.problems.append("\(model.startDate.timeIntervalSince1970) \(model.endDate?.timeIntervalSince1970 ?? -1) \(model.type) was never written; written: \(known)")
                break
            }
            if result.problems.count > 20 { break }
            await Task.yield()
        }
        return result
    }

    @Test func writersReadersAndObservers() async throws {
        let directory = TemporaryDirectory("ek-stress")
        let store = directory.file("store")
        var configuration = EventStore.Configuration()
        configuration.log.durability = .buffered(syncInterval: .milliseconds(50))
        configuration.log.segmentSize = 256 << 10
        var policy = SnapshotPolicy(everyEvents: 2_000, onClose: true, keep: 2)
        policy.growthFraction = 0
        configuration.snapshots = policy
        let repository = try EventSourcedActivityRepository.open(at: store, configuration: configuration)
        let written = Written()

        // Observers: their latest value, kept until the end.
        let observerQueries: [ActivityQuery] = [
            ActivityQuery(limit: 20), ActivityQuery(types: [.sleep], limit: 10, sortOrder: .oldestFirst),
            ActivityQuery(afterDate: Self.base.addingTimeInterval(1000), beforeDate: Self.base.addingTimeInterval(5000)),
            ActivityQuery(types: ["bath", "feeding"], limit: 5), ActivityQuery(limit: 3, offset: 2),
            ActivityQuery(types: []), ActivityQuery(afterDate: Self.base.addingTimeInterval(20_000), limit: 30, sortOrder: .oldestFirst),
            ActivityQuery(types: [.tummyTime]),
        ]
        let latest = Latest()
        var observerTasks: [Task<Void, Never>] = []
        for (n, query) in observerQueries.enumerated() {
            let stream = repository.observe(query: query)
            observerTasks.append(Task {
                for await value in stream { latest.values.withLock { $0[n] = value } }
            })
        }

        let started = ContinuousClock.now
        let deadline = started.advanced(by: .seconds(Self.seconds))
        var results: [WriterResult] = []
        var readerResults: [ReaderResult] = []
        try await withThrowingTaskGroup(of: (WriterResult?, ReaderResult?).self) { group in
            for w in 0..<Self.writers {
                group.addTask { (try await Self.writer(w, repository, written: written, until: deadline), nil) }
            }
            for r in 0..<Self.readers {
                group.addTask { (nil, await Self.reader(r, repository, written: written, until: deadline)) }
            }
            for try await (w, r) in group {
                if let w { results.append(w) }
                if let r { readerResults.append(r) }
            }
        }
        let elapsed = ContinuousClock.now - started

        // Observers settle on the final state.
        var settled = false
        for _ in 0..<500 {
            let values = latest.values.withLock { $0 }
            settled = try observerQueries.indices.allSatisfy { try values[$0] == repository.activities(matching: observerQueries[$0]) }
            if settled { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(settled, "an observer's last value differs from a fresh query after the writers finished")
        for task in observerTasks { task.cancel() }

        let problems = readerResults.flatMap(\.problems)
        #expect(problems.isEmpty, "\(problems.count) reader problems, first: \(problems.prefix(5))")
        let expected = results.reduce(into: [UUID: ActivityModel]()) { $0.merge($1.final) { a, _ in a } }
        let events = results.map(\.events).reduce(0, +)

        func checkFinal(_ repository: EventSourcedActivityRepository, _ label: String) throws {
            let all = try Reliability.all(repository)
            #expect(all.count == expected.count, "\(label): \(all.count) activities, expected \(expected.count)")
            #expect(Dictionary(uniqueKeysWithValues: all.map { ($0.id, $0) }) == expected, "\(label): final state differs")
            #expect(repository.projection.integrityIssues.isEmpty, "\(label)")
            var next: LogPosition = 0
            var gaps = 0
            try repository.store.log.forEachRecord(from: 0, through: nil) { record in
                if record.position != next { gaps += 1 }
                next = record.position + 1
                return true
            }
            #expect(gaps == 0 && next == LogPosition(events), "\(label): \(gaps) gaps, \(next) records for \(events) acknowledged writes")
        }
        try checkFinal(repository, "live")
        try await repository.close()
        let reopened = try EventSourcedActivityRepository.open(at: store, configuration: configuration)
        try checkFinal(reopened, "reopened")
        try await reopened.close()
        let queries = readerResults.map(\.queries).reduce(0, +)
        print("concurrency stress: \(events) writes by \(Self.writers) writers, \(queries) queries (\(readerResults.map(\.returned).reduce(0, +)) rows) by \(Self.readers) readers, \(observerQueries.count) observers, in \(elapsed)")
    }
}
