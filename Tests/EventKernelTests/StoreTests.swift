import Foundation
import Testing
import EventLog
import EventKernel
import EventKernelTestSupport

/// A counter projection: sum of payload byte 0 per entity; counts applied events.
func makeCounter(schemaVersion: UInt16 = 1) -> ProjectedState<[String: Int]> {
    ProjectedState(name: "counter", schemaVersion: schemaVersion, initial: [:]) { state, envelope in
        state[envelope.entityID.description, default: 0] += Int(envelope.payload.first ?? 0)
    }
}

func event(_ id: String, _ value: UInt8, expected: UInt64? = nil) -> PendingEvent {
    PendingEvent(EncodedEvent(eventType: "Counted", schemaVersion: 1, stream: counted(id), payload: [value]), expectedVersion: expected)
}

/// The stream of counter `id`.
func counted(_ id: String) -> StreamID { StreamID("Counted", .string(id)) }

/// The store's own behaviour, one body per test for both logs (the local segmented log and
/// the PostgreSQL log: `StoreBackend`).
@Suite struct StoreTests {
    @Test(arguments: StoreBackend.allCases)
    func conflictWritesNothing(backend: StoreBackend) async throws {
        try await backend.withStore { store, _ in
            try await store.append([event("a", 1, expected: 0), event("a", 1, expected: 1)])
            #expect(try store.version(of: counted("a")) == 2)
            await #expect(throws: RepositoryError.conflict(stream: counted("a"), expected: 1, actual: 2)) {
                try await store.append([event("b", 1, expected: 0), event("a", 1, expected: 1)])
            }
            #expect(store.log.bounds.nextPosition == 2)
            #expect(try store.version(of: counted("b")) == 0)
            // The failed batch reserved nothing: b can still be created at version 0.
            let envelopes = try await store.append([event("b", 1, expected: 0)])
            #expect(envelopes.map(\.entityVersion) == [1])
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func concurrentAppendsAreGapFreeAndOrdered(backend: StoreBackend) async throws {
        let counter = makeCounter()
        let seen = ProjectedState<[UInt64]>(name: "positions", schemaVersion: 1, initial: []) { $0.append($1.position) }
        try await backend.withStore(projections: [counter, seen]) { store, _ in
            let positions = try await withThrowingTaskGroup(of: [UInt64].self) { group in
                for task in 0..<64 {
                    group.addTask { try await store.append([event("e\(task % 8)", 1), event("e\(task % 8)", 1)]).map(\.position) }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(positions.sorted() == Array(0..<128))
            #expect(seen.state == Array(0..<128))
            #expect(counter.state.values.reduce(0, +) == 128)
            // Entity versions per entity are 1...16 without gaps, in position order.
            let versions = try store.read().filter { $0.entityID == .string("e3") }.map(\.entityVersion)
            #expect(versions == Array(1...16))
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func subscribeCatchesUpThenFollowsLive(backend: StoreBackend) async throws {
        try await backend.withStore { store, _ in
            for i in 0..<10 { try await store.append(event("s", UInt8(i))) }
            let stream = store.subscribe(from: 3)
            let writer = Task {
                for i in 10..<30 { try await store.append(event("s", UInt8(i))) }
            }
            var received: [UInt64] = []
            for try await envelope in stream {
                received.append(envelope.position)
                if received.count == 27 { break }
            }
            try await writer.value
            #expect(received == Array(3..<30))
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func historyAndTimeTravel(backend: StoreBackend) async throws {
        try await backend.withStore { store, _ in
            let base = Date(timeIntervalSince1970: 1_700_000_000)
            for i in 0..<20 {
                var pending = event(i % 2 == 0 ? "x" : "y", UInt8(i))
                pending.recordedAt = base.addingTimeInterval(Double(i))
                try await store.append(pending)
            }
            let history = try store.history(of: counted("y"))
            #expect(history.map(\.position) == [1, 3, 5, 7, 9, 11, 13, 15, 17, 19])
            #expect(history.map(\.entityVersion) == Array(1...10))
            #expect(history[0].recordedAt == base.addingTimeInterval(1))
            let at7 = try store.state(of: { makeCounter() }, throughPosition: 7)
            #expect(at7.state == ["x": 0 + 2 + 4 + 6, "y": 1 + 3 + 5 + 7])
            let asOf = try #require(try store.state(of: { makeCounter() }, asOf: base.addingTimeInterval(4.5)))
            #expect(asOf.state == ["x": 6, "y": 4])
            #expect(try store.state(of: { makeCounter() }, asOf: base.addingTimeInterval(-1)) == nil)
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func closedStoreRejectsAppends(backend: StoreBackend) async throws {
        try await backend.withStore { store, _ in
            try await store.close()
            await #expect(throws: RepositoryError.closed) { try await store.append(event("a", 1)) }
        }
    }

    @Test(arguments: StoreBackend.allCases)
    func reopenedStoreHasTheSameStateAndVersions(backend: StoreBackend) async throws {
        let counter = makeCounter()
        try await backend.withStore(projections: [counter], snapshotPolicy: .default) { store, location in
            for i in 0..<40 { try await store.append(event("k\(i % 4)", UInt8(i))) }
            try await store.close()
            let reopenedCounter = makeCounter()
            let reopened = try await location.open(projections: [reopenedCounter])
            #expect(reopenedCounter.state == counter.state)
            #expect(try reopened.version(of: counted("k1")) == 10)
            await #expect(throws: RepositoryError.conflict(stream: counted("k1"), expected: 9, actual: 10)) {
                try await reopened.append(event("k1", 1, expected: 9))
            }
            try await reopened.close()
        }
    }
}

@Suite struct SnapshotTests {
    func tempDir() -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ek-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Writes 100 events, snapshots at 60 (via writeSnapshots), then 40 more.
    func populate(_ dir: URL) async throws -> InMemoryLog {
        let log = InMemoryLog()
        let store = try EventStore(log: log, directory: dir, projections: [makeCounter()], snapshotPolicy: .never)
        for i in 0..<60 { try await store.append(event("k\(i % 5)", UInt8(i % 7))) }
        try await store.writeSnapshots()
        for i in 60..<100 { try await store.append(event("k\(i % 5)", UInt8(i % 7))) }
        return log
    }

    func reopen(_ log: InMemoryLog, _ dir: URL, schemaVersion: UInt16 = 1) throws -> (EventStore, ProjectedState<[String: Int]>) {
        // A second store over the same (still open) in-memory log stands in for a restart.
        let counter = makeCounter(schemaVersion: schemaVersion)
        let store = try EventStore(log: log, directory: dir, projections: [counter], snapshotPolicy: .never)
        return (store, counter)
    }

    func expected() -> [String: Int] {
        var state: [String: Int] = [:]
        for i in 0..<100 { state["k\(i % 5)", default: 0] += i % 7 }
        return state
    }

    @Test func snapshotStartupReplaysOnlyTheTail() async throws {
        let dir = tempDir()
        let log = try await populate(dir)
        let (store, counter) = try reopen(log, dir)
        #expect(counter.state == expected())
        #expect(counter.eventsApplied == 40)
        // Versions came from the snapshot plus tail: optimistic concurrency still works.
        #expect(try store.version(of: counted("k0")) == 20)
        await #expect(throws: RepositoryError.conflict(stream: counted("k0"), expected: 3, actual: 20)) {
            try await store.append(event("k0", 1, expected: 3))
        }
    }

    @Test func withoutSnapshotFullReplay() async throws {
        let dir = tempDir()
        let log = try await populate(dir)
        try FileManager.default.removeItem(at: dir.appendingPathComponent("snapshots"))
        let (_, counter) = try reopen(log, dir)
        #expect(counter.state == expected())
        #expect(counter.eventsApplied == 100)
    }

    @Test func corruptSnapshotIsIgnored() async throws {
        let dir = tempDir()
        let log = try await populate(dir)
        let snapshots = SnapshotDirectory(storeDirectory: dir)
        let file = try #require(snapshots.files(for: "counter").last)
        var bytes = try Array(Data(contentsOf: file))
        bytes[bytes.count - 3] ^= 0x40
        try Data(bytes).write(to: file)
        #expect(throws: BinaryDecodingError.self) { try SnapshotFile(decoding: bytes) }
        let (_, counter) = try reopen(log, dir)
        #expect(counter.state == expected())
        #expect(counter.eventsApplied == 100)
    }

    @Test func outdatedSchemaVersionIsIgnored() async throws {
        let dir = tempDir()
        let log = try await populate(dir)
        let (_, counter) = try reopen(log, dir, schemaVersion: 2)
        #expect(counter.state == expected())
        #expect(counter.eventsApplied == 100)
    }

    @Test func keepsOneSnapshotByDefaultAndFallsBackToTheLog() async throws {
        let dir = tempDir()
        let log = InMemoryLog()
        let store = try EventStore(log: log, directory: dir, projections: [makeCounter()], snapshotPolicy: .default)
        for round in 0..<3 {
            for i in 0..<10 { try await store.append(event("k", UInt8(round * 10 + i))) }
            try await store.writeSnapshots()
        }
        let snapshots = SnapshotDirectory(storeDirectory: dir)
        let files = snapshots.files(for: "counter")
        #expect(files.map { $0.lastPathComponent.prefix(20) } == ["00000000000000000030"])
        #expect(snapshots.files(for: "$entity-versions").count == 1)
        // The only snapshot damaged: the log replays from the start, to the same state.
        try Data("garbage".utf8).write(to: files[0])
        let (_, counter) = try reopen(log, dir)
        #expect(counter.state == ["k": (0..<30).reduce(0, +)])
        #expect(counter.eventsApplied == 30)
    }

    /// Fails every sync of a file under `snapshots/`; passes everything else through.
    struct FailingSnapshotSyncs: LogFileIO {
        let real = PosixFileIO()
        func write(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) -> Int {
            try real.write(bytes, toAbsoluteOffset: offset, descriptor: descriptor, path: path)
        }
        func synchronizeData(descriptor: Int32, path: String) throws(LogError) { try real.synchronizeData(descriptor: descriptor, path: path) }
        func synchronize(descriptor: Int32, path: String) throws(LogError) {
            if path.contains("/snapshots/") { throw LogError(.io, "fsync failed (injected)", file: path, systemErrorNumber: 5) }
            try real.synchronize(descriptor: descriptor, path: path)
        }
        func preallocate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try real.preallocate(descriptor: descriptor, path: path, length: length) }
        func truncate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try real.truncate(descriptor: descriptor, path: path, length: length) }
    }

    @Test func snapshotWritesGoThroughTheLogsFileLayer() async throws {
        let dir = tempDir()
        var configuration = SegmentedLog.Configuration()
        configuration.fileIO = FailingSnapshotSyncs()
        let store = try EventStore(log: try SegmentedLog.open(at: dir, configuration: configuration), directory: dir,
                                   projections: [makeCounter()], snapshotPolicy: .never)
        try await store.append(event("k", 1))
        do {
            try await store.writeSnapshots()
            Issue.record("a snapshot write succeeded although its fsync failed")
        } catch RepositoryError.storage(let failure) {
            let cause = try #require(failure.logError, "the cause is kept: \(failure)")
            #expect(cause.code == .io && cause.systemErrorNumber == 5 && cause.file?.contains("/snapshots/") == true, "\(cause)")
        }
        // Neither a snapshot nor its temporary file is left behind; the store goes on.
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent("snapshots").path)
        #expect(left.isEmpty, "\(left)")
        try await store.append(event("k", 2))
        try await store.close()
    }

    @Test func fallsBackToOlderSnapshotAndKeepsTwo() async throws {
        let dir = tempDir()
        let log = InMemoryLog()
        let store = try EventStore(log: log, directory: dir, projections: [makeCounter()],
                                   snapshotPolicy: SnapshotPolicy(everyEvents: nil, onClose: false, keep: 2))
        for round in 0..<3 {
            for i in 0..<10 { try await store.append(event("k", UInt8(round * 10 + i))) }
            try await store.writeSnapshots()
        }
        let snapshots = SnapshotDirectory(storeDirectory: dir)
        let files = snapshots.files(for: "counter")
        #expect(files.map { $0.lastPathComponent.prefix(20) } == ["00000000000000000020", "00000000000000000030"])
        try Data("garbage".utf8).write(to: files[1])
        let (_, counter) = try reopen(log, dir)
        #expect(counter.state == ["k": (0..<30).reduce(0, +)])
        #expect(counter.eventsApplied == 10)
    }

    @Test func periodicAndCloseSnapshots() async throws {
        let dir = tempDir()
        let store = try EventStore(log: InMemoryLog(), directory: dir, projections: [makeCounter()],
                                   snapshotPolicy: SnapshotPolicy(everyEvents: nil, onClose: true))
        try await store.append(event("a", 1))
        try await store.close()
        let file = try #require(SnapshotDirectory(storeDirectory: dir).newestValid(projectionName: "counter", schemaVersion: 1))
        #expect(file.nextPosition == 1)
        #expect(SnapshotDirectory(storeDirectory: dir).newestValid(projectionName: "$entity-versions", schemaVersion: 5) != nil)
    }

    @Test func timeTravelUsesSnapshotsCorrectly() async throws {
        let dir = tempDir()
        let log = try await populate(dir)
        let (store, _) = try reopen(log, dir)
        for position: UInt64 in [0, 30, 59, 60, 61, 99] {
            var reference: [String: Int] = [:]
            for i in 0...Int(position) { reference["k\(i % 5)", default: 0] += i % 7 }
            #expect(try store.state(of: { makeCounter() }, throughPosition: position).state == reference)
        }
    }
}
