import Activities
import EventKernel
import EventLog
import Foundation
import Logging
import Testing
import EventKernelTestSupport

/// Damaged snapshot files: a snapshot is a cache, so any damage must cost time, never
/// correctness. A store of a few hundred activities (adds, updates, ends, deletes) with two
/// snapshots per projection (`activities` and the entity-version map) is reopened after each
/// single-byte corruption (one bit flipped; separately xor 0xFF) of each snapshot file, after
/// truncations at many lengths, and with well-formed snapshots that must not be used (a bumped
/// schema version, a foreign projection name, a body that does not decode, a position past
/// the log's end). Each reopen must not crash, must give exactly the reference results (every
/// activity and every entity version), no integrity issue, and a logged warning when the
/// snapshot that would have been used was skipped.
///
/// By default every header byte and an evenly spaced sample of body bytes, about
/// `EVENTKERNEL_SNAPSHOT_CASES` (default 2500, 400 under `EVENTKERNEL_TEST_SCALE=small`)
/// cases, never fewer than the header bytes' (about 580); `EVENTKERNEL_SNAPSHOT_STRIDE=1`
/// sweeps every byte.
@Suite("Reliability: snapshot corruption sweep", .serialized)
struct SnapshotCorruptionTests {
    static let caseBudget = environmentInt("EVENTKERNEL_SNAPSHOT_CASES", default: testScale.pick(2500, small: 400))
    static let headerBytes = 72

    struct Reference {
        var store: URL
        var all: [ActivityModel]
        var versions: [UUID: UInt64]
        var ids: [UUID]
    }

    /// Builds the store: 300 adds, then updates, ends and deletes, snapshots along the way and on close.
    static func makeStore(_ directory: TemporaryDirectory) async throws -> Reference {
        let store = directory.file("store")
        var configuration = EventStore.Configuration()
        configuration.log.segmentSize = 16 << 10
        var policy = SnapshotPolicy(everyEvents: 150, onClose: true, keep: 2)
        policy.growthFraction = 0
        configuration.snapshots = policy
        let repository = try EventSourcedActivityRepository.open(at: store, configuration: configuration)
        for i in 0..<300 { try await repository.add(crashModel(i)) }
        // Periodic snapshots run in a task of their own, whenever the pool gets to it: one
        // written here makes sure two generations exist whatever the scheduling.
        try await repository.store.writeSnapshots()
        for i in stride(from: 0, to: 300, by: 7) {
            var m = crashModel(i)
            m.type = ActivityType(rawValue: "updated-\(i % 5)")
            try await repository.update(m)
        }
        for i in stride(from: 0, to: 300, by: 3) { try await repository.end(id: crashModel(i).id, at: crashModel(i).startDate.addingTimeInterval(99.5)) }
        for i in stride(from: 5, to: 300, by: 11) { try await repository.delete(id: crashModel(i).id) }
        try await repository.close()
        let ids = (0..<300).map { crashModel($0).id }
        // The reference is a replay without snapshots.
        let log = try SegmentedLog.openReadOnly(at: store)
        let replayed = try EventSourcedActivityRepository(log: log)
        let reference = Reference(store: store, all: try Reliability.all(replayed),
                                  versions: Dictionary(uniqueKeysWithValues: try ids.map { ($0, try replayed.store.version(of: ActivityEventCodec.stream(of: $0))) }), ids: ids)
        try await log.close()
        return reference
    }

    /// Opens the store (read-only, or as the writer without writing snapshots) and compares.
    static func checkOpen(_ reference: Reference, writer: Bool, log: RecordingLog, context: String) async throws {
        let repository: EventSourcedActivityRepository
        if writer {
            var configuration = EventStore.Configuration()
            configuration.snapshots = .never
            repository = try EventSourcedActivityRepository.open(at: reference.store, configuration: configuration, logger: log.logger)
        } else {
            repository = try EventSourcedActivityRepository.openReadOnly(at: reference.store, logger: log.logger)
        }
        let all = try Reliability.all(repository)
        #expect(all == reference.all, "\(context): results differ from the reference")
        let wrongVersions = try reference.ids.filter { try repository.store.version(of: ActivityEventCodec.stream(of: $0)) != reference.versions[$0] }
        #expect(wrongVersions.isEmpty, "\(context): \(wrongVersions.count) entity versions differ")
        #expect(repository.projection.integrityIssues.isEmpty, "\(context): \(repository.projection.integrityIssues)")
        try await repository.close()
    }

    static func newestFiles(_ store: URL) -> Set<String> {
        // Names are <position>-<hex name>.snap: the newest per projection sorts last.
        let files = Reliability.snapshotFiles(store)
        let byProjection = Dictionary(grouping: files) { $0.split(separator: "-").dropFirst().joined(separator: "-") }
        return Set(byProjection.values.compactMap { $0.max() })
    }

    static func warned(_ log: RecordingLog) -> Bool {
        log.all.contains { $0.level >= .notice && $0.message.contains("snapshot") }
    }

    @Test func everyDamagedByteIsIgnored() async throws {
        let directory = TemporaryDirectory("ek-snapsweep")
        let reference = try await Self.makeStore(directory)
        let snapshots = reference.store.appending(path: "snapshots")
        let files = Reliability.snapshotFiles(reference.store)
        #expect(files.count == 4, "expected 2 snapshots × 2 projections, found \(files)")
        let newest = Self.newestFiles(reference.store)
        let log = RecordingLog()
        try await Self.checkOpen(reference, writer: false, log: log, context: "intact")
        #expect(!Self.warned(log), "intact snapshots were logged as ignored: \(log.all.map(\.message))")

        let sizes = try files.map { try Data(contentsOf: snapshots.appending(path: $0)).count }
        let total = sizes.reduce(0, +)
        let stride = environmentInt("EVENTKERNEL_SNAPSHOT_STRIDE",
                                                default: max(1, 2 * (total - Self.headerBytes * files.count) / max(1, Self.caseBudget - 2 * Self.headerBytes * files.count)))
        var cases = 0, warnings = 0
        let started = ContinuousClock.now
        for (file, size) in zip(files, sizes) {
            let url = snapshots.appending(path: file)
            let original = try Data(contentsOf: url)
            let offsets = Array(0..<min(size, Self.headerBytes)) + Array(Swift.stride(from: Self.headerBytes, to: size, by: stride))
            for offset in offsets {
                for mutation in 0..<2 {
                    var damaged = original
                    damaged[offset] ^= mutation == 0 ? UInt8(1 << (offset % 8)) : 0xFF
                    try damaged.write(to: url)
                    log.reset()
                    let context = "\(file) byte \(offset) \(mutation == 0 ? "bit flip" : "xor 0xFF")"
                    try await Self.checkOpen(reference, writer: cases % 25 == 0, log: log, context: context)
                    if newest.contains(file) {
                        #expect(Self.warned(log), "\(context): the damaged newest snapshot was skipped silently")
                    }
                    if Self.warned(log) { warnings += 1 }
                    cases += 1
                }
            }
            try original.write(to: url)
            // Truncations: every length in the header, then ~60 spread over the body.
            let lengths = Array(0..<min(size, Self.headerBytes)) + Array(Swift.stride(from: Self.headerBytes, to: size, by: max(1, size / 60)))
            for length in lengths {
                try original.prefix(length).write(to: url)
                log.reset()
                let context = "\(file) truncated to \(length) bytes"
                try await Self.checkOpen(reference, writer: false, log: log, context: context)
                if newest.contains(file) { #expect(Self.warned(log), "\(context): skipped silently") }
                cases += 1
            }
            try original.write(to: url)
        }
        print("snapshot corruption sweep: \(cases) cases over \(files.count) files (\(total) bytes, body stride \(stride)), \(warnings) logged, in \(ContinuousClock.now - started)")
    }

    @Test func wellFormedButUnusableSnapshotsAreIgnored() async throws {
        let directory = TemporaryDirectory("ek-snapbad")
        let reference = try await Self.makeStore(directory)
        let snapshots = reference.store.appending(path: "snapshots")
        let log = RecordingLog()
        for file in Self.newestFiles(reference.store).sorted() {
            let url = snapshots.appending(path: file)
            let original = try Data(contentsOf: url)
            let snapshot = try SnapshotFile(decoding: Array(original))
            var variants: [(String, SnapshotFile)] = []
            var bumped = snapshot; bumped.schemaVersion &+= 1; variants.append(("schema version +1", bumped))
            var foreign = snapshot; foreign.projectionName = "someone-else"; variants.append(("foreign projection name", foreign))
            var garbage = snapshot; garbage.body = Array(snapshot.body.prefix(snapshot.body.count / 2)); variants.append(("half a body", garbage))
            var noise = snapshot; noise.body = (0..<512).map { UInt8(truncatingIfNeeded: $0 &* 37) }; variants.append(("noise body", noise))
            var empty = snapshot; empty.body = []; variants.append(("empty body", empty))
            for (what, variant) in variants {
                try Data(try variant.encoded()).write(to: url)
                for writer in [false, true] {
                    log.reset()
                    let context = "\(file): \(what) (\(writer ? "writer" : "read-only"))"
                    try await Self.checkOpen(reference, writer: writer, log: log, context: context)
                    #expect(Self.warned(log), "\(context): ignored without a log message")
                }
            }
            // A snapshot past the log's end, in the log's own history, records acknowledged
            // events the log lacks: damage, reported with the snapshot file, never ignored.
            var future = snapshot
            future.nextPosition += 1_000
            try Data(try future.encoded()).write(to: url)
            for writer in [false, true] {
                #expect(performing: {
                    _ = writer ? try EventSourcedActivityRepository.open(at: reference.store)
                        : try EventSourcedActivityRepository.openReadOnly(at: reference.store)
                }, throws: { error in
                    guard let failure = (error as? RepositoryError)?.logError else { return false }
                    return failure.code == .corruption && failure.file == url.path
                })
            }
            try original.write(to: url)
        }
        // A stray temporary file and a snapshot of an unknown projection are ignored too.
        try Data("partial".utf8).write(to: snapshots.appending(path: ".00000000000000000001-61.snap.1234.tmp"))
        try Data("junk".utf8).write(to: snapshots.appending(path: "00000000000000000001-00.snap"))
        log.reset()
        try await Self.checkOpen(reference, writer: false, log: log, context: "stray files, read-only")
        #expect(FileManager.default.fileExists(atPath: snapshots.appending(path: ".00000000000000000001-61.snap.1234.tmp").path),
                "a read-only open must not delete a writer's temporary file")
        try await Self.checkOpen(reference, writer: true, log: log, context: "stray files, writer")
        #expect(!FileManager.default.fileExists(atPath: snapshots.appending(path: ".00000000000000000001-61.snap.1234.tmp").path),
                "the writer's open removes stale temporary snapshot files")
    }
}
