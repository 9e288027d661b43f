import ArgumentParser
import EventKernel
import EventLog
import Foundation

struct BackupsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backups",
        abstract: "List backups: position, time, bytes, and whether each verifies against its manifest.",
        discussion: """
            DIR is a backup directory, or a directory whose subdirectories are backups (generations). A backup being \
            written now is "in progress"; one cut short (no manifest, or its marker beside an earlier manifest) is \
            "incomplete": the next backup into it completes it. Verifying reads every file and compares its size and CRC32C \
            with the manifest (--no-verify skips it). Exit 0 when every backup listed is complete and verifies, 3 \
            otherwise.

            Examples:
              eventkernel backups list /mnt/backups/store
              eventkernel backups list /mnt/backups --format json
              eventkernel backups prune /mnt/backups --keep 7 --max-age 30d --yes
            """,
        subcommands: [ListBackups.self, PruneBackups.self],
        defaultSubcommand: ListBackups.self)

    struct ListBackups: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "Each backup: directory, state, position, time, files, bytes, verified (the default).",
            discussion: """
                Examples:
                  eventkernel backups list /mnt/backups/store --no-verify
                """)

        @Argument(help: ArgumentHelp("A backup directory, or a directory of backups.", valueName: "DIR"))
        var directory: String
        @Flag(name: .customLong("no-verify"), help: "List the manifests only, without reading the files.")
        var noVerify = false
        @OptionGroup var output: OutputOptions

        /// One listed backup.
        struct Entry {
            var directory: String
            var manifest: BackupManifest?
            var state: String  // complete, in progress, incomplete, damaged
            var verified: String  // yes, no (the problem), skipped
        }

        /// The earlier manifest of a directory a backup round is writing into, when its files
        /// check and it is still the manifest after the check (a round only appends past the
        /// listed sizes and adds files until it renames its own manifest; a round that renamed
        /// it or withdrew it meanwhile is seen, and the check tried again); `nil` otherwise.
        static func verifiedDuringARound(_ url: URL) -> BackupManifest? {
            for _ in 0..<3 {
                guard let before = try? BackupManifest.read(in: url) else { return nil }
                let checked = (try? BackupManifest.check(in: url)) != nil
                guard let after = try? BackupManifest.read(in: url) else { return nil }
                if after == before {
                    let state = BackupManifest.state(of: url)
                    guard checked, state == .inProgress || state == .complete else { return nil }
                    return after
                }
            }
            return nil
        }

        static func isBackup(_ url: URL) -> Bool {
            FileManager.default.fileExists(atPath: url.appending(path: BackupManifest.fileName).path)
                || FileManager.default.fileExists(atPath: url.appending(path: BackupManifest.partialFileName).path)
        }

        func run() async throws {
            let root = URL(filePath: directory, directoryHint: .isDirectory).standardizedFileURL
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root.path, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw ToolError(.storeUnavailable, "no directory at \(root.path)")
            }
            let candidates: [URL] = Self.isBackup(root) ? [root]
                : ((try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []).sorted()
                    .filter { !BackupManifest.isRemovalLeftover($0) }
                    .map { root.appending(path: $0, directoryHint: .isDirectory) }.filter(Self.isBackup)
            var entries: [Entry] = []
            for url in candidates {
                do {
                    // A backup running or cut short beside an earlier manifest: what read
                    // commands refuse is not listed as complete, whatever the manifest says.
                    switch BackupManifest.state(of: url) {
                    case .inProgress:
                        if !noVerify, let manifest = Self.verifiedDuringARound(url) {
                            entries.append(Entry(directory: url.path, manifest: manifest, state: "complete (round in progress)", verified: "yes"))
                            continue
                        }
                        entries.append(Entry(directory: url.path, manifest: try BackupManifest.read(in: url), state: "in progress",
                                             verified: "no: a backup is writing into it now (it holds the directory's LOCK)"))
                        continue
                    case .interrupted:
                        entries.append(Entry(directory: url.path, manifest: try BackupManifest.read(in: url), state: "incomplete",
                                             verified: "no: a backup into it was interrupted; the next backup completes it"))
                        continue
                    case .complete, .notABackup: break
                    }
                    guard let manifest = try BackupManifest.read(in: url) else {
                        entries.append(Entry(directory: url.path, manifest: nil, state: "incomplete", verified: "no: no manifest (a backup cut short)"))
                        continue
                    }
                    if noVerify {
                        entries.append(Entry(directory: url.path, manifest: manifest, state: "complete", verified: "skipped"))
                    } else {
                        do {
                            _ = try BackupManifest.check(in: url)
                            entries.append(Entry(directory: url.path, manifest: manifest, state: "complete", verified: "yes"))
                        } catch {
                            entries.append(Entry(directory: url.path, manifest: manifest, state: "damaged", verified: "no: \(error)"))
                        }
                    }
                } catch {
                    entries.append(Entry(directory: url.path, manifest: nil, state: "damaged", verified: "no: \(error)"))
                }
            }
            let listing = Listing(
                columns: [Column("directory"), Column("state"), Column("position", right: true), Column("createdAt"),
                          Column("files", right: true), Column("bytes", right: true), Column("verified")],
                rows: entries.map { entry in
                    Listing.Row([.string(entry.directory), .string(entry.state),
                                 entry.manifest.map { .uint($0.nextPosition) } ?? .null, .optional(entry.manifest?.createdAt),
                                 entry.manifest.map { .int(Int64($0.files.count)) } ?? .null,
                                 entry.manifest.map { .int($0.totalBytes) } ?? .null, .string(entry.verified)])
                })
            if entries.isEmpty && output.resolved == .table {
                Output.note("no backup in \(root.path)")
            } else {
                Output.print(listing, as: output.resolved)
            }
            if entries.contains(where: { !$0.state.hasPrefix("complete") || $0.verified.hasPrefix("no") }) {
                throw ExitCode(ToolExit.damage.rawValue)
            }
        }
    }

    struct PruneBackups: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "prune", abstract: "Remove the oldest generations of a directory of backups: keep N, and/or those younger than an age (needs --yes).",
            discussion: """
                DIR holds generations: each subdirectory one backup (eventkernel backup STORE DIR/<name>). Complete \
                generations whose files verify are grouped by store and ordered by history epoch, then position \
                (createdAt and name break ties), newest first. One is kept when it is among the newest N of its \
                store (--keep N) or younger than --max-age (s, min, h, d or w, above zero: 30d, 90min); with both, \
                either keeps it. Each store's newest is always kept. A generation that is not complete (in \
                progress, cut short, a damaged manifest), that does not verify, dated in the future, or a symbolic \
                link, and every entry that is not a backup, are left alone. \
                A removal renames the generation out of the way first (.<name>.removing-...; killed midway, the \
                next prune finishes it, and the hidden .<name>.restarting-... of a backup --restart cut short once \
                no backup holds <name>). Without --yes nothing is removed: exit 1 (--dry-run: the plan, exit 0).

                Examples:
                  eventkernel backups prune /mnt/backups --keep 7 --dry-run
                  eventkernel backups prune /mnt/backups --keep 7 --max-age 30d --yes
                """)

        @Argument(help: ArgumentHelp("A directory of backups (generations).", valueName: "DIR"))
        var directory: String
        @Option(help: ArgumentHelp("Keep the newest N complete generations (at least 1).", valueName: "N"))
        var keep: Int?
        @Option(name: .customLong("max-age"), help: ArgumentHelp("Keep the generations younger than this (30d, 12h, 90min, 2w).", valueName: "AGE"))
        var maxAge: String?
        @Flag(name: .customLong("dry-run"), help: "Print what would be removed; remove nothing.")
        var dryRun = false
        @Flag(help: "Confirm: remove the generations the rules do not keep.")
        var yes = false
        @OptionGroup var output: OutputOptions

        func validate() throws {
            guard keep != nil || maxAge != nil else { throw ValidationError("give --keep N, --max-age AGE, or both") }
            if let keep, keep < 1 { throw ValidationError("--keep \(keep): keep at least 1") }
            if let maxAge, Self.seconds(maxAge) == nil { throw ValidationError("--max-age '\(maxAge)': a number above zero and a unit, s, min, h, d or w (30d, 90min)") }
            if dryRun && yes { throw ValidationError("give one of --dry-run or --yes") }
        }

        /// Seconds of an age such as `30d`; `nil` when it does not parse.
        /// `m` alone is refused: it reads as months as easily as minutes (`min` is minutes). An
        /// age of zero is refused: it would keep nothing by age.
        static func seconds(_ text: String) -> Double? {
            let units: [(String, Double)] = [("min", 60), ("s", 1), ("h", 3_600), ("d", 86_400), ("w", 604_800)]
            guard let (suffix, unit) = units.first(where: { text.hasSuffix($0.0) }),
                  let number = Double(text.dropLast(suffix.count)), number.isFinite, number > 0 else { return nil }
            return number * unit
        }

        /// One generation and what the rules decide for it.
        struct Decision {
            var name: String
            var manifest: BackupManifest?
            var action: String  // keep, remove, removed, left alone
            var reason: String
        }

        func run() async throws {
            let root = URL(filePath: directory, directoryHint: .isDirectory).standardizedFileURL
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root.path, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw ToolError(.storeUnavailable, "no directory at \(root.path)")
            }
            guard BackupManifest.state(of: root) == .notABackup else {
                throw ToolError(.badInput, "\(root.path) is itself a backup, not a directory of generations: give the directory that holds the generations")
            }
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? [])
                .filter { !BackupManifest.isRemovalLeftover($0) }.sorted()
            var complete: [(name: String, manifest: BackupManifest, created: Date?)] = []
            var decisions: [Decision] = []
            let now = Date.now
            for name in names {
                let url = root.appending(path: name, directoryHint: .isDirectory)
                // A link to a directory elsewhere: a rename would move the link and a removal
                // delete only it, reporting bytes removed that stay.
                var st = stat()
                if lstat(url.path, &st) == 0, (st.st_mode & S_IFMT) == S_IFLNK {
                    if BackupManifest.state(of: url) != .notABackup {
                        decisions.append(Decision(name: name, manifest: nil, action: "left alone", reason: "a symbolic link: prune removes only generations that are directories here"))
                    }
                    continue
                }
                let state = BackupManifest.state(of: url)
                guard state != .notABackup else { continue }
                let manifest = try? BackupManifest.read(in: url)
                guard state == .complete, let manifest else {
                    let why = state == .inProgress ? "a backup is writing into it" : state == .interrupted ? "a backup into it was cut short" : "its manifest does not decode"
                    decisions.append(Decision(name: name, manifest: manifest, action: "left alone", reason: "not complete: \(why)"))
                    continue
                }
                // Only a generation whose files check counts: a damaged newest one must not
                // make the good older ones go.
                do { _ = try BackupManifest.check(in: url) } catch {
                    decisions.append(Decision(name: name, manifest: manifest, action: "left alone", reason: "damaged, not counted: \(error)"))
                    continue
                }
                let created = try? Date(manifest.createdAt, strategy: .iso8601)
                if let created, created.timeIntervalSince(now) > 300 {
                    // A clock that was wrong when it was written: its age says nothing, and
                    // ordering by it would call it the newest.
                    decisions.append(Decision(name: name, manifest: manifest, action: "left alone", reason: "its createdAt is in the future (a skewed clock): judge it yourself"))
                    Output.note("\(url.path): createdAt \(manifest.createdAt) is in the future; left alone")
                    continue
                }
                complete.append((name, manifest, created))
            }
            // Per store (two stores' generations in one directory are two sets), newest first by
            // what they hold: the history epoch, then the position; the time only breaks ties.
            let stores = Dictionary(grouping: complete) { $0.manifest.storeIdentity ?? "" }
            let limit = maxAge.flatMap(Self.seconds)
            for identity in stores.keys.sorted() {
                let generations = stores[identity]!.sorted {
                    ($0.manifest.historyEpoch, $0.manifest.nextPosition, $0.manifest.createdAt, $0.name)
                        > ($1.manifest.historyEpoch, $1.manifest.nextPosition, $1.manifest.createdAt, $1.name)
                }
                for (index, generation) in generations.enumerated() {
                    var reasons: [String] = []
                    if index == 0 { reasons.append("the newest complete generation\(stores.count > 1 ? " of its store" : "")") }
                    if let keep, index < keep { reasons.append("among the newest \(keep)") }
                    if let limit {
                        if let created = generation.created {
                            if now.timeIntervalSince(created) <= limit { reasons.append("younger than \(maxAge!)") }
                        } else {
                            // No time to judge by: never removed by age.
                            reasons.append("its createdAt does not parse")
                        }
                    }
                    decisions.append(Decision(name: generation.name, manifest: generation.manifest,
                                              action: reasons.isEmpty ? "remove" : "keep",
                                              reason: reasons.isEmpty ? "older than the rules keep" : reasons.joined(separator: "; ")))
                }
            }
            let doomed = decisions.filter { $0.action == "remove" }
            if !dryRun && !yes && !doomed.isEmpty {
                throw ToolError(.badInput, "prune removes \(doomed.count) backup generation(s) of \(root.path): \(doomed.map(\.name).joined(separator: ", ")). Run `eventkernel backups prune --dry-run` to see the plan, then again with --yes to proceed")
            }
            var failure: (any Error)?
            if yes {
                let leftovers = (try? BackupManifest.removeLeftovers(in: root)) ?? []
                if !leftovers.isEmpty { Output.note("finished \(leftovers.count) removal(s) cut short: \(leftovers.joined(separator: ", "))") }
                for index in decisions.indices where decisions[index].action == "remove" {
                    do {
                        try BackupManifest.removeBackup(at: root.appending(path: decisions[index].name, directoryHint: .isDirectory),
                                                        expecting: decisions[index].manifest)
                        decisions[index].action = "removed"
                    } catch {
                        decisions[index].action = "left alone"
                        decisions[index].reason = "\(error)"
                        failure = failure ?? error
                    }
                }
            }
            let listing = Listing(
                columns: [Column("directory"), Column("action"), Column("createdAt"), Column("position", right: true),
                          Column("bytes", right: true), Column("reason")],
                rows: decisions.map { decision in
                    Listing.Row([.string(root.appending(path: decision.name).path), .string(decision.action),
                                 .optional(decision.manifest?.createdAt), decision.manifest.map { .uint($0.nextPosition) } ?? .null,
                                 decision.manifest.map { .int($0.totalBytes) } ?? .null, .string(decision.reason)])
                })
            if decisions.isEmpty && output.resolved == .table {
                Output.note("no backup in \(root.path)")
            } else {
                Output.print(listing, as: output.resolved)
            }
            if let failure { throw ToolError.from(failure, store: root) }
        }
    }
}
