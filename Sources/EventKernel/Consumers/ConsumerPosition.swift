public import EventLog

/// A consumer's position bound to the history of the log it was taken in: what a handler that
/// keeps its own checkpoint (``CheckpointOwner/handler``) stores in its target's transaction,
/// and gives back as ``ConsumerStart/checkpoint(_:)`` when the consumer opens again.
///
/// A bare position cannot tell the log it was taken in from one that was cut since (a repair,
/// a torn tail, unsynced events lost in a machine crash, which a read-only reader may have seen
/// before their `fsync`) and has grown past it again: starting there would silently skip the
/// new events that took the lost positions. This value also records the log's history epoch
/// and the event it was taken after, and the consumer checks them against the log with the
/// same rule as the store's own checkpoints.
///
/// It is `Codable` (store it as JSON text, for instance); treat it as opaque apart from
/// ``ConsumerPosition/next``.
public struct ConsumerPosition: Codable, Hashable, Sendable {
    /// The next position to handle: every event below it is handled.
    public let next: LogPosition
    /// The log's history epoch when it was taken.
    let historyEpoch: UInt64
    /// The timestamp (nanoseconds since 1970) of the event at `next - 1`, `nil` when there was none to read.
    let anchorTimestamp: Int64?
    /// That event's payload CRC-32C.
    let anchorChecksum: UInt32?

    /// The position of a store checkpoint (its name is not kept: the consumer gives it back).
    init(_ checkpoint: ConsumerCheckpoint) {
        next = checkpoint.committed
        historyEpoch = checkpoint.historyEpoch
        anchorTimestamp = checkpoint.anchor?.timestamp.nanosecondsSince1970
        anchorChecksum = checkpoint.anchor?.payloadChecksum
    }

    /// This position as `consumer`'s checkpoint: the binding rule is
    /// `ConsumerCheckpoint.bindingProblem(in:end:)`, for both.
    func checkpoint(consumer: String) -> ConsumerCheckpoint {
        var checkpoint = ConsumerCheckpoint(name: consumer, committed: next, committedAt: .now())
        checkpoint.historyEpoch = historyEpoch
        if let anchorTimestamp, let anchorChecksum {
            checkpoint.anchor = SnapshotAnchor(timestamp: LogTimestamp(nanosecondsSince1970: anchorTimestamp),
                                               payloadChecksum: anchorChecksum)
        }
        return checkpoint
    }
}

extension Consumer {
    /// The position after `event`, bound to the log's history: store it with the effects of
    /// `event` (and those before it) in the handler's own transaction, and open the consumer
    /// at ``ConsumerStart/checkpoint(_:)`` with it.
    ///
    /// ```swift
    /// try await consumer.run { batch in
    ///     let position = try consumer.position(after: batch[batch.count - 1])
    ///     try target.write { db in apply(batch, db); saveCheckpoint(position, db) }
    /// }
    /// ```
    /// - Parameter event: An event this consumer delivered (the last one of the transaction).
    /// - Returns: The position `event.position + 1`, with the log's history epoch and an
    ///   anchor of `event` as the log holds it.
    /// - Throws: ``ConsumerError/positionOutOfRange(consumer:position:logEnd:)`` for an event
    ///   the store has not committed; ``RepositoryError/storage(_:)`` when the log cannot be read.
    public func position(after event: EventEnvelope) throws -> ConsumerPosition {
        let end = store.nextPosition
        guard event.position < end else {
            throw ConsumerError.positionOutOfRange(consumer: name, position: event.position, logEnd: end)
        }
        return ConsumerPosition(try ConsumerCheckpoint.bound(name: name, committed: event.position + 1, in: store.log))
    }
}
