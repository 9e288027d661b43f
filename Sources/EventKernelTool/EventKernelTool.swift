import ArgumentParser
import Foundation
import Logging

/// The `eventkernel` command: replay, audit, query, import and export an EventKernel store.
@main
struct EventKernelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "eventkernel",
        abstract: "Replay, audit, query, import and export an EventKernel store (activities and every other entity type).",
        discussion: """
            The store is the first argument, or --dir D (default: $EVENTKERNEL_STORE, else ./eventkernel-store); the \
            read-only commands (query, replay, history, streams, export, tail, verify, inspect) also take a postgres:// URL \
            (or --postgres URL) for a PostgreSQL log, and copy moves a store between the two. Commands that list \
            rows take --format table|json|jsonl|csv. --version prints the version and the build's package traits.
            Exit status: 0 ok, 1 usage or bad input, 2 store missing/not a store/locked, 3 damage found, 4 I/O failure, 130/143 import interrupted by SIGINT/SIGTERM (run it again to continue).
            See Docs/CLI.md.

            Examples:
              eventkernel demo demo --activities 50000
              eventkernel verify demo
              eventkernel query demo --type sleep --limit 5
            """,
        version: ToolVersion.text,
        subcommands: subcommands
    )

    private static var subcommands: [any ParsableCommand.Type] {
        var all: [any ParsableCommand.Type] = [
            DemoCommand.self, ImportCommand.self, ExportCommand.self, QueryCommand.self, ReplayCommand.self,
            HistoryCommand.self, StreamsCommand.self, VerifyCommand.self, InspectCommand.self, SnapshotCommand.self, RepairCommand.self,
            TailCommand.self, DeleteCommand.self, PurgeCommand.self, CompactCommand.self, ConsumersCommand.self, BackupCommand.self, BackupsCommand.self, RestoreCommand.self,
        ]
        #if PostgreSQL
        all.append(CopyCommand.self)
        #endif
        #if Viewer
        all.append(ServeCommand.self)
        #endif
        return all
    }

    static func main() async {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
            terminate(DeferredExit.value.rawValue)
        } catch let error as ToolError {
            Output.flush()
            Output.error(error.message)
            terminate(error.exit.rawValue)
        } catch {
            Output.flush()
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                terminate(0)
            }
            if let exitError = error as? ExitCode { terminate(exitError.rawValue) }
            let message = fullMessage(for: error)
            FileHandle.standardError.write(Data((message.hasPrefix("Error: ") ? "eventkernel: error: " + message.dropFirst(7) : message).utf8))
            FileHandle.standardError.write(Data("\n".utf8))
            terminate(ToolExit.badInput.rawValue)
        }
    }
}
