import Foundation
import EventLog
import KernelPrimitives

/// Where a store's consumers keep their committed positions and parked events: files in the
/// store directory (``ConsumerDirectory``), or memory for an in-memory store.
protocol ConsumerStorage: Sendable {
    /// The consumer's checkpoint, or `nil` when it has none yet.
    func checkpoint(named name: String) throws(ConsumerError) -> ConsumerCheckpoint?
    /// Replaces the consumer's checkpoint durably.
    func write(_ checkpoint: ConsumerCheckpoint) throws(ConsumerError)
    /// The consumer's parked events, in position order.
    func parked(named name: String) throws(ConsumerError) -> [ParkedEvent]
    /// Replaces the consumer's parked events durably.
    func writeParked(_ events: [ParkedEvent], named name: String) throws(ConsumerError)
    /// The names of the consumers with a checkpoint or parked events, sorted.
    func names() throws(ConsumerError) -> [String]
    /// Takes the consumer's lock for as long as the result lives (`nil`: nothing to share).
    func lock(consumer name: String) throws(ConsumerError) -> ConsumerLock?
}

/// The consumers of an in-memory store: gone with the process, as its log is.
final class ConsumerMemory: ConsumerStorage {
    private struct State {
        var checkpoints: [String: ConsumerCheckpoint] = [:]
        var parked: [String: [ParkedEvent]] = [:]
    }
    private let state = Locked(State())

    func checkpoint(named name: String) -> ConsumerCheckpoint? { state.withLock { $0.checkpoints[name] } }
    func write(_ checkpoint: ConsumerCheckpoint) { state.withLock { $0.checkpoints[checkpoint.name] = checkpoint } }
    func parked(named name: String) -> [ParkedEvent] { state.withLock { $0.parked[name] ?? [] } }
    func writeParked(_ events: [ParkedEvent], named name: String) { state.withLock { $0.parked[name] = events } }
    func names() -> [String] { state.withLock { Set($0.checkpoints.keys).union($0.parked.keys).sorted() } }
    // Nothing outside this process can see an in-memory store.
    func lock(consumer name: String) -> ConsumerLock? { nil }
}
