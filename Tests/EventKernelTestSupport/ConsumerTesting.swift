public import EventKernel
public import EventLog
public import Foundation
public import Synchronization
import Testing

// The set-up the consumer suites share (ConsumersTests, ConsumersReviewTests): stores of
// counted events, handlers that record or refuse, and a file layer that watches syncs.

/// Collects what a handler saw, across the handler's calls.
public final class Seen: Sendable {
    private let values = Mutex<[UInt64]>([])
    public init() {}
    /// Records the positions of a handled batch.
    public func add(_ positions: [UInt64]) { values.withLock { $0 += positions } }
    /// Every position recorded, in the order handled.
    public var positions: [UInt64] { values.withLock { $0 } }
}

/// A handler error with a description to find in the parked list.
public struct Refused: Error, CustomStringConvertible {
    public var position: UInt64
    public init(position: UInt64) { self.position = position }
    public var description: String { "refused \(position)" }
}

/// Tiny delays: retries are exercised, not waited for.
public let quickRetry = RetryPolicy(maxAttempts: 3, initialDelay: .microseconds(10), maxDelay: .microseconds(100))

/// Appends `count` "Counted" events (payload `[1]`), one per append, to streams `<prefix>0` to
/// `<prefix>6` in turn.
/// - Throws: What the append throws.
public func appendCounted(_ store: EventStore, _ count: Int, prefix: String = "c") async throws {
    for i in 0..<count {
        try await store.append(PendingEvent(EncodedEvent(eventType: "Counted", schemaVersion: 1,
                                                         stream: StreamID("Counted", .string("\(prefix)\(i % 7)")), payload: [1])))
    }
}

/// A store for consumer tests in `directory`: the local log, no snapshots.
/// - Throws: What opening the store throws.
public func consumerTestStore(at directory: URL) throws -> EventStore {
    try EventStore.open(at: directory, snapshotPolicy: .never)
}

/// A store for consumer tests in `directory` whose log writes through `io` (no projections,
/// no snapshots).
/// - Parameters:
///   - directory: The store directory.
///   - io: The file layer, to watch or fail the log's syncs.
///   - durability: The log's durability (synced by default).
/// - Throws: What opening the log or the store throws.
public func consumerTestStore(at directory: URL, io: WatchedFileIO, durability: DurabilityPolicy = .synced) throws -> EventStore {
    var configuration = SegmentedLog.Configuration(durability: durability)
    configuration.fileIO = io
    return try EventStore(log: try SegmentedLog.open(at: directory, configuration: configuration),
                          directory: directory, projections: [], snapshotPolicy: .never)
}

/// Runs `consumer` until `stop` says so (checked while it runs), then cancels it; `seen`
/// records each batch after `handler` returned.
/// - Throws: What the run throws.
public func runUntil(_ consumer: Consumer, batchSize: Int? = nil, seen: Seen, _ stop: @escaping @Sendable () -> Bool,
                     handler: @escaping @Sendable ([EventEnvelope]) async throws -> Void = { _ in }) async throws {
    let task = Task {
        try await consumer.run(batchSize: batchSize) { batch in
            try await handler(batch)
            seen.add(batch.map(\.position))
        }
    }
    #expect(try await eventually { stop() })
    task.cancel()
    try await task.value
}

/// Blocks handlers until opened.
public actor Gate {
    private var isOpen = false
    private var waiting: [CheckedContinuation<Void, Never>] = []
    public init() {}
    /// Returns once the gate is open.
    public func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiting.append($0) }
    }
    /// Opens the gate for every waiter, present and future.
    public func open() {
        isOpen = true
        for continuation in waiting { continuation.resume() }
        waiting.removeAll()
    }
}

/// Records the syncs of the store's files and can fail the data syncs of its segments.
public final class WatchedFileIO: LogFileIO, Sendable {
    private let real = PosixFileIO()
    /// The paths `synchronize` (fsync) was called on, in order.
    public let synced = Mutex<[String]>([])
    /// The data syncs (fdatasync) that succeeded.
    public let dataSyncs = Atomic<Int>(0)
    /// Set to make every data sync fail with EIO.
    public let failDataSyncs = Atomic<Bool>(false)
    public init() {}
    public func write(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) -> Int {
        try real.write(bytes, toAbsoluteOffset: offset, descriptor: descriptor, path: path)
    }
    public func synchronizeData(descriptor: Int32, path: String) throws(LogError) {
        if failDataSyncs.load(ordering: .relaxed) { throw LogError(.io, "fdatasync failed (injected)", file: path, systemErrorNumber: 5) }
        dataSyncs.add(1, ordering: .relaxed)
        try real.synchronizeData(descriptor: descriptor, path: path)
    }
    public func synchronize(descriptor: Int32, path: String) throws(LogError) {
        synced.withLock { $0.append(path) }
        try real.synchronize(descriptor: descriptor, path: path)
    }
    public func preallocate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try real.preallocate(descriptor: descriptor, path: path, length: length) }
    public func truncate(descriptor: Int32, path: String, length: Int64) throws(LogError) { try real.truncate(descriptor: descriptor, path: path, length: length) }
}
