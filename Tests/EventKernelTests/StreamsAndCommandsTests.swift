import Foundation
import Testing
import EventLog
import EventKernel
import EventKernelTestSupport

// The forum shape: ids numbered per table, as apps number them.
struct ForumThread: Identifiable, Codable, Sendable, Equatable { var id: Int; var title: String; var postCount: Int }
struct ForumPost: Identifiable, Codable, Sendable, Equatable { var id: Int; var threadID: Int; var text: String }
struct Person: Identifiable, Codable, Sendable, Equatable { var id: String; var name: String; var managerID: String? }
struct Counter: Identifiable, Codable, Sendable, Equatable { var id: UUID; var value: Int; var writer: Int }


@Suite struct StreamsAndCommandsTests {
    @Test func threadAndPostWithTheSameIDAreDifferentStreams() async throws {
        let store = try EventStore(log: InMemoryLog())
        let threads = try EventSourcedRepository<ForumThread>(store: store, typeName: "Thread")
        let posts = try EventSourcedRepository<ForumPost>(store: store, typeName: "Post")
        try await threads.add(ForumThread(id: 100, title: "Welcome", postCount: 0))
        // One atomic command: add post 100 and update thread 100 (same id, other type).
        try await store.execute { command in
            try posts.add(ForumPost(id: 100, threadID: 100, text: "first!"), in: &command)
            try threads.update(ForumThread(id: 100, title: "Welcome", postCount: 1), in: &command)
        }
        #expect(threads.fetch(id: 100)?.postCount == 1)
        #expect(posts.fetch(id: 100)?.text == "first!")
        #expect(threads.version(of: 100) == 2)
        #expect(posts.version(of: 100) == 1)
        #expect(try threads.history(of: 100).map(\.eventType) == ["Thread.added", "Thread.updated"])
        #expect(try posts.history(of: 100).map(\.stream) == [StreamID("Post", .string("100"))])
        // The batch was one log batch: both events share a commit.
        #expect(store.nextPosition == 3)
    }

    @Test(arguments: StoreBackend.allCases)
    func concurrentAddsOfOneIDExactlyOneWins(backend: StoreBackend) async throws {
      try await backend.withStore { store, _ in
        let counters = try EventSourcedRepository<Counter>(store: store, typeName: "Counter")
        let trials = backend == .local ? testScale.pick(2_000, small: 200) : testScale.pick(500, small: 100)
        var violations: [Int] = []
        for trial in 0..<trials {
            let id = UUID()
            let wins = await withTaskGroup(of: Bool.self) { group in
                for writer in 0..<8 {
                    group.addTask {
                        do {
                            try await counters.add(Counter(id: id, value: trial, writer: writer))
                            return true
                        } catch RepositoryError.alreadyExists { return false } catch {
                            Issue.record("unexpected error \(error)")
                            return false
                        }
                    }
                }
                var wins = 0
                for await won in group where won { wins += 1 }
                return wins
            }
            if wins != 1 || counters.version(of: id) != 1 { violations.append(trial) }
        }
        #expect(violations.isEmpty, "\(violations.count) of \(trials) trials had other than one winner")
        #expect(store.nextPosition == LogPosition(trials))
      }
    }

    @Test(arguments: StoreBackend.allCases)
    func concurrentSavesAllSucceedAndTheLastWins(backend: StoreBackend) async throws {
      try await backend.withStore { store, _ in
        let counters = try EventSourcedRepository<Counter>(store: store, typeName: "Counter")
        for trial in 0..<(testScale.pick(40, small: 5)) {
            let id = UUID()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<16 {
                    group.addTask { try await counters.save(Counter(id: id, value: trial, writer: writer)) }
                }
                try await group.waitForAll()
            }
            let history = try counters.history(of: id)
            #expect(history.count == 16)
            #expect(history.map(\.eventType) == ["Counter.added"] + Array(repeating: "Counter.updated", count: 15))
            #expect(history.map(\.entityVersion) == Array(1...16))
            // The state is the last save committed, and every writer's save is in the history.
            let last = try BinaryEntityDecoder().decode(Counter.self, from: history[15].payload)
            #expect(counters.fetch(id: id) == last)
            let writers = try history.map { try BinaryEntityDecoder().decode(Counter.self, from: $0.payload).writer }
            #expect(Set(writers) == Set(0..<16))
        }
      }
    }

    @Test(arguments: StoreBackend.allCases)
    func concurrentUpdatesRetryAndExpectedVersionsConflict(backend: StoreBackend) async throws {
      try await backend.withStore { store, _ in
        let counters = try EventSourcedRepository<Counter>(store: store, typeName: "Counter")
        let id = UUID()
        try await counters.add(Counter(id: id, value: 0, writer: -1))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<16 { group.addTask { try await counters.update(Counter(id: id, value: writer, writer: writer)) } }
            try await group.waitForAll()
        }
        #expect(counters.version(of: id) == 17)
        // A caller that edited version 17 and expects it: accepted once, then a conflict.
        try await counters.update(Counter(id: id, value: 100, writer: 100), expectedVersion: 17)
        await #expect(throws: RepositoryError.conflict(stream: counters.stream(of: id), expected: 17, actual: 18)) {
            try await counters.update(Counter(id: id, value: 101, writer: 101), expectedVersion: 17)
        }
        #expect(counters.fetch(id: id)?.value == 100)
      }
    }

    @Test(arguments: StoreBackend.allCases)
    func deleteOfAnUnknownIDIsANoOp(backend: StoreBackend) async throws {
      try await backend.withStore { store, _ in
        let log = store.log
        let people = try EventSourcedRepository<Person>(store: store, typeName: "Person")
        #expect(try await people.delete(id: "nobody") == false)
        #expect(try await people.deleteAll(ids: ["a", "b"]) == 0)
        #expect(log.bounds.nextPosition == 0)
        try await people.add(Person(id: "a", name: "A"))
        #expect(try await people.delete(id: "a") == true)
        #expect(try await people.delete(id: "a") == false)
        #expect(log.bounds.nextPosition == 2)
      }
    }

    @Test(arguments: StoreBackend.allCases)
    func stringIDsAreExact(backend: StoreBackend) async throws {
      try await backend.withStore { store, location in
        let people = try EventSourcedRepository<Person>(store: store, typeName: "Person")
        let upper = "0A1B2C3D-0000-4000-8000-00000000000F", lower = upper.lowercased()
        try await people.add(Person(id: upper, name: "upper"))
        try await people.add(Person(id: lower, name: "lower"))
        // Precomposed and decomposed é: equal as Swift Strings, different ids.
        try await people.add(Person(id: "caf\u{E9}", name: "precomposed"))
        try await people.add(Person(id: "cafe\u{301}", name: "decomposed"))
        #expect(people.count == 4)
        #expect(people.fetch(id: upper)?.name == "upper")
        #expect(people.fetch(id: lower)?.name == "lower")
        #expect(people.fetch(id: "cafe\u{301}")?.name == "decomposed")
        #expect(try people.history(of: lower).map(\.entityID) == [.string(lower)])
        #expect(EntityID.string(upper) != EntityID.string(lower))
        #expect(EntityID(parsing: upper) == .uuid(UUID(uuidString: upper)!))
        // Codable keeps the case of the id.
        let decoded = try JSONDecoder().decode(EntityID.self, from: JSONEncoder().encode(EntityID.string(upper)))
        #expect(decoded == .string(upper))
        // The log keeps them apart too: read back by another store, the four are four.
        try await store.close()
        let reopened = try await location.open(snapshots: false)
        let again = try EventSourcedRepository<Person>(store: reopened, typeName: "Person")
        #expect(again.count == 4)
        #expect(again.fetch(id: "caf\u{E9}")?.name == "precomposed")
        try await reopened.close()
      }
    }

    @Test func predicatesMayReadTheRepository() async throws {
        let store = try EventStore(log: InMemoryLog())
        let people = try EventSourcedRepository<Person>(store: store, typeName: "Person")
        try await people.addAll([
            Person(id: "boss", name: "Boss"), Person(id: "a", name: "A", managerID: "boss"),
            Person(id: "b", name: "B", managerID: "gone"),
        ])
        // Each closure reads the same repository: it must not deadlock.
        let managed = people.fetch(where: { person in person.managerID.flatMap { people.fetch(id: $0) } != nil })
        #expect(managed.map(\.id) == ["a"])
        let sorted = people.fetch(where: { _ in true }, sortedBy: { people.fetch(id: $0.id)!.name > people.fetch(id: $1.id)!.name })
        #expect(sorted.map(\.id) == ["boss", "b", "a"])
        var observed = people.observe(where: { person in person.managerID.map { people.fetch(id: $0) == nil } ?? false })
            .makeAsyncIterator()
        #expect(await observed.next()?.map(\.id) == ["b"])
        let deleted = try await people.deleteAll(where: { person in person.managerID.map { people.fetch(id: $0) == nil } ?? false })
        #expect(deleted == 1)
        #expect(await observed.next()?.map(\.id) == [])
        let renamed = try await people.updateAll(where: { people.fetch(id: $0.managerID ?? "") != nil }) { $0.name += "!" }
        #expect(renamed == 1 && people.fetch(id: "a")?.name == "A!")
        try await store.close()
    }

    @Test func observationEndsWhenTheStoreCloses() async throws {
        let store = try EventStore(log: InMemoryLog())
        let people = try EventSourcedRepository<Person>(store: store, typeName: "Person")
        let stream = people.observe(where: { _ in true })
        let consumer = Task {
            var results: [[String]] = []
            for await people in stream { results.append(people.map(\.id)) }
            return results
        }
        try await people.add(Person(id: "x", name: "X"))
        try await store.close()
        // The loop ends (the test would hang otherwise); the last commit before close was seen.
        let results = await consumer.value
        #expect(results.first == [] || results.first == ["x"])
        #expect(results.last == ["x"])
        // Observing a closed store yields the current result once and ends.
        var late = people.observe(where: { _ in true }).makeAsyncIterator()
        #expect(await late.next()?.map(\.id) == ["x"])
        #expect(await late.next() == nil)
        // Subscriptions end too.
        var events = store.subscribe().makeAsyncIterator()
        #expect(try await events.next() == nil)
    }

    @Test func aCommandRetriesOnTheNewStateAndReadsVersionsFirst() async throws {
        let store = try EventStore(log: InMemoryLog())
        let counters = try EventSourcedRepository<Counter>(store: store, typeName: "Counter")
        let id = UUID()
        try await counters.add(Counter(id: id, value: 0, writer: 0))
        // A read-modify-write command that loses once: a concurrent change lands between its
        // read and its append, so it conflicts and decides again on the new state.
        var attempts = 0
        try await store.execute { command in
            attempts += 1
            let current = try #require(command.read(counters.stream(of: id)) { counters.fetch(id: id) })
            if attempts == 1 {
                // Simulate another writer committing after our read.
                // On its own thread: this closure blocks a cooperative thread meanwhile, and on a
                // busy 2-core machine the pool may have no other free.
                let other = Task(executorPreference: DedicatedThreadExecutor.shared) {
                    try await counters.update(Counter(id: id, value: 50, writer: 1))
                }
                // Counted checks, not wall time: a sanitizer run can starve the other task.
                var checks = 0
                while counters.version(of: id) < 2, checks < 180_000 { Thread.sleep(forTimeInterval: 0.001); checks += 1 }
                _ = other
            }
            try counters.update(Counter(id: id, value: current.value + 1, writer: 2), in: &command)
        }
        #expect(attempts == 2)
        #expect(counters.fetch(id: id)?.value == 51)
        // A command that touches an entity twice is refused: merge the changes instead.
        await #expect(throws: RepositoryError.self) {
            try await store.execute { command in
                try counters.save(Counter(id: id, value: 1, writer: 3), in: &command)
                try counters.save(Counter(id: id, value: 2, writer: 3), in: &command)
            }
        }
        // A duplicate add inside one batch is alreadyExists, and nothing is written.
        let fresh = Counter(id: UUID(), value: 0, writer: 0)
        let before = store.nextPosition
        await #expect(throws: RepositoryError.alreadyExists(.uuid(fresh.id))) { try await counters.addAll([fresh, fresh]) }
        #expect(store.nextPosition == before)
        // A stream appended to without a read is known to be appended to, also after a read of it.
        let unread = StreamID("Counter", .uuid(UUID())), other = StreamID("Counter", .uuid(UUID()))
        // (The command throws what it saw, so nothing is written.)
        struct Seen: Error { var flags: [Bool] }
        await #expect {
            try await store.execute { command in
                let before = command.isAppending(to: unread)
                command.append(EncodedEvent(eventType: "Counter.added", schemaVersion: 1, stream: unread, payload: []))
                let after = command.isAppending(to: unread)
                _ = try command.version(of: unread)
                throw Seen(flags: [before, after, command.isAppending(to: unread), command.isAppending(to: other)])
            }
        } throws: { ($0 as? Seen)?.flags == [false, true, true, false] }
    }

    @Test func validationRunsBeforeAnyWrite() async throws {
        let log = InMemoryLog()
        let store = try EventStore(log: log)
        struct EmptyName: Error {}
        let people = try EventSourcedRepository<Person>(store: store, typeName: "Person", validate: { person in
            if person.name.isEmpty { throw EmptyName() }
        })
        await #expect(throws: EmptyName.self) { try await people.add(Person(id: "a", name: "")) }
        await #expect(throws: EmptyName.self) { try await people.save(Person(id: "a", name: "")) }
        await #expect(throws: EmptyName.self) {
            try await people.addAll([Person(id: "b", name: "B"), Person(id: "c", name: "")])
        }
        #expect(log.bounds.nextPosition == 0)
    }
}

/// Runs tasks that prefer it on one dedicated dispatch queue, outside the cooperative pool.
final class DedicatedThreadExecutor: TaskExecutor, Sendable {
    static let shared = DedicatedThreadExecutor()
    private let queue = DispatchQueue(label: "eventkernel.tests.dedicated")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
