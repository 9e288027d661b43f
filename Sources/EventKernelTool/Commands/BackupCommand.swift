import ArgumentParser
import EventKernel
import EventLog
import Foundation

struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Back up a live store into a directory: consistent at one position while writers go on; incremental.",
        discussion: """
            The backup holds the log up to the position it had when the backup began, the newest snapshots bound to it \
            and the store file; every batch is checked on the way, every file and every new directory entry synced, and the manifest \
            (eventkernel.backup) written last. The backup is itself a store: verify, query and export work on it. Into \
            a directory holding an earlier backup of the same store and history, only new or changed files are written; \
            another store's backup, or one from before a repair, is refused (exit 1) unless --restart --yes (--restart \
            alone is refused, exit 1: it rewrites the directory). A backup cut short \
            leaves no manifest, and the next backup into that directory writes every file again (Docs/Backups.md).

            With --follow the backup follows the live store: an incremental backup every LAG/2 seconds (--lag, default \
            5), each one complete (its manifest written last), so that the backup stays within about LAG of the store \
            while each round takes less than LAG/2. It goes on across the writer's restarts (the store is read, never \
            locked), and a follower killed and run again goes on as a normal incremental backup. SIGINT or SIGTERM \
            ends it after the round under way (exit 0); a round that fails ends it with that round's status, the \
            directory holding the previous round's complete backup. One line per round (--json: one JSON object per \
            line).

            Examples:
              eventkernel backup demo /backups/demo
              eventkernel backup --dir /var/lib/app/store --to /mnt/backups/store --link --json
              eventkernel backup /var/lib/app/store /mnt/backups/store --follow --lag 10
            """)

    @Argument(help: ArgumentHelp("The store directory (the same as --dir).", valueName: "STORE"))
    var storeArgument: String?
    @Argument(help: ArgumentHelp("The backup directory, created when missing (the same as --to).", valueName: "DEST"))
    var destinationArgument: String?
    @Option(name: .customLong("dir"), help: ArgumentHelp(
        "The store directory (default: $EVENTKERNEL_STORE, else ./eventkernel-store).", valueName: "D"))
    var dirOption: String?
    @Option(name: .customLong("to"), help: ArgumentHelp("The backup directory.", valueName: "DIR"))
    var toOption: String?
    @Flag(help: "Hard-link sealed segments instead of copying them, when the backup is on the same filesystem.")
    var link = false
    @Flag(help: "Start over in a directory holding another store's backup, another history's, or a damaged one (needs --yes).")
    var restart = false
    @Flag(help: "Confirm --restart: every file of the backup in DEST is written again, and its files the new one does not hold removed.")
    var yes = false
    @Flag(help: "Keep following the store: an incremental backup every LAG/2 seconds, until SIGINT or SIGTERM.")
    var follow = false
    @Option(help: ArgumentHelp("With --follow: the lag to stay within, in seconds (default 5; rounds start every LAG/2).", valueName: "LAG"))
    var lag: Double?
    @Flag(help: "Print the report as one JSON object (with --follow, one per round, one per line).")
    var json = false

    /// The positional arguments in order, then what is left for each: STORE DEST, or one of
    /// them given as --dir / --to and the other positional.
    private var resolved: (store: String?, destination: String?, conflict: String?) {
        var positional = [storeArgument, destinationArgument].compactMap { $0 }
        var store = dirOption, destination = toOption
        if positional.count == 2 || (store == nil && destination != nil) {
            let given = positional.removeFirst()
            if let store, Self.url(store) != Self.url(given) { return (nil, nil, "the store is given twice, differently: '\(given)' and --dir '\(store)'") }
            store = given
        }
        if let given = positional.first {
            if let destination, Self.url(destination) != Self.url(given) { return (nil, nil, "the backup directory is given twice, differently: '\(given)' and --to '\(destination)'") }
            destination = given
        }
        return (store, destination, nil)
    }

    private static func url(_ path: String) -> URL { URL(filePath: path, directoryHint: .isDirectory).standardizedFileURL }

    func validate() throws {
        let resolved = resolved
        if let conflict = resolved.conflict { throw ValidationError(conflict + "; give one") }
        guard resolved.destination != nil else { throw ValidationError("Missing the backup directory: eventkernel backup STORE DEST (or --to DIR)") }
        if let lag {
            guard follow else { throw ValidationError("--lag goes with --follow") }
            guard lag.isFinite, lag >= 0.1, lag <= 86_400 else { throw ValidationError("--lag \(lag): give seconds between 0.1 and 86400") }
        }
        if follow && restart { throw ValidationError("--restart cannot --follow: start over once (backup --restart --yes), then follow") }
    }

    func run() async throws {
        let source = resolved.store.map(Self.url) ?? EventStore.defaultDirectory
        let destination = Self.url(resolved.destination!)
        try StoreLocation.requireStore(source)
        guard !restart || yes else {
            throw ToolError(.badInput, "backup --restart rewrites the backup in \(destination.path): every file written again, and the files of the backup there that the new one does not hold removed (another store's or another history's backup is lost). Run `eventkernel backups list \(destination.path)` to see what it holds, then `eventkernel backup --restart --yes` to proceed")
        }
        guard follow else {
            let started = ContinuousClock.now
            let report = try await withToolErrors(store: source) {
                try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(link: link, restart: restart))
            }
            for warning in report.warnings { Output.warning(warning) }
            print(describe(report, destination: destination, source: source, seconds: (ContinuousClock.now - started) / .seconds(1), compact: false))
            return
        }
        try await followStore(source, to: destination)
    }

    /// How many rounds in a row `--follow` skips for a held lock or an I/O failure before it
    /// ends with that failure's status.
    static let skippedRoundsLimit = 5

    /// `--follow`: rounds of incremental backups until a signal; each round complete before the
    /// next starts, so a stop (or a kill) between or during rounds leaves a complete backup.
    private func followStore(_ source: URL, to destination: URL) async throws {
        let interval = Duration.seconds(lag ?? 5) / 2
        let interruption = Interruption()
        defer { interruption.stop() }
        var round = 0, skipped = 0
        var previousStart: ContinuousClock.Instant?
        while interruption.caught == nil {
            let started = ContinuousClock.now
            let startedAt = Date.now
            round += 1
            // A round is one ordinary incremental backup: it reads the store as it is now (the
            // writer may have closed and reopened it since the last), and it finishes even when
            // a signal comes meanwhile (its manifest is the clean boundary).
            let report: BackupReport
            do {
                report = try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(link: link))
                skipped = 0
            } catch {
                // The directory's lock held a moment too long (a `backups list` descheduled
                // while probing it, a prune), or a transient I/O failure: the round is skipped
                // (it left the previous backup) and the next one tries again; only a run of
                // them ends the follow.
                let code = (error as? LogError)?.code ?? (error as? RepositoryError)?.logError?.code
                guard code == .locked || code == .io, skipped < Self.skippedRoundsLimit, interruption.caught == nil else {
                    throw ToolError.from(error, store: source)
                }
                skipped += 1
                Output.note("round \(round) skipped (\(skipped) in a row; the follow ends after \(Self.skippedRoundsLimit)): \(error)")
                let next = started + interval
                while interruption.caught == nil && ContinuousClock.now < next {
                    try? await Task.sleep(for: min(.milliseconds(50), next - ContinuousClock.now))
                }
                continue
            }
            let ended = ContinuousClock.now
            let seconds = (ended - started) / .seconds(1)
            // Until this round's manifest, the newest complete backup was the previous one's,
            // holding what was acknowledged before it started: the most the backup lagged.
            let lagSeconds = (ended - (previousStart ?? started)) / .seconds(1)
            previousStart = started
            print(describe(report, destination: destination, source: source, seconds: seconds, compact: true, round: (round, startedAt, lagSeconds)))
            if lagSeconds > lag ?? 5 {
                Output.note("round \(round): the backup lagged the store by up to \(Output.seconds(lagSeconds)), more than --lag \(Output.seconds(lag ?? 5)) (rounds take \(Output.seconds(seconds)))")
            }
            Output.flush()
            // The next round starts `interval` after this one started (at once when this one took
            // longer): an event appended now is in a backup within about twice the interval.
            let next = started + interval
            while interruption.caught == nil && ContinuousClock.now < next {
                try? await Task.sleep(for: min(.milliseconds(50), next - ContinuousClock.now))
            }
        }
        if let name = interruption.report?.name {
            Output.note("\(name): stopped following after \(round) rounds; \(destination.path) holds a complete backup")
        }
    }

    /// One backup's report: a key-value table, or JSON (one line with `compact`).
    private func describe(_ report: BackupReport, destination: URL, source: URL, seconds: Double, compact: Bool, round: (number: Int, started: Date, lagSeconds: Double)? = nil) -> String {
        let manifest = report.manifest
        if json {
            var object: [String: Any] = [
                "store": source.path, "backup": destination.path, "position": manifest.nextPosition,
                "historyEpoch": manifest.historyEpoch, "incremental": report.incremental,
                "files": manifest.files.count, "bytes": manifest.totalBytes,
                "copiedFiles": report.copiedFiles, "copiedBytes": report.copiedBytes, "linkedFiles": report.linkedFiles,
                "unchangedFiles": report.unchangedFiles.count, "removedFiles": report.removedFiles, "seconds": seconds,
            ]
            if let round {
                object["round"] = round.number
                // When the round took its plan's start (Unix time): what it holds is everything
                // acknowledged before then, so a monitor can bound the backup's lag by it.
                object["started"] = round.started.timeIntervalSince1970
                object["lagSeconds"] = round.lagSeconds
            }
            guard compact else { return Output.json(object) }
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("null".utf8)
            return String(decoding: data, as: UTF8.self)
        }
        if let round {
            return "round \(round.number): position \(Output.count(manifest.nextPosition)), \(report.incremental ? "incremental" : "full"), "
                + "written \(report.copiedFiles.count) files (\(Output.bytes(report.copiedBytes))), \(Output.seconds(seconds))"
        }
        return Output.keyValues([
            ("backup", destination.path),
            ("position", Output.count(manifest.nextPosition)),
            ("kind", report.incremental ? "incremental" : "full"),
            ("files", "\(manifest.files.count) (\(Output.bytes(manifest.totalBytes)))"),
            ("written", "\(report.copiedFiles.count) files (\(Output.bytes(report.copiedBytes)))"),
            ("linked", "\(report.linkedFiles.count) files"),
            ("unchanged", "\(report.unchangedFiles.count) files"),
            ("time", Output.seconds(seconds)),
        ])
    }
}
