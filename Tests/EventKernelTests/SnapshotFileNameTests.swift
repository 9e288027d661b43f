@testable import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// A snapshot's file name holds its projection's name, and a file name holds at most 255 bytes:
/// a long entity type name must still get its snapshots written, found and pruned
/// (Docs/FileFormat.md, "Snapshot file").
@Suite struct SnapshotFileNameTests {
    struct Item: Identifiable, Codable, Sendable, Hashable { var id: Int; var round: Int }

    /// A type name of `count` repetitions of `character` (shown so in the test's name).
    struct TypeName: CustomTestStringConvertible, Sendable {
        var character: Character
        var count: Int
        var text: String { String(repeating: character, count: count) }
        var testDescription: String { "\(count) × \(character) (\(text.utf8.count) bytes)" }
    }

    /// Type names around and well past the length at which hex names stop fitting a file name
    /// (its temporary adds a dot, a UUID and `.tmp`): ASCII, and multi-byte characters.
    static let typeNames = [
        TypeName(character: "t", count: 53),     // "repository:" + 53 = 64 bytes: the last spelled whole
        TypeName(character: "t", count: 54),     // 65 bytes: the first in the hashed form
        TypeName(character: "x", count: 100),
        TypeName(character: "é", count: 150),    // 300 UTF-8 bytes
        TypeName(character: "y", count: 4_000),
    ]

    @Test(arguments: typeNames)
    func aLongTypeNamesSnapshotIsWrittenFoundAndPruned(name: TypeName) async throws {
        let typeName = name.text
        let dir = TemporaryDirectory("ek-long-name")
        let policy = SnapshotPolicy(everyEvents: nil, onClose: true, keep: 1)
        for round in 0..<3 {
            let store = try EventStore.open(at: dir.url, snapshotPolicy: policy)
            let items = try EventSourcedRepository<Item>(store: store, typeName: typeName)
            #expect(items.fetchAll().count == round * 10, "round \(round)")
            for i in 0..<10 { try await items.add(Item(id: round * 10 + i, round: round)) }
            try await store.close()
        }
        let snapshots = SnapshotDirectory(storeDirectory: dir.url)
        let projection = "repository:" + typeName
        let files = snapshots.files(for: projection)
        // Closing wrote one each time and pruned to the newest.
        #expect(files.count == 1, "\(files.map(\.lastPathComponent))")
        for file in files { #expect(file.lastPathComponent.utf8.count <= 160, "\(file.lastPathComponent)") }
        let last = try #require(files.last)
        let schemaVersion = try SnapshotFile(decoding: Array(Data(contentsOf: last))).schemaVersion
        let newest = try #require(snapshots.newestValid(projectionName: projection, schemaVersion: schemaVersion))
        #expect(newest.projectionName == projection)
        #expect(newest.nextPosition == 30)
    }

    /// Two long names that share their first bytes get files of their own, and each store
    /// opens from its own snapshot.
    @Test func longNamesSharingAPrefixKeepTheirOwnSnapshots() async throws {
        let dir = TemporaryDirectory("ek-long-names")
        let prefix = String(repeating: "p", count: 120)
        let store = try EventStore.open(at: dir.url, snapshotPolicy: .init(everyEvents: nil, onClose: true))
        let a = try EventSourcedRepository<Item>(store: store, typeName: prefix + "A")
        let b = try EventSourcedRepository<Item>(store: store, typeName: prefix + "B")
        try await a.add(Item(id: 1, round: 0))
        for i in 0..<3 { try await b.add(Item(id: i, round: 1)) }
        try await store.close()
        let snapshots = SnapshotDirectory(storeDirectory: dir.url)
        let fileA = snapshots.files(for: "repository:" + prefix + "A")
        let fileB = snapshots.files(for: "repository:" + prefix + "B")
        #expect(fileA.count == 1 && fileB.count == 1)
        #expect(fileA != fileB)
        let reopened = try EventStore.open(at: dir.url, snapshotPolicy: .never)
        #expect(try EventSourcedRepository<Item>(store: reopened, typeName: prefix + "A").fetchAll().count == 1)
        #expect(try EventSourcedRepository<Item>(store: reopened, typeName: prefix + "B").fetchAll().count == 3)
        try await reopened.close()
    }

    /// The header's reserved byte is 0; a snapshot with anything else there was not written by
    /// this format and is refused, at its offset.
    @Test func aSnapshotWhoseReservedByteIsNotZeroIsRefused() throws {
        let file = SnapshotFile(projectionName: "p", schemaVersion: 1, nextPosition: 0, body: [1, 2, 3])
        var bytes = try file.encoded()
        #expect(try SnapshotFile(decoding: bytes).body == [1, 2, 3])
        bytes[7] = 1
        let error = try #require(throws: BinaryDecodingError.self) { try SnapshotFile(decoding: bytes) }
        #expect(error.offset == 7, "\(error)")
    }

    /// A projection name whose UTF-8 does not fit the header's 16-bit length is refused when the
    /// store meets it, never cut short in a snapshot that would then never be used.
    @Test func aProjectionNameTooLongForTheHeaderIsRefused() async throws {
        let dir = TemporaryDirectory("ek-name-limit")
        let store = try EventStore.open(at: dir.url, snapshotPolicy: .never)
        let error = try #require(throws: RepositoryError.self) {
            _ = try EventSourcedRepository<Item>(store: store, typeName: String(repeating: "z", count: 70_000))
        }
        guard case .limitExceeded(let limit) = error else { Issue.record("\(error)"); return }
        #expect(limit.code == .projectionName)
        try await store.close()
    }
}

extension SnapshotFileNameTests {
    /// A store written before the hashed form holds a name of 65 to 93 bytes spelled whole: its
    /// snapshot is still found, used, and pruned once a newer one is written.
    @Test func aSnapshotNamedInTheOldSpelledFormIsFoundAndPruned() async throws {
        let dir = TemporaryDirectory("ek-legacy-name")
        let typeName = String(repeating: "l", count: 70)
        let projection = "repository:" + typeName
        let policy = SnapshotPolicy(everyEvents: nil, onClose: true, keep: 1)
        do {
            let store = try EventStore.open(at: dir.url, snapshotPolicy: policy)
            let items = try EventSourcedRepository<Item>(store: store, typeName: typeName)
            for i in 0..<5 { try await items.add(Item(id: i, round: 0)) }
            try await store.close()
        }
        let snapshots = SnapshotDirectory(storeDirectory: dir.url)
        let hashed = try #require(snapshots.files(for: projection).first)
        let spelled = dir.url.appending(path: "snapshots/" + String(format: "%020llu", 5) + "-"
            + projection.utf8.map { String(format: "%02x", $0) }.joined() + ".snap")
        try FileManager.default.moveItem(at: hashed, to: spelled)
        #expect(snapshots.files(for: projection) == [spelled])
        let schemaVersion = try SnapshotFile(decoding: Array(Data(contentsOf: spelled))).schemaVersion
        #expect(snapshots.newestValid(projectionName: projection, schemaVersion: schemaVersion)?.nextPosition == 5)
        do {
            let store = try EventStore.open(at: dir.url, snapshotPolicy: policy)
            let items = try EventSourcedRepository<Item>(store: store, typeName: typeName)
            #expect(items.fetchAll().count == 5)
            try await items.add(Item(id: 5, round: 1))
            try await store.close()
        }
        let files = snapshots.files(for: projection)
        #expect(files.count == 1 && files.first != spelled, "\(files.map(\.lastPathComponent))")
    }
}
