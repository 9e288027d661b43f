import Foundation
import Testing
import EventLog
import EventKernel
import EventKernelTestSupport

/// A repository's projection prepares a whole batch at once (decoding every event, then the
/// index keys of the batch's entities a property at a time) and folds each event with its own
/// row of those keys: these batches mix what a wrong pairing of events and key rows would mix up.
@Suite struct BatchPrepareTests {
    static let typeName = "Reading"

    /// A `Reading.added`/`updated` payload at schema version 2 (``ReadingCodec``'s layout).
    static func payload(_ reading: Reading) -> [UInt8] {
        var bytes: [UInt8] = []
        withUnsafeBytes(of: reading.value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: Array(reading.unit.utf8))
        return bytes
    }

    static func event(_ kind: String, _ reading: Reading) -> EncodedEvent {
        EncodedEvent(eventType: "Reading.\(kind)", schemaVersion: 2, stream: StreamID(typeName, .uuid(reading.id)),
                     payload: kind == "deleted" ? [] : payload(reading))
    }

    static func units(_ repository: EventSourcedRepository<Reading>, _ unit: String) throws -> [UUID] {
        try repository.fetch(EntityQuery<Reading>().where(\.unit, equals: unit).orderBy(\.value)).map(\.id)
    }

    /// One batch holding adds, an update of an entity added earlier in it, a deletion and an
    /// event of another entity type between them: every entity gets its own keys, and the
    /// update's keys replace the add's. A key row taken by the event's place in the batch
    /// (events 0, 3, 4, 5) rather than the entity's among the batch's entities (0, 1, 2, 3)
    /// would give `b` the row of `c` (`b` found under `kWh`, not `m³`) and read past the last
    /// row for `a2` (a trap); rows paired one off would file `b` under `a`'s `kWh`, and `a2`
    /// under `b`'s value (the order under `m³` would flip).
    @Test func eachEventOfAMixedBatchFoldsWithItsOwnKeys() async throws {
        let store = try EventStore.inMemory()
        let repository = try ReadingCodec.repository(store)
        let gone = Reading(id: UUID(), value: 9, unit: "°C")
        try await repository.add(gone)
        let a = Reading(id: UUID(), value: 1, unit: "kWh"), b = Reading(id: UUID(), value: 2, unit: "m³")
        var a2 = a
        a2.unit = "m³"
        a2.value = 3
        let c = Reading(id: UUID(), value: 4, unit: "kWh")
        try await store.execute { command in
            command.append(Self.event("added", a))
            command.append(Self.event("deleted", gone))
            command.append(EncodedEvent(eventType: "Other.added", schemaVersion: 1, stream: StreamID("Other", .uuid(UUID())), payload: [7]))
            command.append(Self.event("added", b))
            command.append(Self.event("updated", a2))
            command.append(Self.event("added", c))
        }
        #expect(repository.projection.failure == nil)
        #expect(Set(repository.fetchAll()) == [a2, b, c])
        #expect(try Self.units(repository, "m³") == [b.id, a2.id])
        #expect(try Self.units(repository, "kWh") == [c.id])
        #expect(try Self.units(repository, "°C") == [])
        #expect(repository.version(of: a.id) == 2)
    }

    /// A batch whose middle event does not decode: the events before it are folded with their
    /// keys (checked by an indexed query, which reads the index entries, not only the entity),
    /// the projection fails at that event's position with its cause, and nothing after it is
    /// folded (as when each event was prepared on its own).
    @Test func aBatchFailsAtItsUndecodableEventAndKeepsWhatCameBefore() async throws {
        let store = try EventStore.inMemory()
        let repository = try ReadingCodec.repository(store)
        let a = Reading(id: UUID(), value: 1, unit: "kWh"), c = Reading(id: UUID(), value: 3, unit: "kWh")
        try await store.execute { command in
            command.append(Self.event("added", a))
            command.append(EncodedEvent(eventType: "Reading.added", schemaVersion: 2, stream: StreamID(Self.typeName, .uuid(UUID())), payload: [1, 2, 3]))
            command.append(Self.event("added", c))
        }
        let failure = try #require(repository.projection.failure)
        #expect(failure.position == 1)
        #expect((failure.cause as? ReadingPayloadError) == ReadingPayloadError(reason: "3 bytes"))
        #expect(repository.projection.withLockedState { $0[.uuid(a.id)] } == a)
        #expect(repository.projection.withLockedState { $0[.uuid(c.id)] } == nil)
        #expect(repository.projection.withLockedState { $0.count } == 1)
        #expect(try Self.units(repository, "kWh") == [a.id])
    }

    /// A field event on the indexed `unit` (the payload is the unit's UTF-8).
    static let relabelled = FieldEvent<Reading, String>("relabelled", sets: \.unit, encode: { unit, bytes in
        bytes += Array(unit.utf8)
    }, decode: { payload, _ in String(decoding: payload, as: UTF8.self) })

    static func relabelling(_ store: EventStore) throws -> EventSourcedRepository<Reading> {
        try EventSourcedRepository<Reading>(store: store, typeName: typeName, schema: ReadingCodec.schema.recording(relabelled),
                                            indexes: [.on(\.unit, \.value)])
    }

    /// Add `x`, a field event moving `x` to another unit, add `y`, in one batch: the field event
    /// is folded between the two adds with the row the table holds for `x` (its add's keys), and
    /// `y` keeps its own row. Were `y` paired with `x`'s row (the field event taking no row, but
    /// counted as one), `y` would be found under `kWh`; were the field event's value not spliced
    /// into `x`'s keys, `x` would stay under `kWh`; were `y` folded with the next row, the batch
    /// would trap past the last row.
    @Test func aFieldEventBetweenAddsOfOneBatchMovesItsEntityInTheIndex() async throws {
        let store = try EventStore.inMemory()
        let repository = try Self.relabelling(store)
        let x = Reading(id: UUID(), value: 1, unit: "kWh"), y = Reading(id: UUID(), value: 2, unit: "°C")
        try await store.execute { command in
            command.append(Self.event("added", x))
            command.append(EncodedEvent(eventType: "Reading.relabelled", schemaVersion: 2, stream: StreamID(Self.typeName, .uuid(x.id)),
                                        payload: Array("m³".utf8)))
            command.append(Self.event("added", y))
        }
        #expect(repository.projection.failure == nil)
        #expect(repository.fetch(id: x.id) == Reading(id: x.id, value: 1, unit: "m³"))
        #expect(repository.fetch(id: y.id) == y)
        #expect(repository.explain(EntityQuery<Reading>().where(\.unit, equals: "m³")).hasPrefix("index ("))
        #expect(try Self.units(repository, "m³") == [x.id])
        #expect(try Self.units(repository, "°C") == [y.id])
        #expect(try Self.units(repository, "kWh") == [])
        #expect(repository.version(of: x.id) == 2)
        #expect(repository.version(of: y.id) == 1)
    }

    /// What a test compares of a table: each unit's readings by an indexed query (the index
    /// entries, in key order), every entity, and the versions (a deleted one's included).
    struct Answers: Equatable {
        var byUnit: [String: [UUID]]
        var all: Set<Reading>
        var versions: [UUID: UInt64]
        var count: Int

        init(_ repository: EventSourcedRepository<Reading>, units: [String], ids: [UUID]) throws {
            byUnit = try Dictionary(uniqueKeysWithValues: units.map { ($0, try BatchPrepareTests.units(repository, $0)) })
            all = Set(repository.fetchAll())
            versions = Dictionary(uniqueKeysWithValues: ids.map { ($0, repository.version(of: $0)) })
            count = repository.count
        }
    }

    /// Batches mixing adds with `$deleted` and `$purged` tombstones (and the type's own
    /// deletion), a tombstone between two adds of the same unit: the live table and a replay
    /// of the log (no snapshot) give the same answers, and the expected ones. A tombstone
    /// counted as a keyed entity would shift the later adds' rows (`e` filed under `d`'s value,
    /// or a trap past the last row); one not read as a deletion would leave `b`/`c` in the
    /// index, under `kWh`.
    @Test func tombstonesMixedWithAddsFoldAsAReplayDoes() async throws {
        let directory = TemporaryDirectory("ek-batch-tombstones")
        let a = Reading(id: UUID(), value: 1, unit: "kWh"), b = Reading(id: UUID(), value: 2, unit: "kWh")
        let c = Reading(id: UUID(), value: 3, unit: "kWh"), f = Reading(id: UUID(), value: 6, unit: "°C")
        let d = Reading(id: UUID(), value: 4, unit: "kWh"), e = Reading(id: UUID(), value: 5, unit: "m³")
        let g = Reading(id: UUID(), value: 7, unit: "kWh")
        let ids = [a, b, c, d, e, f, g].map(\.id), units = ["kWh", "m³", "°C"]
        let live: Answers
        do {
            let store = try EventStore.open(at: directory.url, snapshotPolicy: .never)
            let repository = try ReadingCodec.repository(store)
            try await repository.addAll([a, b, c, f])
            let (purged, deleted) = try await store.execute { command in
                command.append(Self.event("added", d))
                command.append(Tombstone.deleted.event(for: StreamID(Self.typeName, .uuid(b.id))))
                command.append(Self.event("added", e))
                let purged = try repository.purge(id: c.id, in: &command)
                let deleted = try repository.delete(id: f.id, in: &command)
                command.append(Self.event("added", g))
                return (purged, deleted)
            }
            #expect(purged && deleted)
            #expect(repository.projection.failure == nil)
            live = try Answers(repository, units: units, ids: ids)
            #expect(live.byUnit == ["kWh": [a.id, d.id, g.id], "m³": [e.id], "°C": []])
            #expect(live.all == [a, d, e, g])
            #expect(live.versions == [a.id: 1, b.id: 2, c.id: 2, d.id: 1, e.id: 1, f.id: 2, g.id: 1])
            try await store.close()
        }
        // Every event folded again: no snapshot was written (policy `.never`) nor restored.
        let store = try EventStore.open(at: directory.url, snapshotPolicy: .never)
        let repository = try ReadingCodec.repository(store)
        #expect(repository.projection.eventsApplied == 10)
        #expect(try Answers(repository, units: units, ids: ids) == live)
        #expect(store.isPurged(StreamID(Self.typeName, .uuid(c.id))))
        try await store.close()
    }
}
