import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import Synchronization
import Testing

/// A log of a kind the store has never heard of (neither segmented, nor in memory, nor on a
/// server): records in an `InMemoryLog` that a writer may share, seen through a view that
/// grows by its own appends and by `refresh()`, with whatever `access` and `fileIO` the test
/// declares. It counts how a store follows it.
final class DeclaredLog: SharedRecordLog {
    let inner: InMemoryLog
    let access: LogAccess
    let fileIO: any LogFileIO

    private struct State {
        var learned: LogPosition
        var handler: (@Sendable () -> Void)?
        var handlersSet = 0
        var refreshes = 0
    }
    private let state: Mutex<State>

    /// A view of `inner` knowing what it holds now.
    init(_ inner: InMemoryLog = InMemoryLog(), access: LogAccess, fileIO: any LogFileIO = PosixFileIO()) {
        self.inner = inner
        self.access = access
        self.fileIO = fileIO
        state = Mutex(State(learned: inner.bounds.nextPosition))
    }

    /// How many times a store asked the log to look for others' appends.
    var refreshes: Int { state.withLock { $0.refreshes } }
    /// How many times a store set a handler for others' appends (not counting its removal).
    var handlersSet: Int { state.withLock { $0.handlersSet } }

    /// Learns what `inner` holds now and tells the store, as a notification would.
    func announce() {
        let handler = state.withLock { state in
            state.learned = inner.bounds.nextPosition
            return state.handler
        }
        handler?()
    }

    var bounds: LogBounds {
        LogBounds(firstPosition: 0, nextPosition: state.withLock { $0.learned }, minTimestamp: nil, maxTimestamp: nil)
    }

    func enqueueAppend(
        _ entries: [LogEntry], committer: AppendCommitter,
        completion: @escaping @Sendable (Result<Range<LogPosition>, LogError>) -> Void
    ) {
        guard access.isWritable else { return completion(.failure(LogError(.readOnly, "declared read-only"))) }
        inner.enqueueAppend(entries, committer: committer) { [self] result in
            if case .success(let range) = result { state.withLock { $0.learned = max($0.learned, range.upperBound) } }
            completion(result)
        }
    }

    func commitEnqueuedAppends() { inner.commitEnqueuedAppends() }

    func forEachRecord(from start: LogPosition, through end: LogPosition?, _ body: (LogRecordView) throws -> Bool) throws {
        guard let last = end ?? bounds.lastPosition else { return }
        try inner.forEachRecord(from: start, through: last, body)
    }

    func forEachRecord(timestampsIn range: ClosedRange<LogTimestamp>, _ body: (LogRecordView) throws -> Bool) throws {
        let next = bounds.nextPosition
        try inner.forEachRecord(timestampsIn: range) { $0.position < next ? try body($0) : false }
    }

    func refresh() throws -> LogBounds {
        state.withLock {
            $0.refreshes += 1
            $0.learned = inner.bounds.nextPosition
        }
        return bounds
    }

    func setAppendedElsewhereHandler(_ handler: (@Sendable () -> Void)?) {
        state.withLock {
            $0.handler = handler
            if handler != nil { $0.handlersSet += 1 }
        }
    }

    func synchronize() async throws {}

    /// Leaves `inner` open: it is the writer's as much as this view's.
    func close() async throws {}
}

/// A log that says others append to it but offers the store no way to follow them.
final class UnfollowableLog: RecordLog {
    private let inner = InMemoryLog()
    let access: LogAccess
    var fileIO: any LogFileIO { PosixFileIO() }

    init(access: LogAccess) { self.access = access }

    var bounds: LogBounds { inner.bounds }
    func enqueueAppend(_ entries: [LogEntry], committer: AppendCommitter,
                       completion: @escaping @Sendable (Result<Range<LogPosition>, LogError>) -> Void) {
        inner.enqueueAppend(entries, committer: committer, completion: completion)
    }
    func commitEnqueuedAppends() { inner.commitEnqueuedAppends() }
    func forEachRecord(from start: LogPosition, through end: LogPosition?, _ body: (LogRecordView) throws -> Bool) throws {
        try inner.forEachRecord(from: start, through: end, body)
    }
    func forEachRecord(timestampsIn range: ClosedRange<LogTimestamp>, _ body: (LogRecordView) throws -> Bool) throws {
        try inner.forEachRecord(timestampsIn: range, body)
    }
    func synchronize() async throws {}
    func close() async throws {}
}

/// The store learns what it must know of its log from the log's `access` and `fileIO`, never
/// from its type: whether to follow others' appends, whether to write snapshots, whether to
/// tidy the snapshot directory, and which system calls its snapshot files go through.
@Suite struct LogAccessTests {
    /// Snapshots every event and on close, so that a store that may write any writes some.
    static let eager = SnapshotPolicy(everyEvents: 1, onClose: true)

    /// The files in `<dir>/snapshots`, none if it does not exist.
    func snapshotFiles(_ dir: TemporaryDirectory) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir.url.appending(path: "snapshots").path)) ?? []).sorted()
    }

    /// A writer's temporary snapshot file, as one killed (or still writing) leaves it.
    func leaveTemporaryFile(_ dir: TemporaryDirectory) throws -> String {
        let snapshots = dir.url.appending(path: "snapshots")
        try FileManager.default.createDirectory(at: snapshots, withIntermediateDirectories: true)
        let name = ".counter.\(UUID().uuidString).tmp"
        try Data("half a snapshot".utf8).write(to: snapshots.appending(path: name))
        return name
    }

    @Test func aReadOnlyLogIsFollowedOnRefresh() async throws {
        let records = InMemoryLog()
        let writer = try EventStore(log: records)
        let log = DeclaredLog(records, access: .readOnly)
        let counter = makeCounter()
        let reader = try EventStore(log: log, projections: [counter])
        try await writer.append([event("a", 1), event("a", 2), event("b", 5)])
        #expect(reader.nextPosition == 0)
        #expect(try reader.refresh() == 3)
        #expect(log.refreshes == 1)
        #expect(reader.nextPosition == 3)
        #expect(counter.state == ["a": 3, "b": 5])
        #expect(try reader.version(of: counted("a")) == 2)
        // It only reads: its appends are refused, as the log says.
        await #expect { try await reader.append(event("c", 1)) } throws: { ($0 as? RepositoryError)?.logError?.code == .readOnly }
        try await reader.close()
        try await writer.close()
    }

    @Test func aSharedLogIsFollowedByItsNotifications() async throws {
        let records = InMemoryLog()
        let writer = try EventStore(log: records)
        let log = DeclaredLog(records, access: .shared)
        let counter = makeCounter()
        let instance = try EventStore(log: log, projections: [counter])
        #expect(log.handlersSet == 1)
        try await writer.append([event("a", 1), event("a", 2)])
        log.announce()
        #expect(instance.nextPosition == 2)
        #expect(counter.state == ["a": 3])
        // Its own appends land after the others', version checked against them.
        try await instance.append(event("a", 4, expected: 2))
        #expect(counter.state == ["a": 7])
        try await instance.close()
        try await writer.close()
    }

    /// Would fail with the downcast: any `SharedRecordLog` that was not a `SegmentedLog` was
    /// followed, although a log this process alone appends to has no one else's appends to
    /// fold (and following its bounds could fold an own batch before its completion does).
    @Test func aLogThisProcessAloneAppendsToIsNotFollowed() async throws {
        let log = DeclaredLog(access: .exclusive)
        let store = try EventStore(log: log, projections: [makeCounter()])
        #expect(log.handlersSet == 0)
        try await store.append(event("a", 1))
        #expect(try store.refresh() == 0)
        #expect(log.refreshes == 0)
        try await store.close()
    }

    /// Would fail with the downcast: a writable log that was not a `SegmentedLog` never had a
    /// killed writer's temporary snapshot files removed.
    @Test func aLogThisProcessAloneAppendsToOwnsItsSnapshots() async throws {
        let dir = TemporaryDirectory("ek-access-exclusive")
        let stale = try leaveTemporaryFile(dir)
        let counter = makeCounter()
        let store = try EventStore(log: DeclaredLog(access: .exclusive), directory: dir.url, projections: [counter],
                                   snapshotPolicy: Self.eager)
        #expect(!snapshotFiles(dir).contains(stale), "the stale temporary file is removed at open")
        #expect(store.snapshotPolicy == Self.eager)
        try await store.append(event("a", 1))
        try await store.close()
        let written = try #require(SnapshotDirectory(storeDirectory: dir.url).newestValid(projectionName: "counter", schemaVersion: 1))
        #expect(written.nextPosition == 1)
    }

    /// Would fail with the downcast: a store over a read-only log that was not a
    /// `SegmentedLog` wrote snapshots into its writer's directory (and removed the writer's
    /// temporary file, maybe one being written).
    @Test func aReadOnlyLogGetsNoSnapshots() async throws {
        let dir = TemporaryDirectory("ek-access-readonly")
        let records = InMemoryLog()
        let writer = try EventStore(log: records)
        try await writer.append([event("a", 1), event("b", 2)])
        let inFlight = try leaveTemporaryFile(dir)
        let reader = try EventStore(log: DeclaredLog(records, access: .readOnly), directory: dir.url,
                                    projections: [makeCounter()], snapshotPolicy: Self.eager)
        #expect(reader.snapshotPolicy == .never)
        try await writer.append(event("a", 3))
        #expect(try reader.refresh() == 1)
        await #expect { try await reader.writeSnapshots() } throws: { ($0 as? RepositoryError)?.logError?.code == .readOnly }
        try await reader.close()
        #expect(snapshotFiles(dir) == [inFlight])
        try await writer.close()
    }

    /// The segmented log read beside its writer, the case the downcast handled: still no
    /// snapshots from the reader, whatever policy it was given.
    @Test func aSegmentedLogReadBesideItsWriterGetsNoSnapshots() async throws {
        let dir = TemporaryDirectory("ek-access-segmented")
        let writer = try EventStore.open(at: dir.url, configuration: EventStore.Configuration(snapshots: .never))
        try await writer.append([event("a", 1), event("a", 2)])
        let reader = try EventStore(log: SegmentedLog.openReadOnly(at: dir.url), directory: dir.url,
                                    projections: [makeCounter()], snapshotPolicy: Self.eager)
        #expect(reader.log.access == .readOnly)
        try await writer.append(event("a", 3))
        #expect(try reader.refresh() == 1)
        try await reader.close()
        #expect(snapshotFiles(dir).isEmpty)
        try await writer.close()
    }

    /// A log instances share writes snapshots to its own directory, but removes no temporary
    /// file: no lock says the directory is this process's alone.
    @Test func aSharedLogWritesSnapshotsAndRemovesNone() async throws {
        let dir = TemporaryDirectory("ek-access-shared")
        let other = try leaveTemporaryFile(dir)
        let store = try EventStore(log: DeclaredLog(access: .shared), directory: dir.url, projections: [makeCounter()],
                                   snapshotPolicy: SnapshotPolicy(everyEvents: nil, onClose: true))
        try await store.append(event("a", 1))
        try await store.close()
        #expect(snapshotFiles(dir).contains(other))
        #expect(SnapshotDirectory(storeDirectory: dir.url).newestValid(projectionName: "counter", schemaVersion: 1)?.nextPosition == 1)
    }

    /// Would fail with the downcast: only a `SegmentedLog`'s file layer reached the
    /// snapshots; any other log's was replaced by the real system calls.
    @Test func snapshotsGoThroughTheFileLayerOfAnyLog() async throws {
        let dir = TemporaryDirectory("ek-access-fileio")
        let store = try EventStore(log: DeclaredLog(access: .exclusive, fileIO: SnapshotTests.FailingSnapshotSyncs()),
                                   directory: dir.url, projections: [makeCounter()], snapshotPolicy: .never)
        try await store.append(event("a", 1))
        await #expect {
            try await store.writeSnapshots()
        } throws: { error in
            guard let cause = (error as? RepositoryError)?.logError else { return false }
            return cause.code == .io && cause.systemErrorNumber == 5 && cause.file?.contains("/snapshots/") == true
        }
        try await store.close()
    }

    @Test(arguments: [LogAccess.readOnly, .shared])
    func aLogOthersAppendToMustBeFollowable(access: LogAccess) throws {
        #expect {
            _ = try EventStore(log: UnfollowableLog(access: access))
        } throws: { error in
            guard let cause = (error as? RepositoryError)?.logError else { return false }
            return cause.code == .invalidArgument && cause.message.contains("UnfollowableLog") && cause.message.contains("\(access)")
        }
        // Saying it alone appends is fine: there is nothing to follow.
        _ = try EventStore(log: UnfollowableLog(access: .exclusive))
    }

    @Test func eachLogAnswersItsAccess() async throws {
        let dir = TemporaryDirectory("ek-access-kinds")
        let writer = try SegmentedLog.open(at: dir.url)
        let reader = try SegmentedLog.openReadOnly(at: dir.url)
        #expect(writer.access == .exclusive)
        #expect(reader.access == .readOnly)
        #expect(InMemoryLog().access == .exclusive)
        #expect(SharedMemoryLog(SharedMemoryServer()).access == .shared)
        #expect(LogAccess.exclusive.isWritable && !LogAccess.exclusive.othersMayAppend)
        #expect(!LogAccess.readOnly.isWritable && LogAccess.readOnly.othersMayAppend)
        #expect(LogAccess.shared.isWritable && LogAccess.shared.othersMayAppend)
        try await reader.close()
        try await writer.close()
    }
}

/// One way to open a durable store: `EventStore.open(at:configuration:projections:)`.
@Suite struct StoreOpenTests {
    /// Projections given to `open` are restored from their snapshots and caught up in the
    /// store's one replay, as if they were there from the start.
    @Test func openRestoresTheProjectionsItIsGiven() async throws {
        let dir = TemporaryDirectory("ek-open-projections")
        let configuration = EventStore.Configuration(snapshots: SnapshotPolicy(everyEvents: nil, onClose: true))
        let first = try EventStore.open(at: dir.url, configuration: configuration, projections: [makeCounter()])
        try await first.append([event("a", 1), event("b", 2)])
        try await first.close()
        let counter = makeCounter()
        let reopened = try EventStore.open(at: dir.url, configuration: configuration, projections: [counter])
        #expect(counter.state == ["a": 1, "b": 2])
        #expect(counter.eventsApplied == 0, "restored from the snapshot written at close, not replayed")
        #expect(reopened.nextPosition == 2)
        // A second writer is refused with the log's error inside a storage failure.
        #expect {
            _ = try EventStore.open(at: dir.url, configuration: configuration)
        } throws: { ($0 as? RepositoryError)?.logError?.code == .locked }
        try await reopened.close()
    }

    /// The shorthand opens through the same path, with the same options.
    @Test func theShorthandOpensLikeTheConfiguration() async throws {
        let dir = TemporaryDirectory("ek-open-shorthand")
        let store = try EventStore.open(at: dir.url, log: SegmentedLog.Configuration(segmentSize: 4096), snapshotPolicy: .never)
        #expect(store.snapshotPolicy == .never)
        #expect(store.log.access == .exclusive)
        try await store.append(event("a", 1))
        try await store.close()
        #expect(SnapshotDirectory(storeDirectory: dir.url).files(for: "$entity-versions").isEmpty)
    }
}
