public import EventKernel
import Synchronization

/// A flag one task sets and another reads (a consumer taken, a handler reached).
public final class TestFlag: Sendable {
    private let value = Mutex(false)
    public init() {}
    /// Sets it.
    public func set() { value.withLock { $0 = true } }
    /// Whether it was set.
    public var isSet: Bool { value.withLock { $0 } }
}

/// A count one task adds to and another reads (events a handler saw).
public final class TestCounter: Sendable {
    private let count = Mutex(0)
    public init() {}
    /// Adds `n`.
    public func add(_ n: Int) { count.withLock { $0 += n } }
    /// The count so far.
    public var value: Int { count.withLock { $0 } }
}

/// Appends `count` events, each to a stream of its own (`Counted/e<i>`, numbered on from
/// `first`), in batches of at most 10: events whose only use is their positions.
public func appendDistinctEvents(_ store: EventStore, _ count: Int, first: Int = 0) async throws {
    var done = 0
    while done < count {
        let n = min(10, count - done)
        try await store.append((0..<n).map { i in
            PendingEvent(EncodedEvent(eventType: "Counted", schemaVersion: 1,
                                      stream: StreamID("Counted", .string("e\(first + done + i)")), payload: [1]))
        })
        done += n
    }
}
