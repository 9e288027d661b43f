// Compiled with the PostgreSQL package trait (on by default; Package.swift).
#if PostgreSQL
import ArgumentParser
import EventKernel
import EventLog
import Foundation
import PostgresLog

struct CopyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Copy a store's log into an empty one: a directory to PostgreSQL and back, keeping positions, timestamps, streams and versions.",
        discussion: """
            SOURCE and DESTINATION are each a store directory or a postgres:// URL (Docs/ScaleOut.md). The source is read \
            as it is when the copy starts (a running writer may go on); the destination must be empty (a new directory, \
            or a schema holding no event). Snapshots are not copied: they are caches, rebuilt by the destination's first open. \
            Into a directory, the copy is written beside it (DESTINATION.restoring-XXXX), synced, and renamed into place \
            when whole, as `restore` does: a copy stopped midway leaves no DESTINATION, only that sibling to remove.

            Examples:
              eventkernel copy --from demo --to 'postgres://app@db/app?schema=activities'
              eventkernel copy --from 'postgres://app@db/app?schema=activities' --to /tmp/activities-back
            """)

    @Option(name: .customLong("from"), help: ArgumentHelp("The store to copy: a directory, or a postgres:// URL.", valueName: "SOURCE"))
    var source: String
    @Option(name: .customLong("to"), help: ArgumentHelp("An empty store to copy into: a directory, or a postgres:// URL.", valueName: "DESTINATION"))
    var destination: String
    @Option(help: ArgumentHelp("Records per write, at most (one transaction, or one batch of the local log), gathering whole atomic appends: an append holding more is written alone.", valueName: "N"))
    var batch: Int = 4_096

    func validate() throws {
        guard batch > 0 else { throw ValidationError("--batch must be positive") }
    }

    private static func isPostgres(_ location: String) -> Bool {
        location.hasPrefix("postgres://") || location.hasPrefix("postgresql://")
    }

    private static func name(_ location: String) -> String {
        guard isPostgres(location), let configuration = try? PostgresLog.Configuration(url: location) else { return location }
        return configuration.description
    }

    func run() async throws {
        let from: any RecordLog
        // The chunks a copy writes, each one batch (or one transaction) in the destination:
        // whole atomic appends only, so that the copy never holds half of one where the
        // source held it whole (a later restore at a point rounds down to those chunks).
        let chunks: [Range<LogPosition>]
        if Self.isPostgres(source) {
            let configuration = try withToolErrorsSync { try PostgresLog.Configuration(url: source) }
            let log: PostgresLog
            do { log = try await PostgresLog.open(configuration, logger: StoreLocation.logger) } catch { throw ToolError.from(error) }
            from = log
            do { chunks = try await log.batches(endingAtOrBefore: log.bounds.nextPosition, atMost: batch) } catch {
                try? await log.close()
                throw ToolError.from(error)
            }
        } else {
            let directory = URL(filePath: source, directoryHint: .isDirectory).standardizedFileURL
            try StoreLocation.requireStore(directory)
            let log = try withToolErrorsSync(store: directory) { try SegmentedLog.openReadOnly(at: directory) }
            from = log
            chunks = log.batches(endingAtOrBefore: log.bounds.nextPosition, atMost: batch)
        }
        let end = chunks.last?.upperBound ?? 0
        if Self.isPostgres(destination) {
            try await copy(from: from, in: chunks, toPostgres: destination)
        } else {
            // Into a directory, a copy is a restore of the whole log: one path (shared with
            // `restore` and with `EventStore.restore(fromPostgres:)`) that writes a sibling,
            // syncs it and renames it into place, so that a copy killed midway leaves no
            // directory that opens as a shorter store.
            let directory = URL(filePath: destination, directoryHint: .isDirectory).standardizedFileURL
            do {
                _ = try await EventStore.restore(records: from, in: chunks, requestedPosition: end, to: directory)
            } catch {
                try? await from.close()
                // Damage can only be the source's (the destination is new): say whose.
                if let logError = (error as? RepositoryError)?.logError, logError.code == .corruption {
                    throw ToolError(.damage, "\(Self.name(source)): \(logError.description); run `eventkernel verify` on it for details")
                }
                throw ToolError.from(error, store: directory)
            }
        }
        try await withToolErrors { try await from.close() }
        Output.note("copied \(Output.count(end)) events from \(Self.name(source)) to \(Self.name(destination)), positions 0..<\(end)")
    }

    /// Copies `chunks` of `from` into the empty schema `destination` names, one transaction a chunk.
    private func copy(from: any RecordLog, in chunks: [Range<LogPosition>], toPostgres destination: String) async throws {
        let configuration: PostgresLog.Configuration
        let log: PostgresLog
        do {
            configuration = try withToolErrorsSync { try PostgresLog.Configuration(url: destination) }
            do { log = try await PostgresLog.open(configuration, logger: StoreLocation.logger) } catch { throw ToolError.from(error) }
        } catch {
            try? await from.close()
            throw error
        }
        do {
            guard log.bounds.nextPosition == 0 else {
                throw ToolError(.badInput, "\(configuration.description) already holds \(Output.count(log.bounds.nextPosition)) events: copy into an empty schema")
            }
            for range in chunks {
                var chunk: [LogRecord] = []
                chunk.reserveCapacity(Int(range.count))
                try withToolErrorsSync {
                    try from.forEachRecord(from: range.lowerBound, through: range.upperBound - 1) { view in
                        chunk.append(view.copy())
                        return true
                    }
                }
                if chunk.count < range.count, let gap = try withToolErrorsSync({ try from.firstCompactedPosition(in: range) }) {
                    throw ToolError(.badInput, "\(Self.name(source)) was compacted (position \(gap) lies in a batch compaction rewrote): copy cannot recreate its gaps yet (Docs/Forgetting.md); nothing past position \(range.lowerBound) was copied")
                }
                guard chunk.count == range.count, chunk.first?.position == range.lowerBound else {
                    throw ToolError(.damage, "the source holds \(chunk.count) events at positions \(range), where its batches say \(range.count)")
                }
                try await withToolErrors { try await log.importRecords(chunk) }
            }
        } catch {
            try? await log.close()
            try? await from.close()
            throw error
        }
        try await withToolErrors { try await log.close() }
    }
}
#endif
