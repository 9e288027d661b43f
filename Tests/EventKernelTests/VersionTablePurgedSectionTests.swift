import Foundation
import Testing
import EventLog
@testable import EventKernel

/// The version table's purged section refuses what no build writes: a section with no stream,
/// a `$purged` position at or past the snapshot's, a stream listed twice. (The store then
/// ignores the snapshot and rebuilds the table from the log.)
@Suite struct VersionTablePurgedSectionTests {
    private static let stream = StreamID("Raw", .string("r"))

    private static func table(_ second: String) -> VersionTable {
        let table = VersionTable()
        table.apply([
            EventEnvelope(position: 0, recordedAt: Date(), eventType: "Raw.happened", schemaVersion: 1, stream: stream, entityVersion: 1, payload: []),
            EventEnvelope(position: 1, recordedAt: Date(), eventType: second, schemaVersion: 1, stream: stream, entityVersion: 2, payload: []),
        ])
        return table
    }

    /// The bytes before the sections (the same versions, nothing purged), one purged-section
    /// entry, and the forgotten section of a table with nothing forgotten (its count, 0).
    private static func parts() throws -> (prefix: [UInt8], entry: [UInt8]) {
        let plain = try table("Raw.happened").snapshotState().bytes
        let purged = try table("$purged").snapshotState().bytes
        // Schema 5: the purged section's count and the forgotten section's, both 0.
        #expect(Array(plain.suffix(2)) == [0, 0])
        let prefix = Array(plain.dropLast(2))
        #expect(Array(purged.prefix(prefix.count)) == prefix && purged[prefix.count] == 1 && purged.last == 0)
        return (prefix, Array(purged[(prefix.count + 1)..<(purged.count - 1)]))
    }

    @Test func aSnapshotWithThePurgedSectionRoundTrips() throws {
        let snapshot = try Self.table("$purged").snapshotState()
        let restored = VersionTable()
        try restored.restore(from: snapshot)
        #expect(restored.purgedStreams == [Self.stream: 1])
        #expect(restored.isPurged(Self.stream))
    }

    @Test func aSnapshotWithoutItsForgottenSectionIsRefused() throws {
        let (prefix, entry) = try Self.parts()
        #expect(throws: BinaryDecodingError.self) { try VersionTable().restore(from: ProjectionSnapshot(bytes: prefix + [1] + entry, nextPosition: 2)) }
        #expect(throws: BinaryDecodingError.self) { try VersionTable().restore(from: ProjectionSnapshot(bytes: prefix, nextPosition: 2)) }
        #expect(throws: Never.self) { try VersionTable().restore(from: ProjectionSnapshot(bytes: prefix + [0, 0], nextPosition: 2)) }
    }

    @Test func aPositionAtOrPastTheSnapshotsIsRefused() throws {
        let (prefix, entry) = try Self.parts()
        // The entry's position is 1: a snapshot that covers positions below 1 cannot hold it.
        #expect(throws: BinaryDecodingError.self) { try VersionTable().restore(from: ProjectionSnapshot(bytes: prefix + [1] + entry + [0], nextPosition: 1)) }
        #expect(throws: Never.self) { try VersionTable().restore(from: ProjectionSnapshot(bytes: prefix + [1] + entry + [0], nextPosition: 2)) }
    }

    @Test func aStreamListedTwiceIsRefused() throws {
        let (prefix, entry) = try Self.parts()
        #expect(throws: BinaryDecodingError.self) { try VersionTable().restore(from: ProjectionSnapshot(bytes: prefix + [2] + entry + entry + [0], nextPosition: 2)) }
    }

    /// Forgetting a purged stream keeps its digest only: the snapshot holds no byte of its id,
    /// round-trips, and refuses a digest listed twice or more digests than its bytes hold.
    @Test func theForgottenSectionHoldsDigestsOnlyAndRoundTrips() throws {
        let table = Self.table("$purged")
        table.forget([Self.stream: ForgottenStream(Self.stream)])
        #expect(table.purgedStreams.isEmpty && table.forgottenCount == 1)
        #expect(table.isPurged(Self.stream))
        let snapshot = try table.snapshotState()
        let digest = ForgottenStream(Self.stream).digest
        #expect(Array(snapshot.bytes.suffix(18)) == [0, 1] + digest, "no purged stream, one digest")
        let restored = VersionTable()
        try restored.restore(from: snapshot)
        #expect(restored.isPurged(Self.stream) && restored.forgottenCount == 1 && restored.purgedStreams.isEmpty)
        #expect(!restored.isPurged(StreamID("Raw", .string("other"))))
        let body = Array(snapshot.bytes.dropLast(17))
        #expect(throws: BinaryDecodingError.self) { try VersionTable().restore(from: ProjectionSnapshot(bytes: body + [2] + digest + digest, nextPosition: 2)) }
        #expect(throws: BinaryDecodingError.self) { try VersionTable().restore(from: ProjectionSnapshot(bytes: body + [2] + digest, nextPosition: 2)) }
        // The digest refuses every write, as the purged mark did.
        func event(_ type: String) -> PendingEvent {
            PendingEvent(EncodedEvent(eventType: type, schemaVersion: 1, stream: Self.stream, payload: []))
        }
        #expect(throws: RepositoryError.streamPurged(Self.stream)) { _ = try restored.reserve([event("Raw.happened")], basis: nil, planned: nil) }
        #expect(throws: RepositoryError.streamPurged(Self.stream)) {
            _ = try restored.reserve([event("Raw.happened")], basis: restored.commitBasis, planned: [1])
        }
        // A receipt folded from the log says the same.
        let replayed = VersionTable()
        replayed.apply([EventEnvelope(position: 1, recordedAt: Date(), eventType: ForgottenStream.eventType, schemaVersion: 1,
                                      stream: ForgottenStream(Self.stream).receiptStream, entityVersion: 1,
                                      payload: ForgottenStream.receiptPayload(entityType: "Raw"))])
        #expect(replayed.isPurged(Self.stream) && replayed.forgottenCount == 1)
        #expect(Array(try replayed.snapshotState().bytes.suffix(18)) == [0, 1] + digest)
        #expect(try replayed.snapshotState().bytes.count == 3 + 18, "a receipt's stream keeps no version entry")
    }

    /// A tombstone a command decided on a version that already counts another batch's
    /// `$purged` (a source folds a commit before this table does) conflicts, so that the command
    /// decides again and finds the stream purged; anything else to that stream is refused.
    @Test func aConditionalTombstoneOnAStreamBeingPurgedConflicts() throws {
        let table = Self.table("Raw.happened")
        func event(_ type: String, expecting expected: UInt64?) -> PendingEvent {
            PendingEvent(EncodedEvent(eventType: type, schemaVersion: 1, stream: Self.stream, payload: []), expectedVersion: expected)
        }
        _ = try #require(try table.reserve([event("$purged", expecting: 2)], basis: nil, planned: nil), "the first purge is in flight")
        for type in ["$purged", "$deleted"] {
            #expect(throws: RepositoryError.conflict(stream: Self.stream, expected: 3, actual: 3)) {
                _ = try table.reserve([event(type, expecting: 3)], basis: nil, planned: nil)
            }
            #expect(throws: RepositoryError.streamPurged(Self.stream), "an unconditional tombstone decided nothing") {
                _ = try table.reserve([event(type, expecting: nil)], basis: nil, planned: nil)
            }
        }
        #expect(throws: RepositoryError.streamPurged(Self.stream)) {
            _ = try table.reserve([event("Raw.happened", expecting: 3)], basis: nil, planned: nil)
        }
        // Committed: the same, on the fast path too.
        let committed = Self.table("$purged")
        #expect(throws: RepositoryError.conflict(stream: Self.stream, expected: 2, actual: 2)) {
            _ = try committed.reserve([event("$purged", expecting: 2)], basis: committed.commitBasis, planned: [3])
        }
        #expect(throws: RepositoryError.streamPurged(Self.stream)) {
            _ = try committed.reserve([event("Raw.happened", expecting: 2)], basis: committed.commitBasis, planned: [3])
        }
    }
}
