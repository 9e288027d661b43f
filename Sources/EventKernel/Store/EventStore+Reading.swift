public import Foundation
public import EventLog
import KernelPrimitives

extension EventStore {
    /// Reads committed events from `start` forward.
    /// - Parameters:
    ///   - start: The first position.
    ///   - limit: At most this many.
    /// - Throws: ``RepositoryError/storage(_:)`` for log damage or a record that is not an event.
    /// - Complexity: O(log b + k).
    public func read(from start: LogPosition = 0, limit: Int = .max) throws -> [EventEnvelope] {
        var out: [EventEnvelope] = []
        guard limit > 0 else { return out }
        try forEachEnvelope(from: start, through: nil) { envelope in
            out.append(consume envelope)
            return out.count < limit
        }
        return out
    }

    /// Calls `body` with each event from `start` through `end` (inclusive; `nil`: the end).
    ///
    /// `body` owns each envelope it is given (`consuming`): one it keeps (appended to an array)
    /// is moved there, not copied, which saves a retain and a release of each of its strings
    /// and its payload per event.
    /// - Throws: ``RepositoryError/storage(_:)``, or what `body` throws.
    public func forEachEnvelope(
        from start: LogPosition, through end: LogPosition?, _ body: (consuming EventEnvelope) throws -> Bool
    ) throws {
        try Self.forEachEnvelope(in: log, from: start, through: end, body)
    }

    /// ``forEachEnvelope(from:through:_:)`` of a log read without a store (`export` of events
    /// needs no projection, nor the version table a store builds when it opens).
    /// - Throws: ``RepositoryError/storage(_:)``, or what `body` throws.
    package static func forEachEnvelope(
        in log: any RecordLog, from start: LogPosition, through end: LogPosition?, _ body: (consuming EventEnvelope) throws -> Bool
    ) throws {
        var strings = StringInterner()
        try readingRecords {
            try log.forEachRecord(from: start, through: end) { view in try body(try EventEnvelope(view, strings: &strings)) }
        }
    }

    /// Every event of one stream, oldest first.
    /// - Parameters:
    ///   - stream: The stream.
    ///   - end: The last position to read (`nil`: the end): a reader that knows where the log
    ///     is damaged reads the history before the damage.
    /// - Throws: ``RepositoryError/storage(_:)``.
    /// - Complexity: O(n) over the whole log (a scan; streams are not indexed by the log).
    public func history(of stream: StreamID, through end: LogPosition? = nil) throws -> [EventEnvelope] {
        var out: [EventEnvelope] = []
        try forEachEnvelope(from: 0, through: end) { envelope in
            if envelope.stream == stream { out.append(consume envelope) }
            return true
        }
        return out
    }

    /// A stream of committed events from `start`: first those already committed, read from
    /// the log, then each new commit as it happens; no gap, no duplicate, in position order.
    ///
    /// The stream buffers without bound; it ends when the store closes, and throws if the
    /// catch-up read fails.
    public func subscribe(from start: LogPosition = 0) -> AsyncThrowingStream<EventEnvelope, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: EventEnvelope.self)
        let outcome: Result<UInt64?, any Error> = commit.withLock { state in
            guard !state.closed else { return .success(nil) }
            // Under the commit lock, nextPosition is exact: records below it were delivered to
            // live subscribers already, none above can be until we are registered.
            do {
                if start < state.nextPosition {
                    try forEachEnvelope(from: start, through: state.nextPosition - 1) { envelope in
                        continuation.yield(envelope)
                        return true
                    }
                }
            } catch { return .failure(error) }
            state.nextSubscriber += 1
            state.subscribers[state.nextSubscriber] = continuation
            return .success(state.nextSubscriber)
        }
        switch outcome {
        case .success(let id?):
            continuation.onTermination = { [weak self] _ in
                _ = self?.commit.withLock { $0.subscribers.removeValue(forKey: id) }
            }
        case .success(nil): continuation.finish()
        case .failure(let error): continuation.finish(throwing: error)
        }
        return stream
    }

    // MARK: Time travel

    /// The state of a projection as of a position: a fresh instance from `make`, restored from
    /// the newest snapshot at or before that point if one fits, then folded up to and including
    /// `position`.
    /// - Parameters:
    ///   - make: Creates a fresh instance (same name and schema version as the live one).
    ///   - position: The last event to include.
    /// - Throws: ``RepositoryError/storage(_:)``.
    /// - Complexity: O(events between the snapshot used and `position`).
    public func state<P: Projection>(of make: () -> P, throughPosition position: LogPosition) throws -> P {
        let projection = make()
        let end = Swift.min(position &+ 1, log.bounds.nextPosition)
        if let file = try usableSnapshot(for: projection, maxNextPosition: end, removingStale: false) {
            try? projection.restore(from: ProjectionSnapshot(bytes: file.body, nextPosition: file.nextPosition))
        }
        try Self.replay(log, into: [projection], from: projection.nextPosition, until: end)
        if let failure = projection.failure { throw RepositoryError.undecodableEvent(failure) }
        return projection
    }

    /// The state of a projection as of a date: what the store knew then, every event of the
    /// log's longest prefix recorded at or before `date` (the rule of
    /// ``lastPosition(recordedAtOrBefore:)-(Date)``). `nil` when no event is that old.
    /// - Throws: ``RepositoryError/storage(_:)``.
    /// - Complexity: O(n) to find the position, then as ``state(of:throughPosition:)``.
    public func state<P: Projection>(of make: () -> P, asOf date: Date) throws -> P? {
        guard let position = try lastPosition(recordedAtOrBefore: date) else { return nil }
        return try state(of: make, throughPosition: position)
    }

    /// The last position of the log's longest prefix recorded at or before `date`: what the
    /// store knew at that moment (the rule of ``lastPosition(recordedAtOrBefore:)-(LogTimestamp)``).
    /// - Throws: ``RepositoryError/storage(_:)``.
    public func lastPosition(recordedAtOrBefore date: Date) throws -> LogPosition? {
        let limit: LogTimestamp
        do { limit = try LogTimestamp(date) } catch { throw RepositoryError.invalidQuery("\(error)") }
        return try lastPosition(recordedAtOrBefore: limit)
    }

    /// The last position of the log's longest prefix recorded at or before `limit`, to the
    /// nanosecond (a `Date` holds only about a tenth of a microsecond today: an event's own
    /// stored timestamp, passed as a `Date`, can fall just before it); `nil` when the first
    /// event was recorded after it.
    ///
    /// A prefix, not "the last event recorded at or before": recording times are not always in
    /// log order (concurrent appends take their time before group commit orders them, a clock
    /// can step back, an application can give `recordedAt`), and the store learns events in log
    /// order, so an event recorded after `limit` was not known then, nor was anything after it,
    /// whatever its time says. Cutting after the last event stamped at or before `limit` would
    /// include such a later event.
    /// - Parameter limit: The latest recording time to include.
    /// - Throws: ``RepositoryError/storage(_:)``.
    /// - Complexity: O(k) for the k events of the prefix.
    public func lastPosition(recordedAtOrBefore limit: LogTimestamp) throws -> LogPosition? {
        try Self.lastPosition(in: log, recordedAtOrBefore: limit)
    }

    /// ``lastPosition(recordedAtOrBefore:)-(LogTimestamp)`` of any log (a restore cuts a
    /// backup's log by it): the one place the rule is written.
    /// - Parameter end: The last position to read (`nil`: the end). A reader that knows where
    ///   the log is damaged reads only before it: an answer of `end` then means the prefix may
    ///   go on past it, which only the damaged batch could say.
    package static func lastPosition(in log: any RecordLog, recordedAtOrBefore limit: LogTimestamp,
                                     through end: LogPosition? = nil) throws -> LogPosition? {
        var found: LogPosition?
        try Self.readingRecords {
            try log.forEachRecord(from: 0, through: end) { view in
                guard view.timestamp <= limit else { return false }
                found = view.position
                return true
            }
        }
        return found
    }

    /// Runs a read of log records, turning the log's and the envelope decoder's errors into
    /// ``RepositoryError/storage(_:)`` that keeps them as the cause: the one place that maps
    /// read failures, so every reader reports damage the same way.
    static func readingRecords<R>(_ body: () throws -> R) throws -> R {
        do { return try body() } catch let error as BinaryDecodingError {
            throw RepositoryError.storage(StorageFailure("a log record is not a valid event", cause: error))
        } catch let error as LogError {
            throw RepositoryError.storage(StorageFailure(error))
        }
    }
}
