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
            """,
        subcommands: [ListBackups.self],
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
                    .map { root.appending(path: $0, directoryHint: .isDirectory) }.filter(Self.isBackup)
            var entries: [Entry] = []
            for url in candidates {
                do {
                    // A backup running or cut short beside an earlier manifest: what read
                    // commands refuse is not listed as complete, whatever the manifest says.
                    switch BackupManifest.state(of: url) {
                    case .inProgress:
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
            if entries.contains(where: { $0.state != "complete" || $0.verified.hasPrefix("no") }) {
                throw ExitCode(ToolExit.damage.rawValue)
            }
        }
    }
}
