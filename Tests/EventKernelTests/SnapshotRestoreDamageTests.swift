@testable import EventKernel
import EventLog
import Foundation
import KernelPrimitives
import Testing
import EventKernelTestSupport

/// A repository snapshot's body (layout 5, `EventSourcedRepository.encodeSnapshot`) taken apart
/// field by field, so that a test can damage a real snapshot in one field and encode it again.
struct RepositorySnapshotBody {
    struct Head { var id: EntityID; var version: UInt64; var delta: UInt64 }
    var schemaVersion: UInt64
    var nextSequence: UInt64
    var heads: [Head] = []
    var deleted: [(id: EntityID, version: UInt64)] = []
    var orders: [(name: String, ordinals: [UInt64])] = []
    var parts: [[UInt8]] = []

    init(_ bytes: [UInt8]) throws {
        var reader = BinaryReader(bytes)
        schemaVersion = try reader.readVarint()
        let count = Int(try reader.readVarint())
        nextSequence = try reader.readVarint()
        for _ in 0..<count {
            let id = try reader.readEntityID()
            let version = try reader.readVarint()
            heads.append(Head(id: id, version: version, delta: try reader.readVarint()))
        }
        for _ in 0..<(try reader.readVarint()) {
            let id = try reader.readEntityID()
            deleted.append((id, try reader.readVarint()))
        }
        for _ in 0..<(try reader.readVarint()) {
            let name = try reader.readString()
            var ordinals: [UInt64] = []
            for _ in 0..<count { ordinals.append(try reader.readVarint()) }
            orders.append((name, ordinals))
        }
        for _ in 0..<(try reader.readVarint()) { parts.append(try reader.readBytes()) }
        #expect(reader.remaining == 0)
    }

    func encoded() -> [UInt8] {
        var writer = BinaryWriter(capacity: 64)
        writer.writeVarint(schemaVersion)
        writer.writeVarint(UInt64(heads.count))
        writer.writeVarint(nextSequence)
        for head in heads {
            writer.writeEntityID(head.id)
            writer.writeVarint(head.version)
            writer.writeVarint(head.delta)
        }
        writer.writeVarint(UInt64(deleted.count))
        for (id, version) in deleted {
            writer.writeEntityID(id)
            writer.writeVarint(version)
        }
        writer.writeVarint(UInt64(orders.count))
        for (name, ordinals) in orders {
            writer.writeString(name)
            for ordinal in ordinals { writer.writeVarint(ordinal) }
        }
        writer.writeVarint(UInt64(parts.count))
        for part in parts { writer.writeBytes(part) }
        return writer.bytes
    }

    /// Rewrites the store's one snapshot of `projection` with `change` applied to its body (the
    /// file's checksums made anew, so that only the body's contents are wrong).
    /// - Returns: The new body.
    @discardableResult
    static func rewrite(in dir: URL, projection: String, _ change: (inout RepositorySnapshotBody) -> Void) throws -> [UInt8] {
        let files = SnapshotDirectory(storeDirectory: dir).files(for: projection)
        try #require(files.count == 1, "\(files)")
        var file = try SnapshotFile(decoding: Array(try Data(contentsOf: files[0])))
        var body = try RepositorySnapshotBody(file.body)
        #expect(body.encoded() == file.body, "the test's layout is the repository's")
        change(&body)
        file.body = body.encoded()
        try Data(try file.encoded()).write(to: files[0])
        return file.body
    }
}

/// A snapshot body that decodes but describes rows the table cannot hold is refused with a
/// `BinaryDecodingError` (never a trap, never a table answering wrongly), and the store opens
/// by replaying the log instead.
@Suite struct SnapshotRestoreDamageTests {
    struct Note: Identifiable, Codable, Sendable, Equatable {
        var id: UUID
        var text: String
    }

    static let indexes: [EntityIndex<Note>] = [.on(\.text)]

    static func open(_ dir: URL, indexes: [EntityIndex<Note>]) throws -> (EventStore, EventSourcedRepository<Note>) {
        let store = try EventStore.open(at: dir)
        return (store, try EventSourcedRepository<Note>(store: store, typeName: "Note", indexes: indexes))
    }

    /// A closed store of `count` notes, some deleted (gaps in the sequences), with its snapshot.
    /// - Returns: The live notes in insertion order.
    static func closedStore(_ dir: URL, count: Int, indexes: [EntityIndex<Note>]) async throws -> [Note] {
        let (store, notes) = try open(dir, indexes: indexes)
        var saved = (0..<count).map { Note(id: UUID(), text: "note \($0 % 7)") }
        try await notes.addAll(saved)
        let gone = [saved[20].id, saved[5].id]
        for id in gone { _ = try await notes.delete(id: id) }
        saved.removeAll { gone.contains($0.id) }
        try await store.close()
        return saved
    }

    enum SequenceDamage: CaseIterable { case none, zeroDelta, overflowingDelta, noNextSequence }

    /// Sequences must ascend: a zero delta after the first head would give two rows one
    /// sequence (a later delete of one then removed the other's insertion-order entry, and
    /// `fetchAll` answered wrongly), and a delta past `UInt64.max` trapped the process.
    @Test(arguments: SequenceDamage.allCases)
    func aSnapshotWhoseSequencesDoNotAscendIsRefused(_ damage: SequenceDamage) async throws {
        let dir = TemporaryDirectory("ek-seq-damage")
        var saved = try await Self.closedStore(dir.url, count: 40, indexes: Self.indexes)
        let body = try RepositorySnapshotBody.rewrite(in: dir.url, projection: "repository:Note") { body in
            switch damage {
            case .none: break
            case .zeroDelta: body.heads[10].delta = 0
            case .overflowingDelta: body.heads[10].delta = .max - 3
            case .noNextSequence:
                // The last sequence is `UInt64.max`: the next one would overflow.
                let before = body.heads.dropLast().reduce(UInt64(0)) { $0 + $1.delta }
                body.heads[body.heads.count - 1].delta = .max - before
            }
        }
        if damage == .none {
            _ = try EventSourcedRepository<Note>.decodeSnapshot(body, schema: EntitySchema<Note>(), indexes: Self.indexes)
        } else {
            let error = #expect(throws: BinaryDecodingError.self) {
                _ = try EventSourcedRepository<Note>.decodeSnapshot(body, schema: EntitySchema<Note>(), indexes: Self.indexes)
            }
            #expect(error?.description.contains("sequence") == true, "says what: \(String(describing: error))")
        }

        let (store, notes) = try Self.open(dir.url, indexes: Self.indexes)
        #expect((notes.projection.eventsApplied == 0) == (damage == .none), "restored only from the intact snapshot")
        #expect(notes.fetchAll() == saved)
        // A delete of the damaged head's row removes its own, and not its neighbour's (of the
        // same sequence, had the snapshot been taken).
        let gone = [saved[10].id, saved[30].id]
        for id in gone { _ = try await notes.delete(id: id) }
        saved.removeAll { gone.contains($0.id) }
        #expect(notes.fetchAll() == saved)
        for text in Set(saved.map(\.text)) {
            #expect(try notes.fetch(EntityQuery<Note>().where(\.text, equals: text)) == saved.filter { $0.text == text })
        }
        try await store.close()
    }

    enum HeadDamage: CaseIterable { case none, added, dropped, repeatedAtTheEnd, repeatedInPlace }

    /// An entity-codec repository's parts carry their entities without ids, and the entities
    /// are copied in place into slots made for the heads: a head count other than the parts'
    /// entity count, or an id twice, is refused before the copy.
    @Test(arguments: HeadDamage.allCases)
    func aSnapshotWhoseHeadsDoNotMatchItsEntitiesIsRefused(_ damage: HeadDamage) async throws {
        let dir = TemporaryDirectory("ek-head-damage")
        // No declared index: an index order would be as long as the heads, and the damage to
        // the heads is what is tested.
        let saved = try await Self.closedStore(dir.url, count: 30, indexes: [])
        #expect(EntitySchema<Note>().payloadCodec == nil, "the entity codec")
        let body = try RepositorySnapshotBody.rewrite(in: dir.url, projection: "repository:Note") { body in
            switch damage {
            case .none: break
            case .added: body.heads.append(.init(id: .uuid(UUID()), version: 1, delta: 1))
            case .dropped: body.heads.removeLast()
            case .repeatedAtTheEnd: body.heads.append(.init(id: body.heads[3].id, version: 1, delta: 1))
            case .repeatedInPlace: body.heads[body.heads.count - 1].id = body.heads[3].id
            }
        }
        if damage == .none {
            _ = try EventSourcedRepository<Note>.decodeSnapshot(body, schema: EntitySchema<Note>(), indexes: [])
        } else {
            #expect(throws: BinaryDecodingError.self) {
                _ = try EventSourcedRepository<Note>.decodeSnapshot(body, schema: EntitySchema<Note>(), indexes: [])
            }
        }
        let (store, notes) = try Self.open(dir.url, indexes: [])
        #expect((notes.projection.eventsApplied == 0) == (damage == .none), "restored only from the intact snapshot")
        #expect(notes.fetchAll() == saved)
        #expect(notes.count == saved.count)
        try await store.close()
    }
}
