import Foundation
import Testing
import EventLog
import EventKernel
import EventKernelTestSupport

/// A meter reading: written at version 1 by `Codable`, at version 2 by a hand-written payload
/// (value as 8 little-endian bytes, then the unit's UTF-8; the id is the envelope's).
struct Reading: Identifiable, Codable, Sendable, Hashable {
    var id: UUID
    var value: Double
    var unit: String
}

struct ReadingPayloadError: Error, Equatable {
    var reason: String
}

enum ReadingCodec {
    static let payload = EntityPayloadCodec<Reading>(
        encode: { reading, bytes in
            withUnsafeBytes(of: reading.value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
            bytes.append(contentsOf: Array(reading.unit.utf8))
        },
        decode: { payload, id, version in
            guard version == 2 else { throw ReadingPayloadError(reason: "version \(version)") }
            guard case .uuid(let uuid) = id else { throw ReadingPayloadError(reason: "id \(id) is not a UUID") }
            guard payload.count >= 8 else { throw ReadingPayloadError(reason: "\(payload.count) bytes") }
            let bits = UInt64(littleEndian: payload.loadUnaligned(as: UInt64.self))
            guard let unit = String(validating: payload[8...], as: UTF8.self) else { throw ReadingPayloadError(reason: "unit") }
            return Reading(id: uuid, value: Double(bitPattern: bits), unit: unit)
        })

    /// Version 2, reading version 1 (`Codable`) through the schema's upcaster.
    static let schema = EntitySchema<Reading>(version: 2, payload: payload)
        .upcasting(from: 1, decoding: Reading.self) { $0 }

    static func repository(_ store: EventStore, schema: EntitySchema<Reading> = schema) throws -> EventSourcedRepository<Reading> {
        try EventSourcedRepository<Reading>(store: store, typeName: "Reading", schema: schema, indexes: [.on(\.unit, \.value)])
    }
}

@Suite struct EntityPayloadCodecTests {
    static func readings(_ n: Int, seed: UInt64) -> [Reading] {
        var random = SplitMix64(seed: seed)
        let units = ["kWh", "m³", "°C", ""]
        return (0..<n).map { _ in
            Reading(id: UUID(), value: Double(Int64(bitPattern: random.next()) % 1_000_000) / 7, unit: units[Int(random.next() % 4)])
        }
    }

    /// Events and snapshots go through the payload codec: what is read back, from the live
    /// projection, a snapshot (several parts, decoded in parallel) or a full replay, is what
    /// was written, bit for bit (a NaN and a negative zero included).
    @Test func roundTripsThroughEventsSnapshotsAndReplay() async throws {
        let directory = TemporaryDirectory("ek-payload-codec")
        var expected: [UUID: Reading] = [:]
        var all = Self.readings(9_000, seed: 1)
        all[0].value = .nan
        all[1].value = -0.0
        do {
            let store = try EventStore.open(at: directory.url)
            let repository = try ReadingCodec.repository(store)
            for start in stride(from: 0, to: all.count, by: 1_000) {
                try await repository.addAll(Array(all[start..<start + 1_000]))
            }
            for reading in all { expected[reading.id] = reading }
            var changed = all[5]
            changed.unit = "changed"
            try await repository.update(changed)
            expected[changed.id] = changed
            try await repository.delete(id: all[6].id)
            expected[all[6].id] = nil
            try await store.close()
        }
        func check(_ repository: EventSourcedRepository<Reading>) {
            let found = repository.fetchAll()
            #expect(found.count == expected.count)
            for reading in found {
                let wanted = expected[reading.id]
                #expect(wanted.map { $0.value.bitPattern == reading.value.bitPattern && $0.unit == reading.unit } == true)
            }
        }
        // From the snapshot written at close: nothing replayed.
        do {
            let store = try EventStore.open(at: directory.url)
            let repository = try ReadingCodec.repository(store)
            #expect(repository.projection.eventsApplied == 0)
            check(repository)
            #expect(try repository.fetch(EntityQuery<Reading>().where(\.unit, equals: "changed")).map(\.id) == [all[5].id])
            try await store.close()
        }
        // Without snapshots: every event decoded by the codec.
        try FileManager.default.removeItem(at: directory.url.appending(path: "snapshots"))
        do {
            let store = try EventStore.open(at: directory.url, snapshotPolicy: .never)
            let repository = try ReadingCodec.repository(store)
            #expect(repository.projection.eventsApplied == all.count + 2)
            check(repository)
            try await store.close()
        }
    }

    /// A store written with `Codable` at version 1 opens with the payload codec at version 2:
    /// old events and the old snapshot go through the upcaster, new ones through the codec, and
    /// the history keeps what was written.
    @Test func switchingToAPayloadCodecIsASchemaVersion() async throws {
        let directory = TemporaryDirectory("ek-payload-switch")
        let old = Self.readings(100, seed: 2)
        do {
            let store = try EventStore.open(at: directory.url)
            let repository = try ReadingCodec.repository(store, schema: EntitySchema<Reading>(version: 1))
            try await repository.addAll(old)
            try await store.close()
        }
        let new = Self.readings(10, seed: 3)
        do {
            let store = try EventStore.open(at: directory.url)
            let repository = try ReadingCodec.repository(store)
            #expect(repository.projection.eventsApplied == 0, "the version-1 snapshot was upcast")
            try await repository.addAll(new)
            #expect(Set(repository.fetchAll()) == Set(old + new))
            let history = try store.history(of: repository.stream(of: new[0].id))
            #expect(history.map(\.schemaVersion) == [2])
            #expect(history[0].payload.count == 8 + new[0].unit.utf8.count, "no id, no key names")
            #expect(try store.history(of: repository.stream(of: old[0].id)).map(\.schemaVersion) == [1])
            try await store.close()
        }
        try FileManager.default.removeItem(at: directory.url.appending(path: "snapshots"))
        do {
            let store = try EventStore.open(at: directory.url, snapshotPolicy: .never)
            let repository = try ReadingCodec.repository(store)
            #expect(Set(repository.fetchAll()) == Set(old + new))
            try await store.close()
        }
    }

    /// A payload the codec refuses is an undecodable event at its position, its cause kept.
    @Test func aPayloadTheCodecRefusesIsReportedWithItsPosition() async throws {
        let store = try EventStore.inMemory()
        let repository = try ReadingCodec.repository(store)
        try await repository.addAll(Self.readings(3, seed: 4))
        // An event of the type at version 2 whose payload is too short, appended around the repository.
        try await store.execute { command in
            command.append(EncodedEvent(eventType: "Reading.added", schemaVersion: 2,
                                        stream: StreamID("Reading", .uuid(UUID())), payload: [1, 2, 3]))
        }
        #expect {
            _ = try ReadingCodec.repository(try EventStore(log: store.log, snapshotPolicy: .never), schema: ReadingCodec.schema)
        } throws: { error in
            guard case .undecodableEvent(let failure) = error as? RepositoryError else { return false }
            return failure.position == 3 && (failure.cause as? ReadingPayloadError) == ReadingPayloadError(reason: "3 bytes")
        }
    }

    /// The schema reads the current version, the codec's declared ones and the upcasters'.
    @Test func readableVersionsNameEveryReader() {
        let codec = EntityPayloadCodec<Reading>(decodedVersions: [3], encode: { _, _ in }, decode: { _, _, _ in throw ReadingPayloadError(reason: "") })
        let schema = EntitySchema<Reading>(version: 4, payload: codec).upcasting(from: 1, decoding: Reading.self) { $0 }
        #expect(schema.readableVersions == [1, 3, 4])
        #expect(schema.payloadCodec != nil)
        #expect(EntitySchema<Reading>(version: 1).payloadCodec == nil)
    }
}
