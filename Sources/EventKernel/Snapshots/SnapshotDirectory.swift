public import Foundation
public import EventLog
public import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// When the store writes projection snapshots.
public struct SnapshotPolicy: Hashable, Sendable {
    /// Write snapshots after this many committed events since the last ones (`nil`: never by count).
    ///
    /// A snapshot serializes a projection's whole state, so snapshotting at a fixed interval
    /// would make total snapshot work grow with the square of the log. The store therefore
    /// also waits until the events since the last snapshot are at least a quarter of the log
    /// (``growthFraction``): snapshot work stays linear in the log and startup replays at most
    /// about a fifth of it.
    public var everyEvents: Int?
    /// The events since the last snapshot must also be at least this fraction of the log.
    public var growthFraction: Double = 0.25
    /// Write snapshots when the store closes.
    public var onClose: Bool
    /// How many snapshots to keep per projection (at least 1).
    public var keep: Int

    /// Creates a policy.
    public init(everyEvents: Int? = 10_000, onClose: Bool = true, keep: Int = 2) {
        self.everyEvents = everyEvents
        self.onClose = onClose
        self.keep = max(1, keep)
    }

    /// Every 10,000 events (and a quarter of the log) and on close, keeping two.
    public static let `default` = SnapshotPolicy()
    /// Never write snapshots (existing ones are still read).
    public static let never = SnapshotPolicy(everyEvents: nil, onClose: false)
}

/// The `<store>/snapshots/` directory: atomic writes, newest-valid lookup, pruning.
///
/// Files are named `<20-digit next position>-<hex of the projection name>.snap` so that a
/// listing sorts by position and the name survives any character set.
public struct SnapshotDirectory: Sendable {
    /// The directory holding the snapshot files.
    public let url: URL
    private let logger: Logger

    /// Creates a handle for `<storeDirectory>/snapshots/` (created on first write).
    public init(storeDirectory: URL, logger: Logger = Logger(label: "EventKernel.Snapshots")) {
        self.url = storeDirectory.appendingPathComponent("snapshots", isDirectory: true)
        self.logger = logger
    }

    private static func suffix(for name: String) -> String {
        "-" + name.utf8.map { String(format: "%02x", $0) }.joined() + ".snap"
    }

    /// The snapshot files of a projection, oldest first.
    public func files(for projectionName: String) -> [URL] {
        let suffix = Self.suffix(for: projectionName)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return names.filter { $0.hasSuffix(suffix) && $0.count == 20 + suffix.count }
            .sorted()
            .map { url.appendingPathComponent($0) }
    }

    /// Writes a snapshot atomically: temporary file, fsync, rename, directory fsync. Then
    /// deletes all but the newest `keep` snapshots of that projection.
    /// - Throws: ``RepositoryError/storage(_:)`` when a file operation fails.
    public func write(_ snapshot: SnapshotFile, keep: Int) throws {
        let bytes = try snapshot.encoded()
        do { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) } catch {
            throw RepositoryError.storage(StorageFailure("cannot create the snapshot directory \(url.path)", cause: error))
        }
        let name = String(format: "%020llu", snapshot.nextPosition) + Self.suffix(for: snapshot.projectionName)
        let final = url.appendingPathComponent(name)
        let temp = url.appendingPathComponent(".\(name).\(UUID().uuidString).tmp")
        try Self.writeSynced(bytes, to: temp.path)
        guard rename(temp.path, final.path) == 0 else {
            let number = errno
            unlink(temp.path)
            throw RepositoryError.storage(StorageFailure("rename \(temp.path) -> \(final.path) failed", cause: POSIXErrorCode(rawValue: number).map { POSIXError($0) }))
        }
        try Self.syncDirectory(url.path)
        let all = files(for: snapshot.projectionName)
        for old in all.dropLast(max(1, keep)) { try? FileManager.default.removeItem(at: old) }
    }

    /// Deletes the temporary files (`.<name>.<uuid>.tmp`) that a writer killed in the middle of
    /// ``write(_:keep:)`` left behind. Only the store's writer (holding its lock) may call this:
    /// it alone writes snapshots, so at its open every temporary file is stale.
    /// - Returns: The number of files removed.
    @discardableResult
    public func removeStaleTemporaryFiles() -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        var removed = 0
        for name in names where name.hasPrefix(".") && name.hasSuffix(".tmp") {
            if unlink(url.appendingPathComponent(name).path) == 0 { removed += 1 }
        }
        if removed > 0 { logger.notice("removed stale temporary snapshot files", metadata: ["directory": "\(url.path)", "count": "\(removed)"]) }
        return removed
    }

    private static func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
        Glibc.write(fd, buffer, count)
        #else
        Darwin.write(fd, buffer, count)
        #endif
    }

    private static func writeSynced(_ bytes: [UInt8], to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw RepositoryError.storage(StorageFailure("open \(path) failed", cause: POSIXErrorCode(rawValue: errno).map { POSIXError($0) })) }
        defer { close(fd) }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { posixWrite(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0 {
                if errno == EINTR { continue }
                throw RepositoryError.storage(StorageFailure("write \(path) failed", cause: POSIXErrorCode(rawValue: errno).map { POSIXError($0) }))
            }
            written += n
        }
        guard fsync(fd) == 0 else { throw RepositoryError.storage(StorageFailure("fsync \(path) failed", cause: POSIXErrorCode(rawValue: errno).map { POSIXError($0) })) }
    }

    private static func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw RepositoryError.storage(StorageFailure("open directory \(path) failed", cause: POSIXErrorCode(rawValue: errno).map { POSIXError($0) })) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw RepositoryError.storage(StorageFailure("fsync directory \(path) failed", cause: POSIXErrorCode(rawValue: errno).map { POSIXError($0) })) }
    }

    /// The snapshots of a projection that verify and match `schemaVersion`, newest first,
    /// decoded one at a time as the sequence is walked. Files that are corrupt or outdated are
    /// logged and skipped; one that vanished (a writer pruned it meanwhile) is skipped silently.
    public func candidates(projectionName: String, schemaVersion: UInt16) -> some Sequence<(url: URL, file: SnapshotFile)> {
        files(for: projectionName).reversed().lazy.compactMap { url -> (url: URL, file: SnapshotFile)? in
            let bytes: [UInt8]
            do { bytes = Array(try Data(contentsOf: url)) } catch {
                if FileManager.default.fileExists(atPath: url.path) {
                    logger.warning("snapshot unreadable, ignored", metadata: ["file": "\(url.path)", "error": "\(error)"])
                }
                return nil
            }
            let snapshot: SnapshotFile
            do { snapshot = try SnapshotFile(decoding: bytes) } catch {
                logger.warning("snapshot corrupt, ignored", metadata: ["file": "\(url.path)", "error": "\(error)"])
                return nil
            }
            guard snapshot.projectionName == projectionName else {
                logger.warning("snapshot names another projection, ignored", metadata: ["file": "\(url.path)", "name": "\(snapshot.projectionName)"])
                return nil
            }
            guard snapshot.schemaVersion == schemaVersion else {
                logger.notice("snapshot has an outdated schema version, ignored",
                              metadata: ["file": "\(url.path)", "found": "\(snapshot.schemaVersion)", "expected": "\(schemaVersion)"])
                return nil
            }
            return (url, snapshot)
        }
    }

    /// The newest snapshot of a projection that verifies, matches `schemaVersion` and covers
    /// no more than `maxNextPosition`, whatever history it describes (the store judges that:
    /// Docs/Durability.md, "Derived state").
    /// - Returns: The snapshot, or `nil` when none qualifies.
    public func newestValid(
        projectionName: String, schemaVersion: UInt16, maxNextPosition: LogPosition = .max
    ) -> SnapshotFile? {
        candidates(projectionName: projectionName, schemaVersion: schemaVersion)
            .first { $0.file.nextPosition <= maxNextPosition }?.file
    }
}
