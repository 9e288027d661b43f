import Dispatch
import EventKernel
public import EventLog
import Foundation
import KernelPrimitives

/// A log in memory that several stores share, each through its own ``SharedMemoryLog``: the
/// semantics of a shared log (`PostgresLog`) without a server, so that the store's shared-log
/// path is tested everywhere, the sanitizer runs included (they build without PostgreSQL).
///
/// Like the PostgreSQL log it checks each batch's streams against the committed versions (a
/// stream's first event in the batch must follow it), refuses a batch alone with a
/// `RepositoryError.conflict` cause, assigns gap-free positions in commit order, and tells
/// every instance after each commit (asynchronously, as a notification arrives).
public final class SharedMemoryServer: Sendable {
    private struct State {
        var records: [LogRecord] = []
        var versions: [StreamID: UInt64] = [:]
        var instances: [UInt64: @Sendable () -> Void] = [:]
        var nextInstance: UInt64 = 0
    }

    private let state = Locked(State())

    public init() {}

    /// The records committed so far.
    public var count: LogPosition { state.withLock { LogPosition($0.records.count) } }

    fileprivate func commit(_ entries: [LogEntry]) -> Result<Range<LogPosition>, LogError> {
        let envelopes: [EventEnvelope]
        do {
            envelopes = try entries.map { try EventEnvelope(recordPayload: $0.payload, position: 0, timestamp: $0.timestamp) }
        } catch {
            return .failure(LogError(.invalidArgument, "not an event: \(error)"))
        }
        let (result, listeners) = state.withLock { state -> (Result<Range<LogPosition>, LogError>, [@Sendable () -> Void]) in
            var checked: Set<StreamID> = []
            for envelope in envelopes where checked.insert(envelope.stream).inserted {
                let current = state.versions[envelope.stream] ?? 0
                guard envelope.entityVersion == current + 1 else {
                    let cause = RepositoryError.conflict(stream: envelope.stream, expected: envelope.entityVersion - 1, actual: current)
                    return (.failure(LogError(.conflict, "\(envelope.stream) is at version \(current)", cause: cause)), [])
                }
            }
            let first = LogPosition(state.records.count)
            for (offset, entry) in entries.enumerated() {
                state.records.append(LogRecord(position: first + LogPosition(offset), timestamp: entry.timestamp, payload: entry.payload))
                state.versions[envelopes[offset].stream] = envelopes[offset].entityVersion
            }
            return (.success(first..<first + LogPosition(entries.count)), Array(state.instances.values))
        }
        // Notifications arrive later, on threads of their own.
        for listener in listeners { DispatchQueue.global().async { listener() } }
        return result
    }

    fileprivate func records(from start: LogPosition, through end: LogPosition) -> ArraySlice<LogRecord> {
        state.withLock { state in
            let upper = min(LogPosition(state.records.count), end &+ 1)
            return start < upper ? state.records[Int(start)..<Int(upper)] : []
        }
    }

    fileprivate func listen(_ listener: @escaping @Sendable () -> Void) -> UInt64 {
        state.withLock { state in
            state.nextInstance += 1
            state.instances[state.nextInstance] = listener
            return state.nextInstance
        }
    }

    fileprivate func stopListening(_ token: UInt64) {
        _ = state.withLock { $0.instances.removeValue(forKey: token) }
    }
}

/// One instance's view of a ``SharedMemoryServer``: a ``SharedRecordLog``.
public final class SharedMemoryLog: SharedRecordLog {
    private struct View {
        var next: LogPosition
        var handler: (@Sendable () -> Void)?
        var closed = false
    }

    private let server: SharedMemoryServer
    private let view: Locked<View>
    /// Commits one batch at a time, in the order they were enqueued (as one instance's
    /// committer does), off the appender's thread.
    private let committer = DispatchQueue(label: "SharedMemoryLog.committer")
    private let token = Locked<UInt64?>(nil)

    /// A view of `server`, knowing everything committed so far.
    /// - Parameter notified: Whether the view learns of other instances' commits by itself (a
    ///   listener); otherwise only ``refresh()`` and its own commits move it.
    public init(_ server: SharedMemoryServer, notified: Bool = true) {
        self.server = server
        view = Locked(View(next: server.count))
        if notified {
            token.withLock { $0 = server.listen { [weak self] in self?.learn() } }
        }
    }

    private func learn() {
        let next = server.count
        let handler = view.withLock { view -> (@Sendable () -> Void)? in
            guard !view.closed, next > view.next else { return nil }
            view.next = next
            return view.handler
        }
        handler?()
    }

    /// ``LogAccess/shared``: every view of the server appends to it.
    public var access: LogAccess { .shared }

    /// No files: the ordinary system calls for a store's snapshots.
    public var fileIO: any LogFileIO { PosixFileIO() }

    public var bounds: LogBounds {
        LogBounds(firstPosition: 0, nextPosition: view.withLock { $0.next }, minTimestamp: nil, maxTimestamp: nil)
    }

    public func enqueueAppend(
        _ entries: [LogEntry], committer _: AppendCommitter,
        completion: @escaping @Sendable (Result<Range<LogPosition>, LogError>) -> Void
    ) {
        guard !view.withLock({ $0.closed }) else { return completion(.failure(LogError(.closed, "the log is closed"))) }
        guard !entries.isEmpty else { return completion(.failure(LogError(.invalidArgument, "empty batch"))) }
        committer.async { [self] in
            let result = server.commit(entries)
            if case .success(let range) = result { view.withLock { $0.next = max($0.next, range.upperBound) } }
            completion(result)
        }
    }

    public func commitEnqueuedAppends() {}

    public func forEachRecord(from start: LogPosition, through end: LogPosition?, _ body: (LogRecordView) throws -> Bool) throws {
        guard let last = end ?? bounds.lastPosition else { return }
        for record in server.records(from: start, through: last) {
            let more = try record.payload.withUnsafeBytes { try body(LogRecordView(position: record.position, timestamp: record.timestamp, payload: $0)) }
            if !more { return }
        }
    }

    public func forEachRecord(timestampsIn range: ClosedRange<LogTimestamp>, _ body: (LogRecordView) throws -> Bool) throws {
        try forEachRecord(from: 0, through: nil) { view in range.contains(view.timestamp) ? try body(view) : true }
    }

    public func refresh() throws -> LogBounds {
        let next = server.count
        view.withLock { $0.next = max($0.next, next) }
        return bounds
    }

    public func setAppendedElsewhereHandler(_ handler: (@Sendable () -> Void)?) {
        view.withLock { $0.handler = handler }
    }

    public func synchronize() async throws {}

    public func close() async throws {
        view.withLock { $0.closed = true }
        if let token = token.withLock({ $0 }) { server.stopListening(token) }
        // Appends already queued still complete.
        await withCheckedContinuation { continuation in committer.async { continuation.resume() } }
    }
}
