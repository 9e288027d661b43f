import EventKernel
import EventLog
import Foundation
import Synchronization

/// The exit status of a command that printed its answer but found damage on the way: the
/// answer stands (it comes from checksummed state), and the status tells scripts the store
/// needs attention. `main` ends with it.
enum DeferredExit {
    private static let status = Mutex<ToolExit?>(nil)

    /// Records `exit` (the more serious status wins when two are recorded).
    static func record(_ exit: ToolExit) {
        status.withLock { current in
            if current.map({ $0.rawValue < exit.rawValue }) ?? true { current = exit }
        }
    }

    /// The status to end with: the recorded one, else 0.
    static var value: ToolExit { status.withLock { $0 } ?? .ok }
}

/// The read commands' check of the log under a snapshot: a store opens from its newest
/// snapshot and reads only the log after it, so a damaged batch before it would go unseen and
/// the answer would come with exit 0.
enum LogDamage {
    /// Reads every batch of the log (headers, payload checksums, structure: every flipped bit,
    /// without decompressing; `verify` also decompresses) with the rule a writer's open applies
    /// to what the snapshots cover, and, when a batch is damaged, warns on stderr with the
    /// first damage's file, offset and position and records exit status 3 (Docs/CLI.md,
    /// "Exit status").
    /// - Parameter directory: A store directory that has been opened for reading.
    static func warnIfDamaged(_ directory: URL) {
        let report: VerificationReport
        do {
            report = try SegmentedLog.verify(at: directory, acknowledgedElsewhere: StoreLocation.acknowledgedPositions(directory),
                                             decodingRecords: false)
        } catch {
            let failure = ToolError.from(error, store: directory)
            Output.warning("the log of \(directory.path) could not be checked: \(failure.message)")
            DeferredExit.record(failure.exit == .damage ? .damage : .io)
            return
        }
        let damage = report.problems.filter { $0.severity == .damage }
        guard let first = damage.first else { return }
        found.withLock { $0 = first.error }
        let more = damage.count > 1 ? " (and \(damage.count - 1) more problem\(damage.count == 2 ? "" : "s"))" : ""
        Output.warning("the log is damaged: \(first.error)\(more); the answer is read around the damage (from the newest snapshot and intact batches) and is what they hold; run `eventkernel verify` for details, `eventkernel repair --yes` to cut the log at the damage (exit status 3)")
        DeferredExit.record(.damage)
    }

    /// The first damage ``warnIfDamaged(_:)`` found, kept for the reads that scan the log from
    /// its start (history, streams, `replay --as-of`): they read up to it, not into it.
    private static let found = Mutex<LogError?>(nil)

    /// The first damaged batch, when the check found one and knows where it starts: a scan from
    /// the log's start reads the events before `position` (none when it is 0). `nil`: no damage
    /// found (or none checked: a PostgreSQL log), or no position known, when a scan reads the
    /// whole log and meets the damage as an error, as before.
    static var first: (error: LogError, position: LogPosition)? {
        found.withLock { error in error.flatMap { e in e.position.map { (e, $0) } } }
    }

    /// The last position a scan from the log's start reads: before the first damaged batch
    /// (`.some(nil)`: no event is before it), else the end (`nil`).
    static var intactEnd: LogPosition?? {
        first.map { $0.position == 0 ? nil : $0.position - 1 }
    }

    /// Calls `body` with each event from the log's start up to the first damaged batch (every
    /// event when none is known): the one scan of the read commands that answer from the events
    /// before the damage. `body` returns `true` to go on.
    /// - Returns: The damage the scan stopped before (`nil`: it read to the end of the log).
    /// - Throws: ``ToolError``: what reading the log throws (damage the check did not place).
    @discardableResult
    static func forEachIntactEnvelope(_ events: EventStore, store: URL, _ body: (consuming EventEnvelope) throws -> Bool) throws -> (error: LogError, position: LogPosition)? {
        let damage = first
        try readIntact(store: store, nothing: ()) { end in try events.forEachEnvelope(from: 0, through: end, body) }
        return damage
    }

    /// Runs `read` with the last position a scan from the log's start may read (`nil`: the
    /// end; ``intactEnd``), or returns `nothing` when no event is before the damage: the one
    /// place that turns the first damage into a scan's bound.
    /// - Throws: ``ToolError``: what `read` throws, mapped.
    static func readIntact<T>(store: URL, nothing: T, _ read: (LogPosition?) throws -> T) throws -> T {
        switch intactEnd {
        case .none: try withToolErrorsSync(store: store) { try read(nil) }
        case .some(.none): nothing
        case .some(.some(let end)): try withToolErrorsSync(store: store) { try read(end) }
        }
    }

    /// The damage as the error of a question only the damaged batch can answer (exit 3):
    /// `question` says which, and why it needs the batch.
    static func error(_ damage: (error: LogError, position: LogPosition), _ question: String, store: URL) -> ToolError {
        ToolError(.damage, "\(question): \(ToolError.from(damage.error, store: store).message)")
    }

    /// Warns that the answer `what` is of the events before the damage alone, and what may be
    /// missing from it (`missing`); the check's warning has said where the damage is, and the
    /// status is 3.
    static func warnPartial(_ what: String, missing: String, _ damage: (error: LogError, position: LogPosition)) {
        let read = damage.position == 0 ? "none" : "positions 0…\(damage.position - 1)"
        Output.warning("\(what): read from the events before the damaged batch alone (\(read)); the damaged batch at position \(damage.position) and the log after it are not read, so \(missing)")
        DeferredExit.record(.damage)
    }

    /// `--as-of`'s cut of the log (the rule of `EventStore.lastPosition(recordedAtOrBefore:)`)
    /// on a log that may be damaged. The prefix recorded at or before `limit` is known when it
    /// ends before the damaged batch: an intact event before the batch was recorded after
    /// `limit`, or the batch's own header (checksummed apart from its payload) says its first
    /// recording is after it. Otherwise the prefix may go on into the damaged batch, which only
    /// that batch can say: the damage is the error (exit 3), as before.
    /// - Parameter question: The option as typed (`--as-of 2026-01-01`), for the error.
    /// - Throws: ``ToolError``: the damage, when the answer needs the damaged batch; what
    ///   reading the log throws.
    static func lastPosition(_ events: EventStore, recordedAtOrBefore limit: LogTimestamp, question: String, store: URL) throws -> LogPosition? {
        guard let damage = first else {
            return try withToolErrorsSync(store: store) { try events.lastPosition(recordedAtOrBefore: limit) }
        }
        let found = damage.position == 0 ? nil : try withToolErrorsSync(store: store) {
            try EventStore.lastPosition(in: events.log, recordedAtOrBefore: limit, through: damage.position - 1)
        }
        // The prefix ended inside the intact part: an event before the damage was recorded after `limit`.
        if damage.position > 0, found.map({ $0 < damage.position - 1 }) ?? true { return found }
        // Or it ends where the damaged batch begins, whose every event was recorded after `limit`.
        if let recorded = SegmentedLog.firstRecordingTime(ofDamagedBatch: damage.error), limit < recorded { return found }
        throw error(damage, "\(question): every event before the damaged batch was recorded at or before it, and events of that batch may be too, so the state then needs the batch", store: store)
    }
}
