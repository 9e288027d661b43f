import Foundation
import Testing
import EventLog
import EventKernel
import EventKernelTestSupport
import KernelPrimitives

@Suite struct EncodingTests {
    /// The interner hands back the string it kept for the same bytes (the same storage, for a
    /// string too long to be stored inline), tells invalid UTF-8 apart, and stays correct once it
    /// has replaced its oldest strings.
    @Test func stringInternerKeepsRecentStrings() {
        func intern(_ text: String, _ interner: inout StringInterner) -> String? {
            Array(text.utf8).withUnsafeBufferPointer { interner.string($0) }
        }
        func storage(_ string: String) -> UnsafeRawPointer? {
            var string = string
            return string.withUTF8 { UnsafeRawPointer($0.baseAddress) }
        }
        var interner = StringInterner()
        let long = "activity.added, a type too long for a small string"
        let first = intern(long, &interner)
        #expect(first == long)
        #expect(storage(intern(long, &interner)!) == storage(first!))
        #expect(intern("", &interner) == "")
        #expect(intern("", &interner) == "")
        #expect([UInt8]([0xC3, 0x28]).withUnsafeBufferPointer { interner.string($0) } == nil)
        // Twice the capacity of distinct strings, each read back right away and again later.
        let many = (0..<(2 * StringInterner.capacity)).map { "entity type number \($0), long enough to allocate" }
        for text in many { #expect(intern(text, &interner) == text) }
        for text in many.reversed() { #expect(intern(text, &interner) == text) }
        #expect(storage(intern(long, &interner)!) == storage(first!), "the first string is never replaced")
        #expect(intern("éa", &interner) == "éa")
        #expect(intern("ea", &interner) == "ea")
        // Strings of one length that differ in one byte, at every length and every position.
        for length in 1...40 {
            let plain = String(repeating: "a", count: length)
            for position in 0..<length {
                var bytes = Array(plain.utf8)
                bytes[position] = UInt8(ascii: "b")
                let variant = String(decoding: bytes, as: UTF8.self)
                #expect(intern(plain, &interner) == plain)
                #expect(intern(variant, &interner) == variant, "length \(length), position \(position)")
                #expect(intern(plain, &interner) == plain)
            }
        }
    }

    @Test func envelopeRoundTrip() throws {
        let id = EntityID.uuid(UUID())
        let bytes = EventEnvelope.encodeRecordPayload(
            eventType: "Account.added", schemaVersion: 3, stream: StreamID("Account", id), entityVersion: 300,
            metadata: EventMetadata(correlationID: "c-1", actor: "ana"), payload: [1, 2, 3])
        let timestamp = LogTimestamp(nanosecondsSince1970: 1_700_000_000_000_000_000)
        let envelope = try EventEnvelope(recordPayload: bytes, position: 7, timestamp: timestamp)
        #expect(envelope == EventEnvelope(position: 7, recordedAt: timestamp.date, eventType: "Account.added", schemaVersion: 3,
                                          stream: StreamID("Account", id), entityVersion: 300, metadata: EventMetadata(correlationID: "c-1", actor: "ana"),
                                          payload: [1, 2, 3]))
        // Compact: 1 format + 14 type + 1 schema + 2 version + 1 flags + 4 + 4 metadata + 3 payload + 17 id.
        #expect(bytes.count == 47)
        let stringID = try EventEnvelope(recordPayload: EventEnvelope.encodeRecordPayload(
            eventType: "x", schemaVersion: 1, stream: StreamID("x", .string("acc-1")), entityVersion: 1, metadata: .none, payload: []),
            position: 0, timestamp: timestamp)
        #expect(stringID.entityID == .string("acc-1"))
        #expect(stringID.metadata == .none)
    }

    @Test func malformedEnvelopeReportsOffset() throws {
        let bytes = EventEnvelope.encodeRecordPayload(
            eventType: "Account.added", schemaVersion: 1, stream: StreamID("Account", .uuid(UUID())), entityVersion: 1, metadata: .none, payload: [])
        // Format 3: header 1 + 14 + 1 + 1 + 1 = 18 bytes, no payload, then the id and its tag.
        #expect(bytes.count == 18 + 17)
        // A record cut inside the id: the tag read last is a UUID byte, or the id is too short.
        var short = Array(bytes.prefix(18 + 10))
        short.append(0)
        #expect(throws: BinaryDecodingError(.truncated(needed: 6), at: 18)) {
            try EventEnvelope(recordPayload: short, position: 0, timestamp: .min)
        }
        var badTag = bytes
        badTag[badTag.count - 1] = 9
        #expect(throws: BinaryDecodingError(.invalidValue("unknown entity id trailer 9"), at: 34)) {
            try EventEnvelope(recordPayload: badTag, position: 0, timestamp: .min)
        }
        var badLength = Array(bytes.prefix(18)) + Array("acc".utf8) + [200, 0, 0, 0, 1]
        #expect(throws: BinaryDecodingError(.truncated(needed: 197), at: 18)) {
            try EventEnvelope(recordPayload: badLength, position: 0, timestamp: .min)
        }
        badLength[badLength.count - 5] = 3
        #expect(try EventEnvelope(recordPayload: badLength, position: 0, timestamp: .min).entityID == .string("acc"))
        #expect(throws: BinaryDecodingError(.invalidValue("unknown envelope format version 4"), at: 0)) {
            try EventEnvelope(recordPayload: [4], position: 0, timestamp: .min)
        }
    }

    /// Records written before format 3 (the id after the schema version) still decode.
    @Test func format2RecordsStillDecode() throws {
        let id = UUID()
        var writer = BinaryWriter()
        writer.writeUInt8(2)
        writer.writeString("Account.added")
        writer.writeVarint(4)
        writer.writeEntityID(.uuid(id))
        writer.writeVarint(9)
        writer.writeUInt8(4 | 2)
        writer.writeString("Ledger")
        writer.writeString("ana")
        writer.writeRaw([7, 8])
        let envelope = try EventEnvelope(recordPayload: writer.bytes, position: 3, timestamp: .min)
        #expect(envelope.stream == StreamID("Ledger", .uuid(id)))
        #expect(envelope.entityVersion == 9 && envelope.schemaVersion == 4)
        #expect(envelope.metadata == EventMetadata(actor: "ana"))
        #expect(envelope.payload == [7, 8])
    }

    @Test func binaryPrimitives() throws {
        var writer = BinaryWriter()
        writer.writeVarint(UInt64.max)
        writer.writeZigZag(-3)
        writer.writeFixed(UInt32(0xDEADBEEF))
        writer.writeString("héllo")
        writer.writeDateMilliseconds(Date(timeIntervalSince1970: 1.5))
        writer.writeDateExact(Date(timeIntervalSince1970: 1.25))
        let uuid = UUID()
        writer.writeUUID(uuid)
        writer.writeOptionalString(nil)
        var reader = BinaryReader(writer.bytes)
        #expect(try reader.readVarint() == UInt64.max)
        #expect(try reader.readZigZag() == -3)
        #expect(try reader.readFixed(UInt32.self) == 0xDEADBEEF)
        #expect(try reader.readString() == "héllo")
        #expect(try reader.readDateMilliseconds() == Date(timeIntervalSince1970: 1.5))
        #expect(try reader.readDateExact() == Date(timeIntervalSince1970: 1.25))
        #expect(try reader.readUUID() == uuid)
        #expect(try reader.readOptionalString() == nil)
        try reader.expectEnd()
        var overlong = BinaryReader(Array(repeating: 0xFF, count: 11))
        #expect(throws: BinaryDecodingError(.malformedVarint, at: 0)) { try overlong.readVarint() }
        var badUTF8 = BinaryReader([2, 0xC3, 0x28])
        #expect(throws: BinaryDecodingError(.invalidUTF8, at: 0)) { try badUTF8.readString() }
    }

    struct RenamedV1: Codable, Sendable { var id: UUID; var name: String }
    struct Renamed: Codable, Sendable, Equatable { var id: UUID; var first: String; var last: String }

    @Test func upcastingKeepsOldVersionsDecodable() async throws {
        let store = try EventStore(log: InMemoryLog())
        let v1 = JSONEventCodec<RenamedV1>(eventType: "Renamed", schemaVersion: 1, entityType: "Person", entityID: { .uuid($0.id) })
        let id = UUID()
        try await store.append(PendingEvent(RenamedV1(id: id, name: "Ada Lovelace"), codec: v1))
        let v2 = JSONEventCodec<Renamed>(eventType: "Renamed", schemaVersion: 2, entityType: "Person", entityID: { .uuid($0.id) })
            .upcasting(from: 1, decoding: RenamedV1.self) { old in
                let parts = old.name.split(separator: " ", maxSplits: 1).map(String.init)
                return Renamed(id: old.id, first: parts[0], last: parts.count > 1 ? parts[1] : "")
            }
        try await store.append(PendingEvent(Renamed(id: id, first: "Ada", last: "King"), codec: v2))
        let decoded = try store.read().map { try v2.decode($0) }
        #expect(decoded == [Renamed(id: id, first: "Ada", last: "Lovelace"), Renamed(id: id, first: "Ada", last: "King")])
        #expect(try store.read().map(\.schemaVersion) == [1, 2])
        let noUpcaster = JSONEventCodec<Renamed>(eventType: "Renamed", schemaVersion: 2, entityType: "Person", entityID: { .uuid($0.id) })
        #expect(throws: EventDecodingError.unknownSchemaVersion(1, eventType: "Renamed", current: 2)) { try noUpcaster.decode(store.read()[0]) }
    }
}
