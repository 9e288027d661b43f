#if Viewer
import ArgumentParser
import EventKernelViewer
import EventLog
import Foundation
import Logging

/// `eventkernel serve`: the read-only web viewer (Docs/Auditing.md).
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve", abstract: "Browse a store in a web browser: overview, streams, entities as of a moment, events (read-only).",
        discussion: """
            Serves on 127.0.0.1 (this machine only) unless --host says otherwise; any other address needs --token T \
            (at least 16 characters), which every request must then carry: open the printed address with ?token=T once \
            (a cookie keeps it), or send Authorization: Bearer T. No request writes. The pages follow a live writer: \
            each reads what was appended since the last. Stop it with Ctrl-C.

            Examples:
              eventkernel serve demo
              eventkernel serve demo --port 9000
              eventkernel serve demo --host 0.0.0.0 --token "$(openssl rand -hex 16)"
              eventkernel serve postgres://app@db/events
            """)

    @OptionGroup var store: ReadableStoreOptions
    @Option(help: "The address to listen on (127.0.0.1: this machine only).")
    var host = "127.0.0.1"
    @Option(help: "The port to listen on (0: any free port; the address is printed).")
    var port = 8080
    @Option(help: ArgumentHelp("The bearer token every request must carry; required with a --host other than a loopback address.", valueName: "T"))
    var token: String?

    func run() async throws {
        let viewer = ViewerConfiguration(host: host, port: port, token: token)
        do { try viewer.validate() } catch { throw ToolError(.badInput, error.message) }
        let log = try await StoreLocation.openLog(store)
        var integrity = "checked as each record is read (a PostgreSQL log)"
        var directory: URL?
        if store.postgresURL == nil {
            directory = store.url
            integrity = "not checked yet"
        }
        let browser = StoreBrowser(log: log, directory: directory, name: store.name, integrity: integrity)
        await browser.check()
        do { try await browser.catchUp() } catch { throw ToolError(.io, error.description) }
        // Served all the same (an audit of a damaged store is what the viewer is for); said
        // here, as the overview says it. Not the read commands' "exit status 3": serve runs
        // until it is stopped.
        if let damage = await browser.damagedAt {
            Output.warning("the log is damaged: \(damage); the pages show the events before the first damaged batch, and the overview says where it is (`eventkernel verify` for details)")
        }
        var logger = Logger(label: "eventkernel.serve")
        logger.logLevel = .warning
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let application = try Viewer.application(browser: browser, configuration: viewer, logger: logger) { bound in
            Swift.print("serving \(store.name) at http://\(shownHost):\(bound)/\(token == nil ? "" : "?token=…") (read-only; Ctrl-C stops)")
            Output.flush()
        }
        // SIGTERM and Ctrl-C stop it gracefully, within seconds (Viewer.run); both exit 0.
        do { try await Viewer.run(application, logger: logger) } catch {
            guard let message = Viewer.listenFailure(error, configuration: viewer) else { throw error }
            throw ToolError(.io, message)
        }
    }
}
#endif
