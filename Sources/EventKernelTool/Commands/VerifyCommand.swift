import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation
#if PostgreSQL
import PostgresLog
#endif

/// What `verify` found, shared with `demo`.
struct StoreCheck {
    struct Problem {
        var severity: String  // "damage" or "warning"
        var message: String
        var file: String?
        var offset: Int64?
        var position: UInt64?
        var json: [String: Any] {
            var o: [String: Any] = ["severity": severity, "message": message]
            if let file { o["file"] = file }
            if let offset { o["offset"] = offset }
            if let position { o["position"] = position }
            return o
        }
        var text: String {
            var where_: [String] = []
            if let file { where_.append("file \(file)") }
            if let offset { where_.append("offset \(offset)") }
            if let position { where_.append("position \(position)") }
            return "\(severity): \(message)" + (where_.isEmpty ? "" : " (\(where_.joined(separator: ", ")))")
        }
    }
    struct Snapshot {
        var file: String
        var bytes: Int64
        var projection: String?
        var nextPosition: UInt64?
        var schemaVersion: UInt16?
        var error: String?
    }

    var log: VerificationReport
    var snapshots: [Snapshot] = []
    var problems: [Problem] = []
    var activities: Int?

    var isIntact: Bool { !problems.contains { $0.severity == "damage" } }

    /// How many events after a `$purged` verify lists (a log an old build kept appending to
    /// could hold millions); past it, one more problem says that more follow.
    static let eventsAfterPurgeShown = 100

    static func run(_ directory: URL, checkProjection: Bool = true) throws -> StoreCheck {
        let report = try withToolErrorsSync(store: directory) { try SegmentedLog.verify(at: directory, acknowledgedElsewhere: StoreLocation.acknowledgedPositions(directory)) }
        var check = StoreCheck(log: report)
        for problem in report.problems {
            let e = problem.error
            check.problems.append(Problem(severity: problem.severity.rawValue, message: "\(e.code): \(e.message)", file: e.file, offset: e.offset, position: e.position))
        }
        check.snapshots = inspectSnapshots(directory, decodeState: true)
        for snapshot in check.snapshots where snapshot.error != nil {
            check.problems.append(Problem(severity: "damage", message: "snapshot: \(snapshot.error!) (a snapshot is a cache: delete the file, then run `eventkernel snapshot`)", file: snapshot.file, offset: nil, position: nil))
        }
        check.problems += checkConsumers(directory, logEnd: report.segments.last?.nextPosition ?? 0)
        if checkProjection && report.isIntact {
            do {
                let repository = try EventSourcedActivityRepository.openReadOnly(at: directory, logger: StoreLocation.logger)
                check.activities = repository.count
                for issue in repository.projection.integrityIssues {
                    check.problems.append(Problem(severity: "warning", message: "projection: \(issue.message)", file: nil, offset: nil, position: issue.position))
                }
                // Nothing may follow a `$purged` event in its stream: the store refuses it, so
                // one there was written by an older build or around the store.
                // One more than shown: says whether the list is whole, without a count pass.
                let afterPurge = try repository.store.eventsAfterPurge(limit: Self.eventsAfterPurgeShown + 1)
                for event in afterPurge.prefix(Self.eventsAfterPurgeShown) {
                    let purgedAt = repository.store.purgedStreams[event.stream].map { " at position \($0)" } ?? ""
                    check.problems.append(Problem(severity: "damage", message: "purge: \(event.eventType) (version \(event.entityVersion)) of \(event.stream) follows its $purged event\(purgedAt): a purged stream takes no event (written by a build before purges, or around the store)", file: nil, offset: nil, position: event.position))
                }
                if afterPurge.count > Self.eventsAfterPurgeShown {
                    check.problems.append(Problem(severity: "damage", message: "purge: the first \(Self.eventsAfterPurgeShown) events that follow their stream's $purged event are shown; more follow", file: nil, offset: nil, position: nil))
                }
            } catch {
                check.problems.append(Problem(severity: "damage", message: "the store does not load: \(ToolError.from(error).message)", file: nil, offset: nil, position: nil))
            }
        }
        return check
    }

    /// Each consumer's files in `<store>/consumers/`: a checkpoint or parked list that fails its
    /// checks is damage, and so is a checkpoint that does not fit the log (past its end, or
    /// committed after an event the log no longer holds at that position: the consumer refuses
    /// to deliver until reset); a file that is no consumer's is a warning.
    static func checkConsumers(_ directory: URL, logEnd: LogPosition) -> [Problem] {
        let consumers = ConsumerDirectory(storeDirectory: directory)
        var problems: [Problem] = []
        let names: [String]
        do { names = try consumers.names() } catch {
            return [Problem(severity: "damage", message: "consumers: \(error)", file: consumers.url.path, offset: nil, position: nil)]
        }
        // The anchors are read from the log when it opens; a log that does not is reported above.
        let log = names.isEmpty ? nil : try? SegmentedLog.openReadOnly(at: directory)
        for name in names {
            do {
                if let checkpoint = try consumers.checkpoint(named: name),
                   let problem = try log.map({ try checkpoint.bindingProblem(in: $0, end: logEnd) })
                       ?? (checkpoint.committed > logEnd ? ConsumerError.checkpointAheadOfLog(consumer: name, committed: checkpoint.committed, logEnd: logEnd) : nil) {
                    problems.append(Problem(severity: "damage", message: "consumer: \(problem)",
                                            file: consumers.url.appending(path: ConsumerFiles.checkpointFile(for: name)).path,
                                            offset: nil, position: checkpoint.committed))
                }
            } catch {
                problems.append(Problem(severity: "damage", message: "consumer \"\(name)\": \(error)", file: nil, offset: nil, position: nil))
            }
            do { _ = try consumers.parked(named: name) } catch {
                problems.append(Problem(severity: "damage", message: "consumer \"\(name)\": \(error)", file: nil, offset: nil, position: nil))
            }
        }
        for stranger in consumers.foreignFiles() {
            problems.append(Problem(severity: "warning", message: "consumers: a file that is no consumer's (a checkpoint is <name>.checkpoint, a parked list <name>.parked)",
                                    file: consumers.url.appending(path: stranger).path, offset: nil, position: nil))
        }
        return problems
    }

    /// Every file in `<store>/snapshots/`, decoded (checksums checked) and, for the activities
    /// projection, its state decoded too when `decodeState`.
    static func inspectSnapshots(_ directory: URL, decodeState: Bool) -> [Snapshot] {
        let folder = directory.appending(path: "snapshots")
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasSuffix(".snap") && !$0.hasPrefix(".") }.sorted()
        return names.compactMap { name -> Snapshot? in
            let path = folder.appending(path: name).path
            guard let data = FileManager.default.contents(atPath: path) else {
                // A running writer prunes old snapshots: one listed a moment ago may be gone,
                // which is no damage.
                if !FileManager.default.fileExists(atPath: path) { return nil }
                return Snapshot(file: path, bytes: 0, error: "unreadable")
            }
            var entry = Snapshot(file: path, bytes: Int64(data.count))
            do {
                let file = try SnapshotFile(decoding: Array(data))
                entry.projection = file.projectionName
                entry.nextPosition = file.nextPosition
                entry.schemaVersion = file.schemaVersion
                if decodeState && file.projectionName == "activities" {
                    let projection = ActivityProjection()
                    if file.schemaVersion == projection.schemaVersion {
                        try projection.restore(from: ProjectionSnapshot(bytes: file.body, nextPosition: file.nextPosition))
                    }
                }
            } catch {
                entry.error = "\(error)"
            }
            return entry
        }
    }
}

struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every batch's checksums, the segment indexes, the snapshots and the projection (read-only).",
        discussion: """
            Exit status 0 when intact (warnings allowed), 3 when damage is found. --format json prints the report as \
            one object; jsonl and csv list the findings (severity, message, file, offset, position), one row each.

            Examples:
              eventkernel verify demo
              eventkernel verify --dir demo --json
              eventkernel verify demo --format csv
            """)

    @OptionGroup var store: ReadableStoreOptions
    @OptionGroup var output: OutputOptions
    private var json: Bool { output.resolved == .json }

    /// The findings as rows, for --format jsonl and csv.
    static func findings(_ problems: [StoreCheck.Problem]) -> Listing {
        Listing(columns: [Column("severity"), Column("message"), Column("file"), Column("offset", right: true), Column("position", right: true)],
                rows: problems.map { p in
                    Listing.Row([.string(p.severity), .string(p.message), .optional(p.file), p.offset.map { .int($0) } ?? .null,
                                 p.position.map { .uint($0) } ?? .null])
                })
    }

    func run() async throws {
        if store.postgresURL != nil {
            #if PostgreSQL
            return try await verifyPostgres(try store.postgres()!)
            #else
            throw ToolError.withoutPostgreSQL
            #endif
        }
        try StoreLocation.requireStore(store.url)
        let check = try StoreCheck.run(store.url)
        let format = output.resolved
        if format == .jsonl || format == .csv {
            Output.print(Self.findings(check.problems), as: format)
        } else if json {
            print(Output.json([
                "directory": store.url.path, "intact": check.isIntact, "segments": check.log.segments.count,
                "batches": check.log.batches, "events": check.log.records,
                "snapshots": check.snapshots.map { s -> [String: Any] in
                    ["file": s.file, "ok": s.error == nil, "position": s.nextPosition.map { $0 as Any } ?? NSNull()]
                },
                "problems": check.problems.map(\.json),
            ] as [String: Any]))
        } else {
            print("verified \(store.url.path): \(check.log.segments.count) segments, \(Output.count(check.log.batches)) batches, \(Output.count(check.log.records)) events, \(check.snapshots.count) snapshots")
            for problem in check.problems { print(problem.text) }
            // `repair` mends only the log: sending a user there for a damaged snapshot or
            // consumer file sent them round in a loop (repair found nothing to do, verify still
            // failed).
            print(check.isIntact ? "intact"
                  : check.log.isIntact ? "DAMAGED: the log is intact; mend each file named above as its message says (`eventkernel repair` mends only the log)"
                  : "DAMAGED: run `eventkernel repair --yes` to cut the log at the first damage (removed bytes are kept under recovered/)")
        }
        if !check.isIntact { throw ExitCode(ToolExit.damage.rawValue) }
    }

    #if PostgreSQL
    /// A PostgreSQL log: every row read and checked (positions, decoding, the head), then the
    /// activities projection folded from it.
    private func verifyPostgres(_ configuration: PostgresLog.Configuration) async throws {
        let log: PostgresLog
        do { log = try await PostgresLog.open(configuration, logger: StoreLocation.logger) } catch { throw ToolError.from(error) }
        let report = try withToolErrorsSync { try log.verify() }
        var problems = report.problems.map { e in
            StoreCheck.Problem(severity: "damage", message: "\(e.code): \(e.message)", file: e.file, offset: e.offset, position: e.position)
        }
        var activities: Int?
        if report.isIntact {
            do {
                let repository = try EventSourcedActivityRepository(store: try EventStore(log: log, logger: StoreLocation.logger))
                activities = repository.count
                for issue in repository.projection.integrityIssues {
                    problems.append(StoreCheck.Problem(severity: "warning", message: "projection: \(issue.message)", file: nil, offset: nil, position: issue.position))
                }
            } catch {
                problems.append(StoreCheck.Problem(severity: "damage", message: "the store does not load: \(ToolError.from(error).message)", file: nil, offset: nil, position: nil))
            }
        }
        try? await log.close()
        let intact = !problems.contains { $0.severity == "damage" }
        let format = output.resolved
        if format == .jsonl || format == .csv {
            Output.print(Self.findings(problems), as: format)
        } else if json {
            print(Output.json([
                "postgres": configuration.description, "intact": intact, "events": report.records,
                "activities": activities.map { $0 as Any } ?? NSNull(), "problems": problems.map(\.json),
            ] as [String: Any]))
        } else {
            print("verified \(configuration.description): \(Output.count(report.records)) events\(activities.map { ", \(Output.count($0)) activities" } ?? "")")
            for problem in problems { print(problem.text) }
            print(intact ? "intact" : "DAMAGED: the rows named above do not make a gap-free log of events")
        }
        if !intact { throw ExitCode(ToolExit.damage.rawValue) }
    }
    #endif
}
