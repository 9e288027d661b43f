import KernelPrimitives

/// A ``RecordLog`` held in memory: same semantics as ``SegmentedLog`` (gap-free positions,
/// atomic batches, time-range reads), no files. For tests and previews.
public final class InMemoryLog: RecordLog {
    private struct State {
        var records: [LogRecord] = []
        var minTimestamp: LogTimestamp?
        var maxTimestamp: LogTimestamp?
        var closed = false
    }

    private let state = Locked(State())

    /// Creates an empty log, or one holding `records` re-numbered from position 0.
    public init(records: [LogEntry] = []) {
        state.withLock { state in
            for entry in records { Self.add(entry, to: &state) }
        }
    }

    private static func add(_ entry: LogEntry, to state: inout State) {
        let position = LogPosition(state.records.count)
        state.records.append(LogRecord(position: position, timestamp: entry.timestamp, payload: entry.payload))
        state.minTimestamp = Swift.min(state.minTimestamp ?? entry.timestamp, entry.timestamp)
        state.maxTimestamp = Swift.max(state.maxTimestamp ?? entry.timestamp, entry.timestamp)
    }

    /// ``LogAccess/exclusive``: the log lives in this process, which alone appends.
    public var access: LogAccess { .exclusive }

    /// The log has no files; a store's snapshots beside it use the ordinary system calls.
    public var fileIO: any LogFileIO { PosixFileIO() }

    public var bounds: LogBounds {
        state.withLock {
            LogBounds(firstPosition: 0, nextPosition: LogPosition($0.records.count),
                      minTimestamp: $0.minTimestamp, maxTimestamp: $0.maxTimestamp)
        }
    }

    /// Appends at once and calls `completion` before returning, whoever `committer` names:
    /// memory needs no commit.
    public func enqueueAppend(
        _ entries: [LogEntry], committer: AppendCommitter,
        completion: @escaping @Sendable (Result<Range<LogPosition>, LogError>) -> Void
    ) {
        let result = Result { () throws(LogError) in try appendNow(entries) }
        completion(result)
    }

    /// Nothing to do: appends complete when enqueued.
    public func commitEnqueuedAppends() {}

    /// Appends synchronously; the in-memory log never waits.
    /// - Throws: ``LogError`` for an empty batch or a closed log.
    public func appendNow(_ entries: [LogEntry]) throws(LogError) -> Range<LogPosition> {
        guard !entries.isEmpty else { throw LogError(.invalidArgument, "an append needs at least one record") }
        return try state.withLock { (state) throws(LogError) -> Range<LogPosition> in
            guard !state.closed else { throw LogError(.closed, "the log is closed") }
            let first = LogPosition(state.records.count)
            for entry in entries { Self.add(entry, to: &state) }
            return first..<LogPosition(state.records.count)
        }
    }

    public func forEachRecord(
        from start: LogPosition, through end: LogPosition?, _ body: (LogRecordView) throws -> Bool
    ) throws {
        // Copy out under the lock so that `body` may itself use the log.
        let records: ArraySlice<LogRecord> = state.withLock { state in
            let upper = Swift.min(LogPosition(state.records.count), end.map { $0 &+ 1 } ?? .max)
            guard start < upper else { return [] }
            return state.records[Int(start)..<Int(upper)]
        }
        for record in records {
            let keepGoing = try record.payload.withUnsafeBytes { bytes in
                try body(LogRecordView(position: record.position, timestamp: record.timestamp, payload: bytes))
            }
            if !keepGoing { return }
        }
    }

    public func forEachRecord(
        timestampsIn range: ClosedRange<LogTimestamp>, _ body: (LogRecordView) throws -> Bool
    ) throws {
        try forEachRecord(from: 0, through: nil) { view in
            guard range.contains(view.timestamp) else { return true }
            return try body(view)
        }
    }

    public func synchronize() async throws {}

    public func close() async throws {
        state.withLock { $0.closed = true }
    }
}
