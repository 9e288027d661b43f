public import EventKernel
public import Foundation

/// The snapshot-determinism workload (issue 28, item 5): a store whose snapshots hold every
/// structure whose iteration order Swift seeds per process: an entity's `Dictionary` and
/// `Set` properties (the binary entity coder), deleted entities (a repository's snapshot),
/// string-id streams of a type no repository keeps (the version table), and a JSON projection
/// whose state is a dictionary. The parent writes the events; child processes open copies of
/// the log and close them, and their snapshot bytes must be identical.
public enum SnapshotDeterminism {
    /// An entity with unordered properties.
    public struct Tagged: Identifiable, Codable, Sendable, Equatable {
        public var id: String
        public var counts: [String: Int]
        public var labels: Set<String>
        public var byNumber: [Int: String]

        /// Creates an entity.
        public init(id: String, counts: [String: Int], labels: Set<String>, byNumber: [Int: String]) {
            self.id = id
            self.counts = counts
            self.labels = labels
            self.byNumber = byNumber
        }
    }

    /// Opens the workload's store at `directory`: a `Tagged` repository and a `tally` JSON
    /// projection.
    /// - Throws: What opening the store throws.
    public static func open(at directory: URL, snapshotPolicy: SnapshotPolicy) throws -> (EventStore, EventSourcedRepository<Tagged>) {
        let store = try EventStore.open(at: directory, snapshotPolicy: snapshotPolicy)
        try store.register(ProjectedState<[String: Int]>(name: "tally", schemaVersion: 1, initial: [:]) { state, envelope in
            state[envelope.entityID.description, default: 0] += 1
        })
        let repository = try EventSourcedRepository<Tagged>(store: store, typeName: "Tagged")
        return (store, repository)
    }

    /// Writes the workload's events.
    /// - Throws: What the writes throw.
    public static func write(_ store: EventStore, _ repository: EventSourcedRepository<Tagged>) async throws {
        for i in 0..<40 {
            let keys = (0..<12).map { "k\(($0 * 7 + i) % 23)" }
            try await repository.add(Tagged(
                id: "t\(i)", counts: Dictionary(keys.map { ($0, i) }, uniquingKeysWith: +),
                labels: Set(keys.prefix(9)), byNumber: Dictionary(uniqueKeysWithValues: (0..<10).map { ($0 * 13 + i, "n\($0)") })))
        }
        for i in stride(from: 0, to: 40, by: 3) { _ = try await repository.delete(id: "t\(i)") }
        try await store.append((0..<60).map { i in
            PendingEvent(EncodedEvent(eventType: "Counted", schemaVersion: 1, stream: StreamID("Counted", .string("c\(i)")), payload: [1]))
        })
    }
}
