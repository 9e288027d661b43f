import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation
import Logging
#if PostgreSQL
import PostgresLog
#endif

/// `--dir D`: the store directory (default `$EVENTKERNEL_STORE`, else `./eventkernel-store`).
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("dir"), help: ArgumentHelp(
        "The store directory (default: $EVENTKERNEL_STORE, else ./eventkernel-store).", valueName: "D"))
    var directory: String?

    var url: URL {
        guard let directory else { return EventStore.defaultDirectory }
        return URL(filePath: directory, directoryHint: .isDirectory).standardizedFileURL
    }
}

/// The store a read-only command reads: `--dir D` (as ``StoreOptions``) or `--postgres URL`, a
/// PostgreSQL log (Docs/ScaleOut.md).
struct ReadableStoreOptions: ParsableArguments {
    @OptionGroup var local: StoreOptions
    @Option(name: .customLong("postgres"), help: ArgumentHelp(
        "Read the PostgreSQL log at URL (postgres://user@host:port/database?schema=S) instead of a directory.", valueName: "URL"))
    var postgresURL: String?

    func validate() throws {
        if postgresURL != nil && local.directory != nil { throw ValidationError("give --dir or --postgres, not both") }
    }

    #if PostgreSQL
    /// The PostgreSQL log, when `--postgres` was given.
    func postgres() throws -> PostgresLog.Configuration? {
        guard let postgresURL else { return nil }
        do { return try PostgresLog.Configuration(url: postgresURL) } catch { throw ToolError.from(error) }
    }
    #endif

    /// The directory (meaningful only without `--postgres`).
    var url: URL { local.url }

    /// What messages call the store: its directory, or the URL without its password.
    var name: String {
        #if PostgreSQL
        if let configuration = try? postgres() { return configuration.description }
        #endif
        return local.url.path
    }
}

extension ToolError {
    /// `--postgres` or `copy` in a build without the PostgreSQL trait.
    static let withoutPostgreSQL = ToolError(.badInput, "this eventkernel was built without PostgreSQL support (the PostgreSQL package trait)")
}

enum StoreLocation {
    static let logger: Logger = {
        var logger = Logger(label: "eventkernel")
        logger.logLevel = .warning
        return logger
    }()

    /// The pid in `<store>/LOCK`, if any.
    static func lockHolder(of directory: URL) -> Int? {
        guard let data = FileManager.default.contents(atPath: directory.appending(path: "LOCK").path) else { return nil }
        return Int(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Fails with exit status 2 unless `directory` holds a store (segment files).
    static func requireStore(_ directory: URL) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) else {
            throw ToolError(.storeUnavailable, "no store at \(directory.path): no such directory (pass --dir, set EVENTKERNEL_STORE, or create one with `eventkernel import` or `eventkernel demo`)")
        }
        guard isDirectory.boolValue else {
            throw ToolError(.storeUnavailable, "\(directory.path) is not a store: it is a file, not a directory")
        }
        guard SegmentedLog.isStore(at: directory) else {
            throw ToolError(.storeUnavailable, "\(directory.path) is not an eventkernel store: it has no eventkernel.store file and no segment files (<20 digits>.log)")
        }
    }

    static func openReadOnly(_ directory: URL) throws -> EventSourcedActivityRepository {
        try requireStore(directory)
        do { return try EventSourcedActivityRepository.openReadOnly(at: directory, logger: logger) }
        catch { throw ToolError.from(error, store: directory) }
    }

    /// Opens the store for reading: a directory beside its writer, or a PostgreSQL log beside
    /// the instances writing to it (replayed from the server: no snapshots).
    static func openReadOnly(_ store: ReadableStoreOptions) async throws -> EventSourcedActivityRepository {
        guard store.postgresURL != nil else {
            let repository = try openReadOnly(store.url)
            LogDamage.warnIfDamaged(store.url)
            return repository
        }
        #if PostgreSQL
        do {
            let events = try await EventStore.open(postgres: try store.postgres()!, snapshotsIn: nil, snapshotPolicy: .never, logger: logger)
            return try EventSourcedActivityRepository(store: events)
        } catch { throw ToolError.from(error) }
        #else
        throw ToolError.withoutPostgreSQL
        #endif
    }

    /// Opens the log alone, for reading: the segmented log read-only, or the PostgreSQL log.
    static func openLog(_ store: ReadableStoreOptions) async throws -> any SharedRecordLog {
        if store.postgresURL != nil {
            #if PostgreSQL
            do { return try await PostgresLog.open(try store.postgres()!, logger: logger) } catch { throw ToolError.from(error) }
            #else
            throw ToolError.withoutPostgreSQL
            #endif
        }
        try requireStore(store.url)
        return try withToolErrorsSync(store: store.url) { try SegmentedLog.openReadOnly(at: store.url) }
    }

    static func openWriter(
        _ directory: URL, create: Bool, configuration: EventSourcedActivityRepository.Configuration = .init()
    ) throws -> EventSourcedActivityRepository {
        if !create { try requireStore(directory) }
        do { return try EventSourcedActivityRepository.open(at: directory, configuration: configuration, logger: logger) }
        catch { throw ToolError.from(error, store: directory) }
    }

    /// Bytes of every regular file under `directory`.
    static func diskUsage(_ directory: URL, under sub: String? = nil) -> Int64 {
        let root = sub.map { directory.appending(path: $0) } ?? directory
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.fileSizeKey, .isRegularFileKey]) else { return 0 }
        var total: Int64 = 0
        for case let url as URL in walker {
            let values = try? url.resourceValues(forKeys: [.fileSizeKey, .isRegularFileKey])
            if values?.isRegularFile == true { total += Int64(values?.fileSize ?? 0) }
        }
        return total
    }
}

/// Runs a command body, turning any error into a ``ToolError``.
func withToolErrors<T>(store: URL? = nil, _ body: () async throws -> T) async throws -> T {
    do { return try await body() } catch { throw ToolError.from(error, store: store) }
}
