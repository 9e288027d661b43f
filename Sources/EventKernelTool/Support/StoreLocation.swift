import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation
import Logging
#if PostgreSQL
import PostgresLog
#endif

/// What a command takes besides its store: nothing (`verify [STORE]`), or one operand after it
/// (`import [STORE] FILE`, `history [STORE] ID`).
protocol StoreOperandLayout {
    /// The operand's name in help and messages (`FILE.jsonl`), or `nil` when the command takes none.
    static var operandName: String? { get }
    /// The operand's help.
    static var operandHelp: String { get }
    /// Whether the operand may be left out (`streams [STORE] [TYPE]`): then a single positional
    /// argument is the store, unless `--dir` (or `--postgres`) gives the store (then it is the operand).
    static var operandIsOptional: Bool { get }
    /// Whether an entity type may come before the operand (`history [STORE] [TYPE] ID`): with
    /// `--dir` (or `--postgres`), two positional arguments are the type and the operand; without it, the store and
    /// the operand (the command takes a third positional argument for STORE TYPE ID).
    static var takesTypeBeforeOperand: Bool { get }
}

extension StoreOperandLayout {
    static var operandIsOptional: Bool { false }
    static var takesTypeBeforeOperand: Bool { false }
}

/// A command whose only positional argument is the store.
enum NoOperand: StoreOperandLayout {
    static var operandName: String? { nil }
    static var operandHelp: String { "" }
}

/// The store, as the first positional argument (`eventkernel verify demo`, as sqlite3 takes its
/// database) or as `--dir D`, and the command's own operand, if it has one.
///
/// One rule for every command: with an operand, a single positional argument is the operand
/// (`import FILE` keeps working) and two are the store then the operand (`import STORE FILE`).
/// The store given both ways, differently, is a usage error. Neither given: `$EVENTKERNEL_STORE`,
/// else `./eventkernel-store`.
struct StoreArguments<Layout: StoreOperandLayout>: ParsableArguments {
    @Argument(help: ArgumentHelp("The store directory (the same as --dir).", valueName: "STORE"))
    var first: String?
    @Argument(help: ArgumentHelp(Layout.operandHelp, valueName: Layout.operandName ?? "OPERAND",
                                 visibility: Layout.operandName == nil ? .private : .default))
    var second: String?
    @Option(name: .customLong("dir"), help: ArgumentHelp(
        "The store directory (default: $EVENTKERNEL_STORE, else ./eventkernel-store).", valueName: "D"))
    var dirOption: String?

    /// Whether the first positional argument is the store, when an option gives the store
    /// (`storeOption`: `--dir`, or `--postgres` for the read commands) or none does.
    func firstIsStore(storeOption: Bool) -> Bool {
        if Layout.takesTypeBeforeOperand && storeOption { return false }
        return Layout.operandName == nil || second != nil || (Layout.operandIsOptional && !storeOption)
    }

    private var firstIsStore: Bool { firstIsStore(storeOption: dirOption != nil) }

    /// The entity type before the operand (`history --dir D TYPE ID`), when the layout takes one.
    func leadingType(storeOption: Bool) -> String? {
        Layout.takesTypeBeforeOperand && !firstIsStore(storeOption: storeOption) && second != nil ? first : nil
    }

    /// The store given as a positional argument, if any.
    func positionalStore(storeOption: Bool) -> String? { firstIsStore(storeOption: storeOption) ? first : nil }
    var positionalStore: String? { positionalStore(storeOption: dirOption != nil) }

    /// The command's operand (`nil` for a command that takes none, or an optional one left out).
    func operand(storeOption: Bool) -> String? {
        Layout.operandName == nil ? nil : firstIsStore(storeOption: storeOption) ? second : second ?? first
    }
    var operand: String? { operand(storeOption: dirOption != nil) }

    /// The store directory given, either way (`nil`: the default).
    var directory: String? { positionalStore ?? dirOption }

    func validate() throws {
        if let name = Layout.operandName {
            guard operand != nil || Layout.operandIsOptional else { throw ValidationError("Missing expected argument '\(name)'") }
        } else if let second {
            throw ValidationError("Unexpected argument '\(second)': the store is the only positional argument")
        }
        if let positional = positionalStore, let dirOption, Self.standardized(positional) != Self.standardized(dirOption) {
            throw ValidationError("the store is given twice, differently: '\(positional)' and --dir '\(dirOption)'; give one")
        }
    }

    private static func standardized(_ path: String) -> URL {
        URL(filePath: path, directoryHint: .isDirectory).standardizedFileURL
    }

    var url: URL { url(storeOption: dirOption != nil) }

    /// The store directory, when `storeOption` says whether an option gives the store (with
    /// `--postgres`, a read command's first argument is a type, never a directory).
    func url(storeOption: Bool) -> URL {
        guard let directory = positionalStore(storeOption: storeOption) ?? dirOption else { return EventStore.defaultDirectory }
        return Self.standardized(directory)
    }
}

/// The store of a command that takes nothing else.
typealias StoreOptions = StoreArguments<NoOperand>

/// The store a read-only command reads: a directory (as ``StoreArguments``) or a PostgreSQL log,
/// `--postgres URL` or a `postgres://` URL as the store argument (Docs/ScaleOut.md).
struct ReadableStoreArguments<Layout: StoreOperandLayout>: ParsableArguments {
    @OptionGroup var local: StoreArguments<Layout>
    @Option(name: .customLong("postgres"), help: ArgumentHelp(
        "Read the PostgreSQL log at URL (postgres://user@host:port/database?schema=S) instead of a directory.", valueName: "URL"))
    var postgresOption: String?

    /// Whether an option gives the store (`--dir` or `--postgres`): the positional arguments
    /// are then the operands (see ``StoreOperandLayout``).
    private var storeOption: Bool { local.dirOption != nil || postgresOption != nil }

    /// The PostgreSQL URL, given as `--postgres` or as the store argument.
    var postgresURL: String? {
        if let postgresOption { return postgresOption }
        if let positional = local.positionalStore(storeOption: storeOption), positional.hasPrefix("postgres://") || positional.hasPrefix("postgresql://") {
            return positional
        }
        return nil
    }

    func validate() throws {
        if postgresOption != nil && (local.positionalStore(storeOption: storeOption) ?? local.dirOption) != nil {
            throw ValidationError("give a store directory or --postgres, not both")
        }
        if postgresURL != nil && local.dirOption != nil { throw ValidationError("give --dir or a postgres:// URL, not both") }
    }

    /// The command's operand (see ``StoreArguments/operand``).
    var operand: String? { local.operand(storeOption: storeOption) }

    /// The entity type before the operand (`history --dir D TYPE ID`), when the layout takes one.
    var leadingType: String? { local.leadingType(storeOption: storeOption) }

    #if PostgreSQL
    /// The PostgreSQL log, when one was given.
    func postgres() throws -> PostgresLog.Configuration? {
        guard let postgresURL else { return nil }
        do { return try PostgresLog.Configuration(url: postgresURL) } catch { throw ToolError.from(error) }
    }
    #endif

    /// The directory (meaningful only without a PostgreSQL log; with one, never an operand
    /// such as `history --postgres URL TYPE ID`'s type).
    var url: URL { local.url(storeOption: storeOption) }

    /// What messages call the store: its directory, or the URL without its password.
    var name: String {
        #if PostgreSQL
        if let configuration = try? postgres() { return configuration.description }
        #endif
        return local.url.path
    }
}

/// The store of a read-only command that takes nothing else.
typealias ReadableStoreOptions = ReadableStoreArguments<NoOperand>

extension ToolError {
    /// `--postgres` or `copy` in a build without the PostgreSQL trait.
    static let withoutPostgreSQL = ToolError(.badInput, "this eventkernel was built without PostgreSQL support (the PostgreSQL package trait)")
}

enum StoreLocation {
    /// What the store's snapshots say the log acknowledged: `verify` and the read commands' damage
    /// check hold the log's tail to it, as a writer's open does (Docs/Durability.md).
    static func acknowledgedPositions(_ directory: URL) -> [AcknowledgedPosition] {
        SnapshotDirectory(storeDirectory: directory).acknowledgedPositions()
    }

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
            // With EVENTKERNEL_STORE set, "set EVENTKERNEL_STORE" is no advice: the store was
            // taken from an argument (`streams Account` reads Account as the store).
            if let environment = ProcessInfo.processInfo.environment["EVENTKERNEL_STORE"], !environment.isEmpty,
               URL(filePath: environment).standardizedFileURL.path != directory.standardizedFileURL.path {
                throw ToolError(.storeUnavailable, "no store at \(directory.path): no such directory. EVENTKERNEL_STORE (\(environment)) is used only when no store is given, and the first argument named one: give the store first (`eventkernel streams \(environment) TYPE`) or as --dir")
            }
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
    static func openReadOnly<Layout>(_ store: ReadableStoreArguments<Layout>) async throws -> EventSourcedActivityRepository {
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

    /// Opens the log alone, for reading: the segmented log read-only, or the PostgreSQL log,
    /// which must exist and is opened as it is (its schema neither created nor migrated: a
    /// read-only command must not leave a log older builds refuse, nor make an empty one
    /// for a mistyped schema) unless `preparingSchema` (a command that writes, as a store does).
    static func openLog<Layout>(_ store: ReadableStoreArguments<Layout>, preparingSchema: Bool = false) async throws -> any SharedRecordLog {
        if store.postgresURL != nil {
            #if PostgreSQL
            do {
                var configuration = try store.postgres()!
                configuration.preparesSchema = preparingSchema
                return try await PostgresLog.open(configuration, logger: logger)
            } catch { throw ToolError.from(error) }
            #else
            throw ToolError.withoutPostgreSQL
            #endif
        }
        try requireStore(store.url)
        return try withToolErrorsSync(store: store.url) { try SegmentedLog.openReadOnly(at: store.url) }
    }

    /// Refuses a backup directory to a command that writes into a store (`import`, `demo`,
    /// `delete`, `purge`, `compact`, `snapshot`, `repair`, a consumer's commit): every command
    /// that writes into a directory calls this first, so the rule lives here. A backup is a store
    /// for reading (its manifest lists every file's size and CRC32C), and any write (an append, a
    /// snapshot, a checkpoint, a cut) makes it no longer match its manifest: it would stop being
    /// a backup that restores. A backup cut short (its partial marker) is refused by the log itself.
    /// - Throws: ``ToolError`` with status 1 naming the directory, and saying to restore it first.
    static func refuseBackup(_ directory: URL, command: String) throws {
        guard FileManager.default.fileExists(atPath: directory.appending(path: BackupManifest.fileName).path) else { return }
        throw ToolError(.badInput, "\(directory.path) is a backup (it holds \(BackupManifest.fileName)), not a store to write into: \(command) would change its files, and it would no longer match its manifest nor restore. Read commands (verify, query, export, history) work on it as it is; to write, restore it first: `eventkernel restore \(directory.path) NEW_DIR`, then `eventkernel \(command)` on NEW_DIR")
    }

    /// Opens the store for writing (a directory's writer), refusing a backup directory
    /// (``refuseBackup(_:command:)``).
    static func openWriter(
        _ directory: URL, command: String, create: Bool, configuration: EventStore.Configuration = .init()
    ) throws -> EventSourcedActivityRepository {
        try refuseBackup(directory, command: command)
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
