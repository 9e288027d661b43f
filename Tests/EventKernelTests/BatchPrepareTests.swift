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
    /// event of another entity type between them: every entity gets its own keys (a key row
    /// taken by the event's place in the batch, not the entity's, would index `b` under `a`'s
    /// unit), and the update's keys replace the add's.
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
    /// keys, the projection fails at that event's position with its cause, and nothing after
    /// it is folded (as when each event was prepared on its own).
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
    }
}
