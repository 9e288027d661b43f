import Foundation
import EventLog
import KernelPrimitives

extension EventStore {
    /// Records per chunk of a replay: projections fold (and prepare) a chunk at a time.
    static let replayChunk = 1_024

    /// Below this many records a replay runs on the calling thread alone (a snapshot's tail, a
    /// follower's refresh): a second thread would cost more than it saves.
    static let pipelinedReplayThreshold: LogPosition = 16_384

    /// Folds records `[start, end)` into projections, in chunks; `also` sees each chunk after
    /// the projections (a follower's subscribers).
    ///
    /// A long replay (an open without a snapshot) runs in two stages on two threads: a reading
    /// thread reads and checks the log, decodes envelopes and runs each projection's
    /// ``Projection/prepare(_:)`` (decoding payloads, upcasting, index keys), while the calling
    /// thread folds the chunks it hands over, in order. Both stages are about half of a replay
    /// (measured on `BenchProbe open`), so on two cores a replay takes about the time of one.
    /// At most ``replayQueueDepth`` chunks wait between them.
    /// - Throws: ``RepositoryError/storage(_:)`` when the log cannot be read or a record is not
    ///   an event (nothing after it is folded).
    static func replay(
        _ log: any RecordLog, into projections: [any Projection], from start: LogPosition, until end: LogPosition,
        also: ([EventEnvelope]) -> Void = { _ in }
    ) throws {
        guard start < end else { return }
        guard end - start >= pipelinedReplayThreshold else {
            try readChunks(log, from: start, until: end, prepare: nil) { chunk, _ in
                for projection in projections { projection.apply(chunk) }
                also(chunk)
                return true
            }
            return
        }
        let handoff = ReplayHandoff()
        let reader = Thread {
            do {
                try readChunks(log, from: start, until: end, prepare: projections) { chunk, prepared in
                    handoff.put(.chunk(chunk, prepared))
                }
                handoff.put(.end)
            } catch {
                handoff.put(.failed(error))
            }
        }
        reader.name = "EventKernel replay reader"
        reader.start()
        defer { handoff.cancel() }
        while true {
            switch handoff.take() {
            case .chunk(let chunk, let prepared):
                for (index, projection) in projections.enumerated() { prepared.fold(chunk, into: projection, at: index) }
                also(chunk)
            case .end:
                return
            case .failed(let error):
                throw error
            }
        }
    }

    /// Reads `[start, end)` as envelopes, a chunk at a time, preparing each chunk for
    /// `prepare` when given; `body` returns whether to go on.
    private static func readChunks(
        _ log: any RecordLog, from start: LogPosition, until end: LogPosition, prepare: [any Projection]?,
        _ body: ([EventEnvelope], [PreparedFold]) -> Bool
    ) throws {
        var chunk: [EventEnvelope] = []
        chunk.reserveCapacity(replayChunk)
        var strings = StringInterner()
        var going = true
        func hand() {
            going = body(chunk, prepare.map { PreparedFold.prepare($0, chunk) } ?? [])
            chunk = []
            chunk.reserveCapacity(replayChunk)
        }
        try readingRecords {
            try log.forEachRecord(from: start, through: end - 1) { view in
                chunk.append(try EventEnvelope(view, strings: &strings))
                if chunk.count == replayChunk { hand() }
                return going
            }
        }
        if going && !chunk.isEmpty { hand() }
    }

    /// How many prepared chunks may wait for the folding thread.
    static let replayQueueDepth = 4
}

/// The bounded queue between a replay's reading thread and its folding thread.
private final class ReplayHandoff: @unchecked Sendable {
    enum Item {
        case chunk([EventEnvelope], [PreparedFold])
        case end
        case failed(any Error)
    }

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var items: [Item] = []
    private var cancelled = false

    /// Queues an item, waiting while the queue is full; returns `false` once the folding side
    /// has stopped (the reader then stops too).
    @discardableResult
    func put(_ item: Item) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while items.count >= EventStore.replayQueueDepth && !cancelled { condition.wait() }
        guard !cancelled else { return false }
        items.append(item)
        condition.broadcast()
        return true
    }

    /// The next item, waiting for one.
    func take() -> Item {
        condition.lock()
        defer { condition.unlock() }
        while items.isEmpty { condition.wait() }
        let item = items.removeFirst()
        condition.broadcast()
        return item
    }

    /// The folding side stopped: wakes and stops the reader.
    func cancel() {
        condition.lock()
        cancelled = true
        items.removeAll()
        condition.broadcast()
        condition.unlock()
    }
}
