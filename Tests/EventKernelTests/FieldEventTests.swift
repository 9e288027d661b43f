import Foundation
import Testing
import EventLog
import EventKernel
import EventKernelTestSupport

/// A job with a start and an optional end: the shape of an activity, for field events.
struct Job: Identifiable, Codable, Sendable, Equatable {
    var id: Int
    var owner: String
    var start: Double
    var end: Double?
    var shouting: String { owner.uppercased() }
}

/// Field events (issue 26, item 1: domain events beyond added/updated/deleted, such as
/// Activities' `ended`): `FieldEvent`, `EntitySchema.recording(_:)`,
/// `EventSourcedRepository.apply(_:_:to:expectedVersion:)`.
@Suite struct FieldEventTests {
    static let ended = FieldEvent<Job, Double?>("ended", sets: \.end)
    static let reassigned = FieldEvent<Job, String>("reassigned", sets: \.owner, encode: { owner, bytes in
        bytes += Array(owner.utf8)
    }, decode: { payload, schemaVersion in
        // A payload codec of the domain's; version 1 wrote the owner in lower case.
        let text = String(decoding: payload, as: UTF8.self)
        return schemaVersion == 1 ? text.capitalized : text
    })
    static let indexes: [EntityIndex<Job>] = [.on(\.owner, \.start), .interval(start: \.start, end: \.end)]

    static func repository(_ store: EventStore, schemaVersion: UInt16 = 2, validate: (@Sendable (Job) throws -> Void)? = nil) throws -> EventSourcedRepository<Job> {
        var schema = EntitySchema<Job>(version: schemaVersion)
        if schemaVersion > 1 { schema = schema.upcasting(from: 1, decoding: Job.self) { $0 } }
        return try EventSourcedRepository<Job>(
            store: store, typeName: "Job", schema: schema.recording(ended).recording(reassigned), indexes: indexes, validate: validate)
    }

    static func running(_ range: ClosedRange<Double>) -> EntityQuery<Job> {
        EntityQuery<Job>().where(\.start, \.end, overlapping: range)
    }

    @Test func aFieldEventSetsThePropertyAndEveryIndexFollows() async throws {
        let store = try EventStore(log: InMemoryLog(), snapshotPolicy: .never)
        let jobs = try Self.repository(store)
        try await jobs.addAll([Job(id: 1, owner: "Ada", start: 10), Job(id: 2, owner: "Ada", start: 20), Job(id: 3, owner: "Bob", start: 30)])
        // Running jobs extend forever: all three overlap [100, 200].
        #expect(try jobs.fetch(Self.running(100...200)).map(\.id) == [1, 2, 3])

        try await jobs.apply(Self.ended, 15, to: 1)
        try await jobs.apply(Self.reassigned, "Bob", to: 2)
        #expect(jobs.fetch(id: 1) == Job(id: 1, owner: "Ada", start: 10, end: 15))
        #expect(jobs.fetch(id: 2) == Job(id: 2, owner: "Bob", start: 20))
        // The interval index filed job 1 under its end; the composite index job 2 under its owner.
        #expect(try jobs.fetch(Self.running(100...200)).map(\.id) == [2, 3])
        #expect(try jobs.fetch(Self.running(12...14)).map(\.id) == [1])
        #expect(try jobs.fetch(EntityQuery<Job>().where(\.owner, equals: "Bob")).map(\.id) == [2, 3])
        #expect(try jobs.fetch(EntityQuery<Job>().where(\.owner, equals: "Ada")).map(\.id) == [1])
        #expect(jobs.explain(EntityQuery<Job>().where(\.owner, equals: "Bob")).hasPrefix("index ("))

        // The log says what happened, in the domain's words, with the value alone.
        let history = try jobs.history(of: 1)
        #expect(history.map(\.eventType) == ["Job.added", "Job.ended"])
        #expect(history.map(\.entityVersion) == [1, 2])
        #expect(jobs.version(of: 1) == 2)
        #expect(try jobs.history(of: 2).last?.payload == Array("Bob".utf8))
        // Ending it again, or ending it never: the value may be nil.
        try await jobs.apply(Self.ended, nil, to: 1)
        #expect(try jobs.fetch(Self.running(100...200)).map(\.id) == [1, 2, 3])
    }

    @Test func replayAndSnapshotsGiveTheSameState() async throws {
        let directory = TemporaryDirectory("ek-field-events")
        do {
            let store = try EventStore.open(at: directory.url, snapshotPolicy: .never)
            let jobs = try Self.repository(store)
            try await jobs.addAll((0..<50).map { Job(id: $0, owner: $0.isMultiple(of: 2) ? "Ada" : "Bob", start: Double($0)) })
            for id in stride(from: 0, to: 50, by: 3) { try await jobs.apply(Self.ended, Double(id) + 0.5, to: id) }
            try await jobs.apply(Self.reassigned, "Cy", to: 7)
            try await store.close()
        }
        let expected = (0..<50).map { id in
            Job(id: id, owner: id == 7 ? "Cy" : id.isMultiple(of: 2) ? "Ada" : "Bob", start: Double(id), end: id.isMultiple(of: 3) ? Double(id) + 0.5 : nil)
        }
        // A full replay of the log, then a snapshot, then a start from the snapshot.
        for step in ["replay", "snapshot"] {
            let store = try EventStore.open(at: directory.url, snapshotPolicy: .never)
            let jobs = try Self.repository(store)
            #expect(jobs.fetchAll() == expected, "\(step)")
            #expect(try jobs.fetch(Self.running(1_000...2_000)).map(\.id) == expected.filter { $0.end == nil }.map(\.id), "\(step)")
            #expect(try jobs.count(EntityQuery<Job>().where(\.owner, equals: "Cy")) == 1, "\(step)")
            // The second step starts from the snapshot, not from a second replay.
            if step == "snapshot" { #expect(jobs.projection.eventsApplied == 0) }
            if step == "replay" { try await store.writeSnapshots() }
            try await store.close()
        }
        // Time travel folds the same events: before the reassignment, job 7 was Bob's.
        let store = try EventStore.open(at: directory.url, snapshotPolicy: .never)
        let jobs = try Self.repository(store)
        let reassignment = try #require(try jobs.history(of: 7).last?.position)
        #expect(try jobs.entities(throughPosition: reassignment - 1).first { $0.id == 7 }?.owner == "Bob")
        #expect(try jobs.entities(throughPosition: reassignment).first { $0.id == 7 }?.owner == "Cy")
        try await store.close()
    }

    @Test func theDecoderSeesTheSchemaVersionItWasWrittenAt() async throws {
        let log = InMemoryLog()
        do {
            let store = try EventStore(log: log, snapshotPolicy: .never)
            let jobs = try Self.repository(store, schemaVersion: 1)
            try await jobs.add(Job(id: 1, owner: "Ada", start: 0))
            try await jobs.apply(Self.reassigned, "grace", to: 1)
        }
        let store = try EventStore(log: log, snapshotPolicy: .never)
        let jobs = try Self.repository(store, schemaVersion: 2)
        #expect(jobs.fetch(id: 1)?.owner == "Grace")
    }

    @Test func commandsRefuseAMissingEntityAnUnregisteredEventAndAnInvalidResult() async throws {
        let store = try EventStore(log: InMemoryLog(), snapshotPolicy: .never)
        struct Invalid: Error, Equatable {}
        let jobs = try Self.repository(store, validate: { job in if let end = job.end, end < job.start { throw Invalid() } })
        try await jobs.add(Job(id: 1, owner: "Ada", start: 10))

        await #expect { try await jobs.apply(Self.ended, 20, to: 99) } throws: { error in
            guard case RepositoryError.notFound(let id) = error else { return false }
            return id == 99.entityID
        }
        let unregistered = FieldEvent<Job, Double>("moved", sets: \.start)
        await #expect { try await jobs.apply(unregistered, 5, to: 1) } throws: { error in
            guard case RepositoryError.misuse(let misuse) = error else { return false }
            return misuse.code == .unregisteredFieldEvent && misuse.message.contains("moved")
        }
        // An event of the same name setting another property is not the registered one.
        let impostor = FieldEvent<Job, Double>("ended", sets: \.start)
        await #expect { try await jobs.apply(impostor, 5, to: 1) } throws: { error in
            guard case RepositoryError.misuse(let misuse) = error else { return false }
            return misuse.code == .unregisteredFieldEvent
        }
        // The validator sees the entity with the new value: an end before the start.
        await #expect(throws: Invalid.self) { try await jobs.apply(Self.ended, 5, to: 1) }
        // An expected version that is not the entity's: a conflict, nothing written.
        await #expect { try await jobs.apply(Self.ended, 20, to: 1, expectedVersion: 7) } throws: { error in
            guard case RepositoryError.conflict(_, let expected, let actual) = error else { return false }
            return expected == 7 && actual == 1
        }
        #expect(jobs.fetch(id: 1) == Job(id: 1, owner: "Ada", start: 10))
        #expect(try jobs.history(of: 1).count == 1)
        // In one command with other changes.
        try await store.execute { command in
            try jobs.add(Job(id: 2, owner: "Bob", start: 0), in: &command)
            try jobs.apply(Self.ended, 30, to: 1, expectedVersion: 1, in: &command)
        }
        #expect(jobs.fetch(id: 1)?.end == 30 && jobs.fetch(id: 2) != nil)
    }

    @Test func aFieldEventOfAnEntityThatDoesNotExistFailsTheProjectionNamingIt() async throws {
        let store = try EventStore(log: InMemoryLog(), snapshotPolicy: .never)
        let jobs = try Self.repository(store)
        try await jobs.add(Job(id: 1, owner: "Ada", start: 10))
        // A writer that bypassed the repository's commands, with a payload that decodes.
        let elsewhere = try Self.repository(try EventStore(log: InMemoryLog(), snapshotPolicy: .never))
        try await elsewhere.add(Job(id: 5, owner: "Bob", start: 0))
        try await elsewhere.apply(Self.ended, 5, to: 5)
        let payload = try #require(try elsewhere.history(of: 5).last?.payload)
        try await store.append(PendingEvent(EncodedEvent(eventType: "Job.ended", schemaVersion: 2, stream: jobs.stream(of: 5), payload: payload)))
        let failure = try #require(jobs.projection.failure)
        #expect(failure.eventType == "Job.ended" && failure.stream == jobs.stream(of: 5))
        #expect(failure.cause as? EventDecodingError == .noEntityForFieldEvent(eventType: "Job.ended", stream: jobs.stream(of: 5)))
        // Writes are refused: the projection is not the log's any more.
        await #expect { try await jobs.add(Job(id: 2, owner: "Bob", start: 0)) } throws: { error in
            guard case RepositoryError.undecodableEvent = error else { return false }
            return true
        }
    }

    @Test func theRegisteredCodecWritesWhicheverFieldEventValueIsPassed() async throws {
        let store = try EventStore(log: InMemoryLog(), snapshotPolicy: .never)
        let jobs = try Self.repository(store)
        try await jobs.add(Job(id: 2, owner: "Ada", start: 0))
        // A twin of the registered event in the Codable form: the log gets the registered
        // event's payload (UTF-8), which its fold reads back.
        try await jobs.apply(FieldEvent<Job, String>("reassigned", sets: \.owner), "Bob", to: 2)
        #expect(try jobs.history(of: 2).last?.payload == Array("Bob".utf8))
        #expect(jobs.fetch(id: 2)?.owner == "Bob")
        let replayed = try Self.repository(try EventStore(log: InMemoryLog(), snapshotPolicy: .never))
        #expect(replayed.fetch(id: 2) == nil)
    }

    @Test func indexesAFieldEventWouldLeaveStaleAreRefused() async throws {
        let store = try EventStore(log: InMemoryLog(), snapshotPolicy: .never)
        // A computed property's key would have to be computed again under the lock.
        #expect { try EventSourcedRepository<Job>(store: store, typeName: "Job", schema: EntitySchema().recording(Self.ended),
                                                     indexes: [.on(\.shouting)]) } throws: { error in
            guard case RepositoryError.misuse(let misuse) = error else { return false }
            return misuse.code == .fieldEventIndexConflict && misuse.message.contains("not a stored property")
        }
        // Without field events the same index is fine.
        _ = try EventSourcedRepository<Job>(store: store, typeName: "Other", indexes: [.on(\.shouting)])
    }

    @Test func aPayloadFromANewerSchemaVersionIsRefused() async throws {
        let store = try EventStore(log: InMemoryLog(), snapshotPolicy: .never)
        let jobs = try Self.repository(store)
        try await jobs.add(Job(id: 1, owner: "Ada", start: 10))
        try await jobs.apply(Self.ended, 12, to: 1)
        let payload = try #require(try jobs.history(of: 1).last?.payload)
        try await store.append(PendingEvent(EncodedEvent(eventType: "Job.ended", schemaVersion: 9, stream: jobs.stream(of: 1), payload: payload)))
        let failure = try #require(jobs.projection.failure)
        #expect(failure.position == 2 && (failure.cause as? EntitySchemaError)?.found == 9)
    }

    @Test func aFieldEventMayNotChangeTheID() async throws {
        let store = try EventStore(log: InMemoryLog(), snapshotPolicy: .never)
        let renumbered = FieldEvent<Job, Int>("renumbered", sets: \.id)
        let jobs = try EventSourcedRepository<Job>(store: store, typeName: "Job", schema: EntitySchema().recording(renumbered))
        try await jobs.add(Job(id: 1, owner: "Ada", start: 10))
        await #expect { try await jobs.apply(renumbered, 9, to: 1) } throws: { error in
            guard case RepositoryError.misuse(let misuse) = error else { return false }
            return misuse.code == .idChanged
        }
        try await jobs.apply(renumbered, 1, to: 1)
        #expect(jobs.fetch(id: 1)?.id == 1 && jobs.fetch(id: 9) == nil)
    }

    @Test func aRebuildKeepsEveryFieldEventTheCurrentSchemaRecords() async throws {
        let store = try EventStore(log: InMemoryLog(), snapshotPolicy: .never)
        let jobs = try Self.repository(store)
        try await jobs.add(Job(id: 1, owner: "Ada", start: 10))
        try await jobs.apply(Self.ended, 12, to: 1)
        await #expect { try await jobs.rebuild(schema: EntitySchema<Job>(version: 2).recording(Self.ended)) } throws: { error in
            guard case RepositoryError.misuse(let misuse) = error else { return false }
            return misuse.code == .invalidRebuild && misuse.message.contains("reassigned")
        }
        // The same events under a new declaration of the indexes: the field events fold again.
        try await jobs.rebuild(indexes: [.interval(start: \.start, end: \.end)])
        #expect(try jobs.fetch(Self.running(11...11.5)).map(\.id) == [1])
        #expect(jobs.fetch(id: 1)?.end == 12)
    }

    @Test func observersSeeAFieldEventAndOneCommitMayAddThenEnd() async throws {
        let store = try EventStore(log: InMemoryLog(), snapshotPolicy: .never)
        let jobs = try Self.repository(store)
        try await jobs.add(Job(id: 1, owner: "Ada", start: 10))
        var updates = try jobs.observe(EntityQuery<Job>().where(\.owner, equals: "Ada")).makeAsyncIterator()
        #expect(await updates.next() == [Job(id: 1, owner: "Ada", start: 10)])
        try await jobs.apply(Self.ended, 11, to: 1)
        #expect(await updates.next() == [Job(id: 1, owner: "Ada", start: 10, end: 11)])

        // An add and a field event of one stream in one append (a writer's batch, as Activities'
        // import writes), folded in order; and the same after a replay.
        let source = try Self.repository(try EventStore(log: InMemoryLog(), snapshotPolicy: .never))
        try await source.add(Job(id: 3, owner: "Bob", start: 1))
        try await source.apply(Self.ended, 2, to: 3)
        let events = try source.history(of: 3).map { PendingEvent(EncodedEvent(eventType: $0.eventType, schemaVersion: $0.schemaVersion, stream: $0.stream, payload: $0.payload)) }
        try await store.append(events)
        #expect(jobs.fetch(id: 3) == Job(id: 3, owner: "Bob", start: 1, end: 2))
        #expect(jobs.version(of: 3) == 2)
        #expect(try jobs.fetch(Self.running(1.5...1.5)).map(\.id) == [3])
    }

    @Test func registeringAComputedPropertyOrARepositoryEventNameStopsTheProgram() async {
        await #expect(processExitsWith: .failure) {
            let computed = FieldEvent<Job, String>("shouted", sets: \Job.shoutingWritable)
            _ = EntitySchema<Job>().recording(computed)
        }
        await #expect(processExitsWith: .failure) {
            _ = EntitySchema<Job>().recording(FieldEvent<Job, Double?>("updated", sets: \.end))
        }
        await #expect(processExitsWith: .failure) {
            _ = EntitySchema<Job>().recording(FieldEventTests.ended).recording(FieldEvent<Job, Double?>("ended", sets: \.end))
        }
    }
}

extension Job {
    /// A computed, writable property: a field event may not set it (its setter is the domain's
    /// code, and folds run under the projection's lock).
    var shoutingWritable: String {
        get { shouting }
        set { owner = newValue.lowercased() }
    }
}
