import ArgumentParser
import EventLog
import EventKernel
import Foundation
#if PostgreSQL
import PostgresLog
#endif

struct InspectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect", abstract: "Segments, totals, compression and snapshots of a store (read-only).",
        discussion: """
            --format json prints the whole report as one object; jsonl and csv list the segments (one row each).

            Examples:
              eventkernel inspect demo
              eventkernel inspect demo --json
              eventkernel inspect demo --format csv
            """)

    @OptionGroup var store: ReadableStoreOptions
    @OptionGroup var output: OutputOptions
    private var json: Bool { output.resolved == .json }

    func run() async throws {
        if store.postgresURL != nil {
            #if PostgreSQL
            return try await inspectPostgres(try store.postgres()!)
            #else
            throw ToolError.withoutPostgreSQL
            #endif
        }
        try StoreLocation.requireStore(store.url)
        let report = try withToolErrorsSync(store: store.url) { try SegmentedLog.verify(at: store.url, acknowledgedElsewhere: StoreLocation.acknowledgedPositions(store.url)) }
        let snapshots = StoreCheck.inspectSnapshots(store.url, decodeState: false)
        let disk = StoreLocation.diskUsage(store.url)
        let ratio = report.storedPayloadBytes > 0 ? Double(report.uncompressedPayloadBytes) / Double(report.storedPayloadBytes) : 1
        let first = report.segments.compactMap(\.minTimestamp).min()
        let last = report.segments.compactMap(\.maxTimestamp).max()
        let format = output.resolved
        // Damage is exit 3 wherever a command meets it: the totals below count only what the
        // check read before it, so exit 0 would pass them off as the store's.
        if !report.isIntact {
            DeferredExit.record(.damage)
            Output.warning("the log is damaged: the figures count what was read before the damage (`eventkernel verify` says where)")
        }
        if format == .jsonl || format == .csv {
            Output.print(Listing(columns: [
                Column("file"), Column("basePosition", right: true), Column("nextPosition", right: true), Column("batches", right: true),
                Column("events", right: true), Column("bytes", right: true), Column("sealed"),
            ], rows: report.segments.map { s in
                Listing.Row([.string((s.file as NSString).lastPathComponent), .uint(s.basePosition), .uint(s.nextPosition),
                             .int(Int64(s.batches)), .uint(s.records), .int(Int64(s.fileBytes)), .bool(s.sealed)])
            }), as: format)
            return
        }
        // The store's purged streams (`$purged` events): the version table holds them, so the
        // log is opened read-only under a store with no projection (the table alone, from its
        // snapshot plus the tail: no activity is decoded). A failure is reported, not hidden.
        // Only the table and json outputs print the count, so only they open the store (a
        // read-only open can replay the whole log); jsonl and csv returned above.
        var purged: Int?
        var compaction: (ready: Int, waiting: Int, forgotten: Int)?
        var purgedFailure: String?
        if report.isIntact {
            do {
                let events = try EventStore(log: try SegmentedLog.openReadOnly(at: store.url), directory: store.url, projections: [],
                                            snapshotPolicy: .never, logger: StoreLocation.logger)
                purged = events.purgedStreamCount
                compaction = events.compactionCandidates
                try await events.close()
            } catch {
                purgedFailure = ToolError.from(error, store: store.url).message
                Output.error("cannot count the purged streams: \(purgedFailure!)")
            }
        } else {
            purgedFailure = "the log is damaged"
        }
        if json {
            print(Output.json([
                "directory": store.url.path,
                "segments": report.segments.map { s -> [String: Any] in
                    ["file": (s.file as NSString).lastPathComponent, "basePosition": s.basePosition, "nextPosition": s.nextPosition,
                     "batches": s.batches, "events": s.records, "bytes": s.fileBytes, "sealed": s.sealed]
                },
                "totals": [
                    "segments": report.segments.count, "batches": report.batches, "events": report.records,
                    "bytesOnDisk": disk, "storedPayloadBytes": report.storedPayloadBytes,
                    "uncompressedPayloadBytes": report.uncompressedPayloadBytes, "compressionRatio": ratio,
                    "firstRecordedAt": first.map { ISODate.format($0) as Any } ?? NSNull(),
                    "lastRecordedAt": last.map { ISODate.format($0) as Any } ?? NSNull(),
                ] as [String: Any],
                "snapshots": snapshots.map { s -> [String: Any] in
                    ["file": (s.file as NSString).lastPathComponent, "bytes": s.bytes, "ok": s.error == nil,
                     "position": s.nextPosition.map { $0 as Any } ?? NSNull(), "projection": s.projection ?? NSNull()]
                },
                "intact": report.isIntact,
                "purgedStreams": purged.map { $0 as Any } ?? NSNull(),
                "compaction": compaction.map { ["forgotten": $0.forgotten, "ready": $0.ready, "waiting": $0.waiting] as Any } ?? NSNull(),
            ] as [String: Any]))
            return
        }
        print("Store \(store.url.path)\n")
        print(Output.table(["segment", ">first", ">batches", ">events", ">bytes", "sealed"], report.segments.map { s in
            [(s.file as NSString).lastPathComponent, String(s.basePosition), Output.count(s.batches), Output.count(s.records),
             Output.bytes(s.fileBytes), s.sealed ? "yes" : "no (active)"]
        }))
        print("")
        print(Output.keyValues([
            ("segments", String(report.segments.count)),
            ("batches", Output.count(report.batches)),
            ("events", Output.count(report.records)),
            ("bytes on disk", Output.bytes(disk)),
            ("payload", "\(Output.bytes(report.uncompressedPayloadBytes)) → \(Output.bytes(report.storedPayloadBytes)) stored"),
            ("compression ratio", String(format: "%.2f×", ratio)),
            ("recorded", first.map { "\(ISODate.format($0)) … \(ISODate.format(last ?? $0))" } ?? "(empty)"),
            ("integrity", report.isIntact ? "no damage found" : "DAMAGED (run `eventkernel verify`)"),
            ("purged streams", purged.map { count in
                guard count > 0, let compaction else { return Output.count(count) }
                return Output.count(count) + " (\(Output.count(compaction.forgotten)) compacted; `eventkernel compact` forgets \(Output.count(compaction.ready + compaction.waiting)))"
            } ?? "unknown (\(purgedFailure ?? "the store did not open"))"),
        ]))
        print("")
        if snapshots.isEmpty { print("no snapshots") } else {
            print(Output.table(["snapshot", ">position", ">bytes", "projection"], snapshots.map { s in
                [(s.file as NSString).lastPathComponent, s.nextPosition.map(String.init) ?? "?", Output.bytes(s.bytes),
                 s.error.map { "CORRUPT: \($0)" } ?? (s.projection ?? "?")]
            }))
        }
    }

    #if PostgreSQL
    private func inspectPostgres(_ configuration: PostgresLog.Configuration) async throws {
        let log: PostgresLog
        do { log = try await PostgresLog.open(configuration, logger: StoreLocation.logger) } catch { throw ToolError.from(error) }
        let stats = try withToolErrorsSync { try log.statistics() }
        try? await log.close()
        let ratio = stats.storedPayloadBytes > 0 ? Double(stats.uncompressedPayloadBytes) / Double(stats.storedPayloadBytes) : 1
        let format = output.resolved
        if format == .jsonl || format == .csv {
            // A PostgreSQL log has no segments: its rows are the event types.
            Output.print(Listing(columns: [Column("eventType"), Column("count", right: true)], rows: stats.eventTypes.map {
                Listing.Row([.string($0.name), .int(Int64($0.count))])
            }), as: format)
            return
        }
        if json {
            print(Output.json([
                "postgres": configuration.description, "logID": log.logID, "schemaVersion": stats.schemaVersion,
                "createdAt": stats.createdAt.map { $0 as Any } ?? NSNull(),
                "totals": [
                    "events": stats.events, "streams": stats.streams, "transactions": stats.transactions, "tableBytes": stats.tableBytes,
                    "storedPayloadBytes": stats.storedPayloadBytes, "uncompressedPayloadBytes": stats.uncompressedPayloadBytes,
                    "compressionRatio": ratio,
                    "firstRecordedAt": stats.firstRecordedAt.map { ISODate.format($0) as Any } ?? NSNull(),
                    "lastRecordedAt": stats.lastRecordedAt.map { ISODate.format($0) as Any } ?? NSNull(),
                ] as [String: Any],
                "eventTypes": Dictionary(uniqueKeysWithValues: stats.eventTypes.map { ($0.name, $0.count) }),
            ] as [String: Any]))
            return
        }
        print("PostgreSQL log \(configuration.description)\n")
        print(Output.keyValues([
            ("log id", log.logID),
            ("schema version", String(stats.schemaVersion)),
            ("created", stats.createdAt ?? "?"),
            ("events", Output.count(stats.events)),
            ("streams", Output.count(stats.streams)),
            ("append transactions", Output.count(stats.transactions)),
            ("table size", Output.bytes(stats.tableBytes)),
            ("payload", "\(Output.bytes(stats.uncompressedPayloadBytes)) → \(Output.bytes(stats.storedPayloadBytes)) stored"),
            ("compression ratio", String(format: "%.2f×", ratio)),
            ("recorded", stats.firstRecordedAt.map { "\(ISODate.format($0)) … \(ISODate.format(stats.lastRecordedAt ?? $0))" } ?? "(empty)"),
        ]))
        print("")
        print(Output.table(["event type", ">count"], stats.eventTypes.map { [$0.name, Output.count($0.count)] }))
    }
    #endif
}
