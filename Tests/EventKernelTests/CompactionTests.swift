import Foundation
import Synchronization
import Testing
@testable import EventLog
@testable import EventKernel
import EventKernelTestSupport

/// Compaction of purged streams (issue 27, item 3): every event of a purged stream leaves the
/// store's files, its id stays refused (by digest) across reopens and replays from the start,
/// and every answer about the live entities is what it was.
@Suite struct CompactionTests {
    struct Note: Identifiable, Codable, Sendable, Equatable {
        var id: String
        var text: String
        var rank: Int
    }

    static func notes(_ store: EventStore) throws -> EventSourcedRepository<Note> {
        try EventSourcedRepository<Note>(store: store, typeName: "Note", indexes: [.on(\.rank)])
    }

    /// Small, uncompressed segments: the log rolls often, and an id written anywhere in a
    /// segment is there as its bytes (what the absence checks below look for).
    static let logConfiguration = SegmentedLog.Configuration(segmentSize: 8_192, compression: .none)

    static func open(_ directory: URL, snapshots: SnapshotPolicy = SnapshotPolicy(everyEvents: nil, onClose: true)) throws -> EventStore {
        try EventStore.open(at: directory, log: logConfiguration, snapshotPolicy: snapshots)
    }

    static func segmentBytes(_ directory: URL) throws -> Int64 {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".log") }
            .reduce(Int64(0)) { $0 + Int64(try Data(contentsOf: directory.appending(path: $1)).count) }
    }

    /// Adds notes `n<i>` for each `i` in `range`, ranked `i % 4`.
    static func add(_ notes: EventSourcedRepository<Note>, _ range: Range<Int>) async throws {
        for i in range { try await notes.add(Note(id: "n\(i)", text: String(repeating: "t", count: 30), rank: i % 4)) }
    }

    /// An id no other bytes of the store can contain by chance.
    static func secretID(_ i: Int) -> String { "person-\(i)-" + UUID().uuidString }

    @Test func compactionRemovesEveryByteOfPurgedStreamsAndKeepsEveryAnswer() async throws {
        let dir = TemporaryDirectory("compaction")
        var store = try Self.open(dir.url)
        var notes = try Self.notes(store)
        var ids: [String] = []
        for i in 0..<240 {
            let id = Self.secretID(i)
            ids.append(id)
            try await notes.add(Note(id: id, text: "note \(i) of \(id)", rank: i % 7))
            if i % 3 == 0 { try await notes.update(Note(id: id, text: "edited \(id)", rank: i % 5)) }
        }
        let purged = ids.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
        let deleted = ids.enumerated().filter { $0.offset % 10 == 1 }.map(\.element)
        for id in purged { _ = try await notes.purge(id: id, metadata: EventMetadata(correlationID: "erasure-\(id.prefix(10))", actor: "dpo")) }
        for id in deleted { try await notes.delete(id: id) }
        // More events after the purges, so that every purge lies in a sealed segment.
        for i in 240..<400 { try await notes.add(Note(id: Self.secretID(i), text: "later \(i)", rank: i % 7)) }
        try await store.writeSnapshots()
        // The checks below can see an id: before compaction, each purged one is in the files,
        // in the segments and in the repository's snapshot (its deleted versions).
        for id in purged.prefix(5) {
            let holding = try files(in: dir.url, holding: id.utf8)
            #expect(holding.contains { $0.hasSuffix(".log") } && holding.contains { $0.hasSuffix(".snap") }, "\(id) is in \(holding) before compaction")
        }
        let live = notes.fetchAll().sorted { $0.id < $1.id }
        let versions = Dictionary(uniqueKeysWithValues: live.map { ($0.id, notes.version(of: $0.id)) })
        let byRank = try notes.fetch(EntityQuery<Note>().where(\.rank, equals: 3)).map(\.id).sorted()
        let bytesBefore = try Self.segmentBytes(dir.url)

        let report = try await store.compact()
        #expect(report.streamsForgotten == purged.count && report.streamsPending == 0)
        #expect(report.receiptsWritten == purged.count)
        #expect(report.eventsRemoved == purged.count + purged.filter { ids.firstIndex(of: $0)! % 3 == 0 }.count)
        #expect(report.segmentsRewritten > 0 && report.bytesAfter < report.bytesBefore)
        #expect(store.purgedStreamCount == purged.count)
        // The present is what it was.
        #expect(notes.fetchAll().sorted { $0.id < $1.id } == live)
        #expect(try notes.fetch(EntityQuery<Note>().where(\.rank, equals: 3)).map(\.id).sorted() == byRank)
        for note in live { #expect(notes.version(of: note.id) == versions[note.id]) }
        // Purged ids stay refused; a deleted one can still be added again, its stream continued.
        for id in purged.prefix(3) {
            #expect(store.isPurged(StreamID("Note", .string(id))))
            await #expect(throws: RepositoryError.streamPurged(StreamID("Note", .string(id)))) {
                try await notes.add(Note(id: id, text: "revived", rank: 0))
            }
        }
        try await notes.add(Note(id: deleted[0], text: "back", rank: 1))
        #expect(notes.version(of: deleted[0]) == 3)
        // No byte of a purged id anywhere in the store's directory.
        for id in purged { #expect(try files(in: dir.url, holding: id.utf8).isEmpty, "\(id) is still in the store") }
        let bytesAfter = try Self.segmentBytes(dir.url)
        #expect(bytesAfter < bytesBefore)
        // The log says that a Note was purged, when and by whom, and not which.
        let receipts = try store.read().filter { $0.eventType == ForgottenStream.eventType }
        #expect(receipts.count == purged.count)
        #expect(Set(receipts.map(\.stream)) == Set(purged.map { ForgottenStream(StreamID("Note", .string($0))).receiptStream }))
        #expect(receipts.allSatisfy { $0.metadata.actor == "dpo" && $0.metadata.correlationID?.hasPrefix("erasure-") == true })
        #expect(receipts.allSatisfy { String(decoding: $0.payload, as: UTF8.self) == #"{"entityType":"Note"}"# })
        let state = notes.fetchAll().sorted { $0.id < $1.id }
        try await store.close()

        #expect(try SegmentedLog.verify(at: dir.url).problems.isEmpty)
        // Reopened from the fresh snapshots, then from the log alone: the same.
        for fromSnapshots in [true, false] {
            if !fromSnapshots { try FileManager.default.removeItem(at: dir.file("snapshots")) }
            store = try Self.open(dir.url, snapshots: .never)
            notes = try Self.notes(store)
            #expect(notes.fetchAll().sorted { $0.id < $1.id } == state, "from snapshots: \(fromSnapshots)")
            #expect(store.purgedStreamCount == purged.count)
            for id in purged.suffix(3) {
                await #expect(throws: RepositoryError.streamPurged(StreamID("Note", .string(id)))) {
                    try await notes.add(Note(id: id, text: "revived", rank: 0))
                }
            }
            // A second compaction finds nothing more to forget.
            let again = try await store.compact()
            #expect(again.streamsForgotten == 0 && again.eventsRemoved == 0 && again.segmentsRewritten == 0)
            try await store.close()
        }
    }

    /// A purge in the active segment: compaction seals the segment first and forgets it, and
    /// appends go on in the next segment.
    @Test func aPurgeInTheActiveSegmentIsForgottenOnceCompactionSealsIt() async throws {
        let dir = TemporaryDirectory("compaction-active")
        let store = try Self.open(dir.url)
        let notes = try Self.notes(store)
        for i in 0..<5 { try await notes.add(Note(id: "n\(i)", text: "x", rank: i)) }
        _ = try await notes.purge(id: "n1")
        #expect(store.compactionCandidates?.waiting == 1)
        let segments = (store.log as? SegmentedLog)?.segmentCount
        let report = try await store.compact()
        #expect(report.streamsForgotten == 1 && report.streamsPending == 0 && report.segmentsRewritten == 1)
        #expect((store.log as? SegmentedLog)?.segmentCount == segments.map { $0 + 1 })
        #expect(store.compactionCandidates.map { [$0.ready, $0.waiting, $0.forgotten] } == [0, 0, 1])
        #expect(store.isPurged(StreamID("Note", .string("n1"))))
        try await notes.add(Note(id: "n9", text: "after", rank: 0))
        #expect(notes.fetchAll().map(\.id).sorted() == ["n0", "n2", "n3", "n4", "n9"])
        // Nothing purged in the active segment: no new segment.
        let again = try await store.compact()
        #expect(again.streamsForgotten == 0 && (store.log as? SegmentedLog)?.segmentCount == segments.map { $0 + 1 })
        try await store.close()
    }

    @Test func compactionRunsWhileWritersAppendAndLosesNoAcknowledgedEvent() async throws {
        let dir = TemporaryDirectory("compaction-online")
        let store = try Self.open(dir.url)
        let notes = try Self.notes(store)
        for i in 0..<300 { try await notes.add(Note(id: "old-\(i)", text: String(repeating: "o", count: 40), rank: i % 3)) }
        for i in stride(from: 0, to: 300, by: 2) { _ = try await notes.purge(id: "old-\(i)") }
        for i in 0..<100 { try await notes.add(Note(id: "pad-\(i)", text: String(repeating: "p", count: 40), rank: 0)) }
        async let writer: [String] = {
            var added: [String] = []
            for i in 0..<300 {
                try await notes.add(Note(id: "new-\(i)", text: "during", rank: i % 3))
                added.append("new-\(i)")
            }
            return added
        }()
        let report = try await store.compact()
        let added = try await writer
        #expect(report.streamsForgotten == 150)
        #expect(Set(added.compactMap { notes.fetch(id: $0)?.id }) == Set(added))
        let expected = notes.fetchAll().sorted { $0.id < $1.id }
        #expect(expected.count == 150 + 100 + 300)
        try await store.close()
        try FileManager.default.removeItem(at: dir.file("snapshots"))
        let reopened = try Self.open(dir.url, snapshots: .never)
        let again = try Self.notes(reopened)
        #expect(again.fetchAll().sorted { $0.id < $1.id } == expected)
        try await reopened.close()
    }

    /// A snapshot written before a compaction, anchored to an event the compaction replaced
    /// (a crash between the rewrite and the snapshots' replacement leaves one): the store
    /// opens, treating it as outdated rather than as damage, and replays.
    @Test func aSnapshotAnchoredToARewrittenEventIsOutdatedNotDamage() async throws {
        let dir = TemporaryDirectory("compaction-anchor")
        var store = try Self.open(dir.url)
        var notes = try Self.notes(store)
        try await Self.add(notes, 0..<200)
        _ = try await notes.purge(id: "n7")
        // The snapshot's anchor is the `$purged` event: the last one.
        try await store.close()
        let snapshotsBefore = try FileManager.default.contentsOfDirectory(atPath: dir.file("snapshots").path)
        let saved = TemporaryDirectory("compaction-anchor-saved")
        for name in snapshotsBefore { try FileManager.default.copyItem(at: dir.file("snapshots/\(name)"), to: saved.file(name)) }
        store = try Self.open(dir.url, snapshots: .never)
        notes = try Self.notes(store)
        try await Self.add(notes, 200..<400)
        let report = try await store.compact()
        #expect(report.receiptsWritten == 1)
        let state = notes.fetchAll().sorted { $0.id < $1.id }
        try await store.close()
        // Put the old snapshots back, as a crash before their replacement would leave them.
        try FileManager.default.removeItem(at: dir.file("snapshots"))
        try FileManager.default.createDirectory(at: dir.file("snapshots"), withIntermediateDirectories: true)
        for name in snapshotsBefore { try FileManager.default.copyItem(at: saved.file(name), to: dir.file("snapshots/\(name)")) }
        store = try Self.open(dir.url, snapshots: .never)
        notes = try Self.notes(store)
        #expect(notes.fetchAll().sorted { $0.id < $1.id } == state)
        #expect(store.isPurged(StreamID("Note", .string("n7"))))
        try await store.close()
    }

    /// A named consumer whose checkpoint follows an event compaction removed resumes where it
    /// was: no error, nothing skipped, nothing yielded twice, and the gap is not an event.
    @Test func aConsumerCommittedAfterARemovedEventResumesWhereItWas() async throws {
        let dir = TemporaryDirectory("compaction-consumer")
        var store = try Self.open(dir.url)
        var notes = try Self.notes(store)
        try await Self.add(notes, 0..<150)
        _ = try await notes.purge(id: "n3")
        let purgePosition = store.nextPosition - 1
        var consumer = try store.consumer(named: "mailer")
        var iterator = consumer.events().makeAsyncIterator()
        var seen: [LogPosition] = []
        while let event = try await iterator.next() {
            seen.append(event.position)
            if event.position == purgePosition { break }
        }
        // Committed after the `$purged` event, which compaction replaces; n3's add (position 3)
        // was handed out before and is removed.
        try await consumer.commit(through: purgePosition)
        consumer.close()
        try await Self.add(notes, 150..<300)
        let report = try await store.compact()
        #expect(report.receiptsWritten == 1 && report.eventsRemoved == 1)
        try await store.close()

        store = try Self.open(dir.url, snapshots: .never)
        notes = try Self.notes(store)
        consumer = try store.consumer(named: "mailer")
        #expect(consumer.committed == purgePosition + 1)
        iterator = consumer.events().makeAsyncIterator()
        var after: [LogPosition] = []
        while after.count < 150, let event = try await iterator.next() { after.append(event.position) }
        #expect(after == Array(purgePosition + 1..<purgePosition + 151))
        consumer.close()
        // From the start, the gap is skipped and the receipt stands where the purge was.
        var fresh = try store.consumer(named: "replayer").events().makeAsyncIterator()
        var fromStart: [EventEnvelope] = []
        while fromStart.count < 5, let event = try await fresh.next() { fromStart.append(event) }
        #expect(fromStart.map(\.position) == [0, 1, 2, 4, 5])
        _ = fresh
        try await store.close()
    }

    /// The digest as Docs/FileFormat.md ("Compaction receipts") spells it, checked with
    /// `hashlib.sha256(bytes.fromhex("454B53545245414D044E6F74656101")).hexdigest()[:32]`.
    @Test func theReceiptDigestIsTheOneTheFormatDocumentSpells() {
        let note = ForgottenStream(StreamID("Note", .string("a")))
        #expect(note.description == "9195a708db673c2649214c31a7883bf6")
        #expect(note.receiptStream == StreamID("$forgotten", .string(note.description)))
        #expect(ForgottenStream(StreamID("Note", .uuid(UUID()))) != ForgottenStream(StreamID("Note", .uuid(UUID()))))
        #expect(ForgottenStream(StreamID("Note", .string("a"))) != ForgottenStream(StreamID("Notes", .string("a"))))
        let receipt = EventEnvelope(position: 3, recordedAt: Date(), eventType: ForgottenStream.eventType, schemaVersion: 1,
                                    stream: note.receiptStream, entityVersion: 1, payload: [])
        #expect(ForgottenStream(receipt: receipt) == note)
        var upper = receipt
        upper.stream = StreamID("$forgotten", .string(note.description.uppercased()))
        #expect(ForgottenStream(receipt: upper) == nil, "only lowercase hex")
    }

    /// A backup taken before a compaction goes on incrementally after it (compaction cut no
    /// history): the rewritten segments are copied again, and the backup then holds no byte of
    /// the purged ids. It restores whole; a restore at a point, which appends the records again,
    /// says it cannot recreate the gaps rather than call the backup damaged.
    @Test func aBackupGoesOnIncrementallyAcrossACompaction() async throws {
        let dir = TemporaryDirectory("compaction-backup")
        let backup = TemporaryDirectory("compaction-backup-copy")
        let store = try Self.open(dir.url)
        let notes = try Self.notes(store)
        let secret = Self.secretID(1)
        for i in 0..<120 { try await notes.add(Note(id: i == 5 ? secret : "n\(i)", text: String(repeating: "b", count: 40), rank: i % 3)) }
        _ = try await notes.purge(id: secret)
        _ = try await store.backup(to: backup.url)
        #expect(try !files(in: backup.url, holding: secret.utf8).isEmpty, "the first backup holds the purged stream")
        for i in 120..<260 { try await notes.add(Note(id: "n\(i)", text: String(repeating: "b", count: 40), rank: i % 3)) }
        let report = try await store.compact()
        #expect(report.receiptsWritten == 1)
        let second = try await store.backup(to: backup.url)
        #expect(second.incremental)
        #expect(try files(in: backup.url, holding: secret.utf8).isEmpty, "the rewritten segments were copied again")
        let live = notes.fetchAll().sorted { $0.id < $1.id }
        try await store.close()

        let restored = TemporaryDirectory("compaction-backup-restored")
        try FileManager.default.removeItem(at: restored.url)
        _ = try await EventStore.restore(from: backup.url, to: restored.url)
        #expect(try SegmentedLog.verify(at: restored.url).isIntact)
        let reopened = try Self.open(restored.url, snapshots: .never)
        #expect(try Self.notes(reopened).fetchAll().sorted { $0.id < $1.id } == live)
        #expect(reopened.isPurged(StreamID("Note", .string(secret))))
        try await reopened.close()
        let cut = TemporaryDirectory("compaction-backup-cut")
        try FileManager.default.removeItem(at: cut.url)
        await #expect { try await EventStore.restore(from: backup.url, to: cut.url, at: .position(200)) } throws: {
            guard let error = ($0 as? RepositoryError)?.logError else { return false }
            return error.code == .invalidArgument && error.message.contains("compacted")
        }
    }

    struct Job: Identifiable, Codable, Sendable, Equatable {
        var id: String
        var owner: String
    }

    static let reassigned = FieldEvent<Job, String>("reassigned", sets: \.owner)

    /// Fails every write to a segment rewrite's temporary file once `rewrites` of them were
    /// written (a disk that fills up midway through a compaction).
    final class FailingRewrites: LogFileIO, Sendable {
        private let seen = Mutex<Set<String>>([])
        private let rewrites: Int
        init(after rewrites: Int) { self.rewrites = rewrites }
        func write(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) -> Int {
            if path.hasSuffix(".log.tmp") {
                let count = seen.withLock { $0.insert(path); return $0.count }
                if count > rewrites { throw LogError(.io, "injected: no space left", file: path, offset: offset, systemErrorNumber: ENOSPC) }
            }
            return try PosixFileIO().write(bytes, toAbsoluteOffset: offset, descriptor: descriptor, path: path)
        }
        func synchronizeData(descriptor: Int32, path: String) throws(LogError) { try PosixFileIO().synchronizeData(descriptor: descriptor, path: path) }
        func synchronize(descriptor: Int32, path: String) throws(LogError) { try PosixFileIO().synchronize(descriptor: descriptor, path: path) }
        func preallocate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try PosixFileIO().preallocate(descriptor: descriptor, path: path, length: length) }
        func truncate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try PosixFileIO().truncate(descriptor: descriptor, path: path, length: length) }
    }

    /// A compaction that fails after some of its rewrites leaves a log that every replay folds
    /// to the same present (a purged job's field events, which need the job, never outlive its
    /// add), no snapshot that could still match it, the ids purged; the next one finishes.
    @Test func aCompactionThatFailsMidwayLeavesALogEveryReplayFolds() async throws {
        for failAfter in [0, 1, 2, 3] {
            let dir = TemporaryDirectory("compaction-midway")
            var configuration = Self.logConfiguration
            configuration.fileIO = FailingRewrites(after: failAfter)
            var store = try EventStore.open(at: dir.url, log: configuration, snapshotPolicy: SnapshotPolicy(everyEvents: nil, onClose: true))
            func jobs(_ store: EventStore) throws -> EventSourcedRepository<Job> {
                try EventSourcedRepository<Job>(store: store, typeName: "Job", schema: EntitySchema<Job>().recording(Self.reassigned))
            }
            var repository = try jobs(store)
            for i in 0..<120 { try await repository.add(Job(id: "j\(i)", owner: String(repeating: "o", count: 40))) }
            try await store.writeSnapshots()
            // Field events in later segments than the adds, for the jobs to be purged and others.
            for i in stride(from: 0, to: 120, by: 3) { try await repository.apply(Self.reassigned, "owner-\(i)-" + String(repeating: "r", count: 30), to: "j\(i)") }
            let purged = stride(from: 0, to: 120, by: 2).map { "j\($0)" }
            for id in purged { _ = try await repository.purge(id: id) }
            for i in 120..<200 { try await repository.add(Job(id: "j\(i)", owner: String(repeating: "p", count: 40))) }
            let live = repository.fetchAll().sorted { $0.id < $1.id }
            await #expect(throws: RepositoryError.self, "after \(failAfter) rewrites") { _ = try await store.compact() }
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.file("snapshots").path).filter { $0.hasSuffix(".snap") }.isEmpty,
                    "no snapshot from before the rewrites is left")
            #expect(repository.fetchAll().sorted { $0.id < $1.id } == live)
            #expect(store.compactionCandidates?.forgotten == 0, "a failed compaction forgets nothing")
            try? await store.close()

            // The log as the failure left it: a full replay folds it (no snapshot is left).
            try? FileManager.default.removeItem(at: dir.file("snapshots"))
            store = try EventStore.open(at: dir.url, log: Self.logConfiguration, snapshotPolicy: .never)
            repository = try jobs(store)
            #expect(repository.fetchAll().sorted { $0.id < $1.id } == live, "after \(failAfter) rewrites")
            for id in purged.prefix(3) { #expect(store.isPurged(StreamID("Job", .string(id)))) }
            let report = try await store.compact()
            #expect(report.streamsForgotten == purged.count)
            #expect(repository.fetchAll().sorted { $0.id < $1.id } == live)
            try await store.close()
            store = try EventStore.open(at: dir.url, log: Self.logConfiguration, snapshotPolicy: .never)
            repository = try jobs(store)
            #expect(repository.fetchAll().sorted { $0.id < $1.id } == live)
            #expect(store.purgedStreamCount == purged.count)
            try await store.close()
        }
    }

    /// A store following a writer's log catches up across a compaction: the positions of the
    /// purged stream's events are gaps now, the first one right where the follower stands.
    @Test func aFollowerCatchesUpAcrossTheGapsACompactionLeaves() async throws {
        let dir = TemporaryDirectory("compaction-follower")
        let writer = try EventStore.open(at: dir.url, log: SegmentedLog.Configuration(segmentSize: 4096, compression: .none),
                                         snapshotPolicy: SnapshotPolicy(everyEvents: nil, onClose: false))
        let notes = try Self.notes(writer)
        try await Self.add(notes, 0..<10)
        let follower = try EventStore(log: try SegmentedLog.openReadOnly(at: dir.url), snapshotPolicy: .never)
        let followed = try Self.notes(follower)
        #expect(followed.fetchAll().count == 10)
        let standing = follower.nextPosition
        // The purged stream's first event is at the follower's position: after compaction the
        // follower's next read starts inside a gap.
        let secret = Self.secretID(0)
        try await notes.add(Note(id: secret, text: "secret", rank: 1))
        try await notes.update(Note(id: secret, text: "secret again", rank: 2))
        try await Self.add(notes, 10..<80)
        _ = try await notes.purge(id: secret)
        let report = try await writer.compact()
        #expect(report.streamsForgotten == 1 && report.segmentsRewritten > 0)
        try await Self.add(notes, 80..<90)
        #expect(try writer.log.read(from: standing, limit: 1).first.map { $0.position > standing } == true, "a gap where the follower stands")

        let folded = try await finishing(within: 120) { try follower.refresh() }
        #expect(folded != nil, "the follower's catch-up ends")
        #expect(follower.nextPosition == writer.nextPosition)
        #expect(followed.fetchAll().sorted { $0.id < $1.id } == notes.fetchAll().sorted { $0.id < $1.id })
        #expect(followed.fetchAll().count == 90)
        #expect(followed.version(of: "n85") == notes.version(of: "n85"))
        #expect(follower.isPurged(StreamID("Note", .string(secret))))
        // A read whose last position is a gap covers its range: no false report of damage.
        let gap = try #require((standing..<writer.nextPosition).first { p in try writer.log.read(from: p, limit: 1).first?.position != p })
        let records = try follower.readAppendedElsewhere(from: gap, before: gap + 1)
        #expect(records.envelopes.isEmpty && records.end == gap + 1)
        try await follower.close()
        try await writer.close()
    }

    /// The earlier backup's last batch is a dense batch after the purge, in the segment the
    /// compaction rewrites: copied as it was, at another offset. The backup still goes on.
    @Test func aBackupWhoseLastBatchMovedInACompactionGoesOnIncrementally() async throws {
        let dir = TemporaryDirectory("compaction-backup-moved")
        let backup = TemporaryDirectory("compaction-backup-moved-copy")
        let store = try Self.open(dir.url)
        let notes = try Self.notes(store)
        let secret = Self.secretID(2)
        for i in 0..<10 { try await notes.add(Note(id: i == 5 ? secret : "n\(i)", text: String(repeating: "m", count: 40), rank: i % 3)) }
        _ = try await notes.purge(id: secret)
        try await notes.add(Note(id: "after", text: "added after the purge", rank: 1))
        let first = try await store.backup(to: backup.url)
        let mark = try #require(first.manifest.lastBatch)
        #expect(mark.hasPrefix(Segment.Name.segment(0) + "@"), "the last batch is in the segment that holds the purged stream")
        for i in 10..<150 { try await notes.add(Note(id: "n\(i)", text: String(repeating: "m", count: 40), rank: i % 3)) }
        let report = try await store.compact()
        #expect(report.streamsForgotten == 1 && report.segmentsRewritten > 0)
        let second = try await store.backup(to: backup.url)
        #expect(second.incremental)
        #expect(try files(in: backup.url, holding: secret.utf8).isEmpty)
        let live = notes.fetchAll().sorted { $0.id < $1.id }
        try await store.close()
        let restored = TemporaryDirectory("compaction-backup-moved-restored")
        try FileManager.default.removeItem(at: restored.url)
        _ = try await EventStore.restore(from: backup.url, to: restored.url)
        let reopened = try Self.open(restored.url, snapshots: .never)
        #expect(try Self.notes(reopened).fetchAll().sorted { $0.id < $1.id } == live)
        try await reopened.close()
    }

    /// The store learns that its log has segment files from the log (`localSegments`), not
    /// from its type: a log wrapping a `SegmentedLog` that forwards it is compacted and backed
    /// up like the log it wraps.
    @Test func aLogWrappingSegmentsIsCompactedAndBackedUpThroughIt() async throws {
        let dir = TemporaryDirectory("compaction-wrapped")
        let wrapped = ReadWatchingLog(base: try SegmentedLog.open(at: dir.url))
        #expect(wrapped.localSegments != nil)
        let store = try EventStore(log: wrapped, snapshotPolicy: .never)
        let notes = try Self.notes(store)
        for i in 0..<4 { try await notes.add(Note(id: "n\(i)", text: "\(i)", rank: i)) }
        _ = try await notes.purge(id: "n1")
        let report = try await store.compact()
        #expect(report.streamsForgotten == 1)
        let backup = TemporaryDirectory("compaction-wrapped-backup")
        let copied = try await store.backup(to: backup.url)
        #expect(copied.manifest.nextPosition == store.nextPosition)
        #expect(try SegmentedLog.verify(at: backup.url).isIntact)
        #expect(notes.fetchAll().map(\.id).sorted() == ["n0", "n2", "n3"])
        try await store.close()
    }

    @Test func compactionIsRefusedWhereItCannotRun() async throws {
        let memory = try EventStore.inMemory()
        await #expect { try await memory.compact() } throws: {
            if case .misuse(let misuse) = $0 as? RepositoryError { return misuse.code == .compactionUnsupported }
            return false
        }
        let dir = TemporaryDirectory("compaction-readonly")
        let writer = try Self.open(dir.url)
        try await Self.notes(writer).add(Note(id: "a", text: "a", rank: 0))
        let reader = try EventStore(log: try SegmentedLog.openReadOnly(at: dir.url), snapshotPolicy: .never)
        await #expect { try await reader.compact() } throws: {
            if case .misuse(let misuse) = $0 as? RepositoryError { return misuse.code == .compactionUnsupported && misuse.message.contains("read-only") }
            return false
        }
        try await writer.close()
    }
}
