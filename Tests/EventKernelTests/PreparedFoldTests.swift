import Foundation
import Testing
import EventLog
import EventKernel
import EventKernelTestSupport
import Synchronization

/// A projection's ``Projection/Prepared`` value reaches its `apply` with its own type, from a
/// commit, a shared log's fold and a long (pipelined) replay; a projection that did not prepare
/// the events (or got nothing) prepares them itself.
@Suite struct PreparedFoldTests {
    /// Prepares each commit as its positions, and counts the folds that got them.
    private final class Recorder: Projection {
        typealias Prepared = [LogPosition]
        let name: String
        let schemaVersion: UInt16 = 1
        private struct State { var next: LogPosition = 0; var withPrepared = 0; var without = 0; var events = 0 }
        private let state = Mutex(State())
        init(_ name: String) { self.name = name }

        var nextPosition: LogPosition { state.withLock { $0.next } }
        var foldsWithPrepared: Int { state.withLock { $0.withPrepared } }
        var foldsWithout: Int { state.withLock { $0.without } }
        var events: Int { state.withLock { $0.events } }

        func prepare(_ envelopes: [EventEnvelope]) -> [LogPosition]? { envelopes.map(\.position) }

        func apply(_ envelopes: [EventEnvelope]) { apply(envelopes, prepared: nil) }

        func apply(_ envelopes: [EventEnvelope], prepared: [LogPosition]?) {
            state.withLock { state in
                if let prepared {
                    // What this projection prepared, for exactly these events.
                    precondition(prepared == envelopes.map(\.position))
                    state.withPrepared += 1
                } else {
                    state.without += 1
                }
                for envelope in envelopes where envelope.position >= state.next {
                    state.events += 1
                    state.next = envelope.position + 1
                }
            }
        }

        func snapshotState() throws -> ProjectionSnapshot { ProjectionSnapshot(bytes: [], nextPosition: 0) }
        func restore(from snapshot: ProjectionSnapshot) throws {}
    }

    private static let codec = JSONEventCodec<Int>(eventType: "Ticked", entityType: "Tick", entityID: { .string(String($0)) })

    @Test func commitsHandEachProjectionItsOwnPreparedValue() async throws {
        let recorder = Recorder("recorder")
        let store = try EventStore(log: InMemoryLog(), projections: [recorder])
        for i in 0..<5 { try await store.append([try PendingEvent(i, codec: Self.codec)]) }
        #expect(recorder.foldsWithPrepared == 5 && recorder.foldsWithout == 0 && recorder.events == 5)
        // Registered late: caught up by a replay, then prepared at each commit like the rest.
        let late = Recorder("late")
        try store.register(late)
        try await store.append([try PendingEvent(5, codec: Self.codec), try PendingEvent(6, codec: Self.codec)])
        #expect(late.events == 7 && late.foldsWithPrepared == 1)
        #expect(recorder.events == 7 && recorder.foldsWithPrepared == 6)
    }

    @Test func aLongReplayPreparesOnItsReadingThread() async throws {
        let log = InMemoryLog()
        do {
            let store = try EventStore(log: log)
            let batch = try (0..<1_000).map { try PendingEvent($0, codec: Self.codec) }
            for _ in 0..<17 { try await store.append(batch) }  // past the pipelined replay's threshold
        }
        let recorder = Recorder("recorder")
        _ = try EventStore(log: log, projections: [recorder])
        #expect(recorder.events == 17_000)
        #expect(recorder.foldsWithPrepared > 0 && recorder.foldsWithout == 0)
    }
}
