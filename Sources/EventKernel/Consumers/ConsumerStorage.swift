import Foundation
package import EventLog
import KernelPrimitives

/// Where a store's consumers keep their committed positions and parked events: files in the
/// store directory (``ConsumerDirectory``), memory for an in-memory store, or what the log
/// offers (``ConsumerStorageSource``: tables beside a PostgreSQL log, shared by its instances).
///
/// Writes are made while the consumer's lock (``lock(consumer:)``) is held, by its holder,
/// which passes that lock: a log's storage writes through that very lease (never through
/// another lease this process took later for the same name), so a handle whose lease ended
/// writes nothing.
package protocol ConsumerStorage: Sendable {
    /// The consumer's checkpoint, or `nil` when it has none yet.
    func checkpoint(named name: String) throws(ConsumerError) -> ConsumerCheckpoint?
    /// Replaces the consumer's checkpoint durably, as the holder of `lock`.
    func write(_ checkpoint: ConsumerCheckpoint, under lock: ConsumerLock?) throws(ConsumerError)
    /// The consumer's parked events, in position order.
    func parked(named name: String) throws(ConsumerError) -> [ParkedEvent]
    /// Replaces the consumer's parked events durably, as the holder of `lock`.
    func writeParked(_ events: [ParkedEvent], named name: String, under lock: ConsumerLock?) throws(ConsumerError)
    /// The names of the consumers with a checkpoint or parked events, sorted.
    func names() throws(ConsumerError) -> [String]
    /// Takes the consumer's lock for as long as the result lives (`nil`: nothing to share),
    /// without waiting: ``ConsumerError/inUse(consumer:path:)`` when another holder has it.
    func lock(consumer name: String) throws(ConsumerError) -> ConsumerLock?
    /// Where the consumers are kept, for messages.
    var location: String { get }
}

extension ConsumerStorage {
    package var location: String { "the store" }
}

/// A log that keeps its store's consumers itself (a log several instances share keeps them
/// where every instance sees them): the store asks its log for this capability rather than
/// knowing the log's type.
package protocol ConsumerStorageSource {
    /// The storage for the consumers of a store over this log.
    func makeConsumerStorage() -> any ConsumerStorage
}

/// The consumers of an in-memory store: gone with the process, as its log is.
final class ConsumerMemory: ConsumerStorage {
    private struct State {
        var checkpoints: [String: ConsumerCheckpoint] = [:]
        var parked: [String: [ParkedEvent]] = [:]
    }
    private let state = Locked(State())

    func checkpoint(named name: String) -> ConsumerCheckpoint? { state.withLock { $0.checkpoints[name] } }
    func write(_ checkpoint: ConsumerCheckpoint, under lock: ConsumerLock?) { state.withLock { $0.checkpoints[checkpoint.name] = checkpoint } }
    func parked(named name: String) -> [ParkedEvent] { state.withLock { $0.parked[name] ?? [] } }
    func writeParked(_ events: [ParkedEvent], named name: String, under lock: ConsumerLock?) { state.withLock { $0.parked[name] = events } }
    func names() -> [String] { state.withLock { Set($0.checkpoints.keys).union($0.parked.keys).sorted() } }
    // Nothing outside this process can see an in-memory store.
    func lock(consumer name: String) -> ConsumerLock? { nil }
}

extension ConsumerStorage {
    /// Reads consumer `name`'s parked list, lets `change` change it, and writes it back when
    /// it changed, as the holder of `lock`: the one way the API and the CLI change a list (the
    /// caller serializes its own changes; the lock keeps other processes out).
    /// - Returns: The list as written (or as read, when unchanged).
    /// - Throws: What `change` throws (nothing is written then); ``ConsumerError`` from the storage.
    package func changeParked(named name: String, under lock: ConsumerLock?,
                              _ change: (inout [ParkedEvent]) throws(ConsumerError) -> Void) throws(ConsumerError) -> [ParkedEvent] {
        var list = try parked(named: name)
        let before = list
        try change(&list)
        if list != before { try writeParked(list, named: name, under: lock) }
        return list
    }
}

extension [ParkedEvent] {
    /// Removes the entry at `position` (skipping it: it is never handled).
    /// - Throws: ``ConsumerError/notParked(consumer:position:)`` when no entry has that position.
    package mutating func skip(at position: LogPosition, consumer: String) throws(ConsumerError) {
        guard let index = firstIndex(where: { $0.position == position }) else { throw .notParked(consumer: consumer, position: position) }
        remove(at: index)
    }

    /// Marks the entry at `position` (every entry, when `nil`) for a retry by the consumer's next run.
    /// - Returns: How many entries were not marked before.
    /// - Throws: ``ConsumerError/notParked(consumer:position:)`` when a position is given and no
    ///   entry has it.
    @discardableResult
    package mutating func requestRetry(at position: LogPosition?, consumer: String) throws(ConsumerError) -> Int {
        var marked = 0
        if let position {
            guard let index = firstIndex(where: { $0.position == position }) else { throw .notParked(consumer: consumer, position: position) }
            if !self[index].retryRequested { marked = 1 }
            self[index].retryRequested = true
        } else {
            for index in indices where !self[index].retryRequested {
                self[index].retryRequested = true
                marked += 1
            }
        }
        return marked
    }
}
