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
        let more = damage.count > 1 ? " (and \(damage.count - 1) more problem\(damage.count == 2 ? "" : "s"))" : ""
        Output.warning("the log is damaged: \(first.error)\(more); the answer is read around the damage (from the newest snapshot and intact batches) and is what they hold; run `eventkernel verify` for details, `eventkernel repair --yes` to cut the log at the damage (exit status 3)")
        DeferredExit.record(.damage)
    }
}
