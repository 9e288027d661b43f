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
            and the store file; every batch is checked on the way, every file and directory synced, and the manifest \
            (eventkernel.backup) written last. The backup is itself a store: verify, query and export work on it. Into \
            a directory holding an earlier backup of the same store and history, only new or changed files are written; \
            another store's backup, or one from before a repair, is refused (exit 1) unless --restart --yes (--restart \
            alone is refused, exit 1: it rewrites the directory). A backup cut short \
            leaves no manifest, and the next backup into that directory writes every file again (Docs/Backups.md).

            Examples:
              eventkernel backup demo /backups/demo
              eventkernel backup --dir /var/lib/app/store --to /mnt/backups/store --link --json
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
    @Flag(help: "Print the report as one JSON object.")
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
    }

    func run() async throws {
        let source = resolved.store.map(Self.url) ?? EventStore.defaultDirectory
        let destination = Self.url(resolved.destination!)
        try StoreLocation.requireStore(source)
        guard !restart || yes else {
            throw ToolError(.badInput, "backup --restart rewrites the backup in \(destination.path): every file written again, and the files of the backup there that the new one does not hold removed (another store's or another history's backup is lost). Run `eventkernel backups list \(destination.path)` to see what it holds, then `eventkernel backup --restart --yes` to proceed")
        }
        let started = ContinuousClock.now
        let report = try await withToolErrors(store: source) {
            try await EventStore.backup(storeAt: source, to: destination, options: BackupOptions(link: link, restart: restart))
        }
        let seconds = (ContinuousClock.now - started) / .seconds(1)
        let manifest = report.manifest
        if json {
            print(Output.json([
                "store": source.path, "backup": destination.path, "position": manifest.nextPosition,
                "historyEpoch": manifest.historyEpoch, "incremental": report.incremental,
                "files": manifest.files.count, "bytes": manifest.totalBytes,
                "copiedFiles": report.copiedFiles, "copiedBytes": report.copiedBytes, "linkedFiles": report.linkedFiles,
                "unchangedFiles": report.unchangedFiles.count, "removedFiles": report.removedFiles, "seconds": seconds,
            ]))
        } else {
            print(Output.keyValues([
                ("backup", destination.path),
                ("position", Output.count(manifest.nextPosition)),
                ("kind", report.incremental ? "incremental" : "full"),
                ("files", "\(manifest.files.count) (\(Output.bytes(manifest.totalBytes)))"),
                ("written", "\(report.copiedFiles.count) files (\(Output.bytes(report.copiedBytes)))"),
                ("linked", "\(report.linkedFiles.count) files"),
                ("unchanged", "\(report.unchangedFiles.count) files"),
                ("time", Output.seconds(seconds)),
            ]))
        }
    }
}
