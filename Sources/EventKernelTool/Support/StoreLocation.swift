import Activities
import ArgumentParser
import EventKernel
import EventLog
import Foundation
import Logging

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
