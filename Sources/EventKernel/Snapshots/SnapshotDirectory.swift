package import Foundation
package import EventLog
package import Logging
import KernelPrimitives
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
    /// How many snapshots to keep per projection (at least 1). Default 1.
    ///
    /// An older snapshot is only a fallback for a newest one that is damaged or outdated, and
    /// the log is the fallback for every snapshot: a store that finds no usable snapshot
    /// replays its log from the start, with the same answers, only slower. So one generation
    /// is kept by default, which halves the space snapshots take; keep 2 where a slow open
    /// after damage to a snapshot costs more than that space.
    public var keep: Int

    /// Creates a policy.
    public init(everyEvents: Int? = 10_000, onClose: Bool = true, keep: Int = 1) {
        self.everyEvents = everyEvents
        self.onClose = onClose
        self.keep = max(1, keep)
    }

    /// Every 10,000 events (and a quarter of the log) and on close, keeping one.
    public static let `default` = SnapshotPolicy()
    /// Never write snapshots (existing ones are still read).
    public static let never = SnapshotPolicy(everyEvents: nil, onClose: false)
}

/// The `<store>/snapshots/` directory: atomic writes, newest-valid lookup, pruning.
///
/// Files are named `<20-digit next position>-<hex of the projection name>.snap` so that a
/// listing sorts by position and the name survives any character set (a name past 64 bytes as
/// its first 56 and a hash of the whole: `suffix(for:)`).
package struct SnapshotDirectory: Sendable {
    /// The directory holding the snapshot files.
    package let url: URL
    private let logger: Logger
    private let fileIO: any LogFileIO

    /// Creates a handle for `<storeDirectory>/snapshots/` (created on first write).
    /// - Parameters:
    ///   - storeDirectory: The store directory.
    ///   - logger: Receives notices about ignored snapshots.
    ///   - fileIO: The system-call layer for writes and syncs: the store passes its log's, so
    ///     that fault injection reaches snapshot writes as it reaches the log's.
    package init(storeDirectory: URL, logger: Logger = Logger(label: "EventKernel.Snapshots"),
                fileIO: any LogFileIO = PosixFileIO()) {
        self.url = storeDirectory.appendingPathComponent("snapshots", isDirectory: true)
        self.logger = logger
        self.fileIO = fileIO
    }

    /// The longest projection name (in UTF-8 bytes) whose file names spell it whole.
    static let longestSpelledName = 64
    /// How much of a longer name its file names spell before the hash of the whole name.
    static let spelledPrefix = 56

    /// `-<H>.snap`: `H` the name's UTF-8 in hex, or for a name longer than
    /// ``longestSpelledName`` bytes the hex of its first ``spelledPrefix`` bytes and then the
    /// 16 hex digits of the FNV-1a 64-bit hash of all of it. A file name holds 255 bytes and a
    /// write's temporary name adds 43 to it: spelled whole, a name past 93 bytes could never
    /// be written. The header holds the whole name, and a file whose header names another
    /// projection is never used (``candidates(projectionName:schemaVersion:)``).
    private static func suffix(for name: String) -> String {
        let bytes = Array(name.utf8)
        guard bytes.count > longestSpelledName else { return "-" + hex(bytes) + ".snap" }
        return "-" + hex(bytes.prefix(spelledPrefix)) + String(format: "%016llx", FNV1a64.hash(bytes)) + ".snap"
    }

    private static func hex(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// The snapshot files of a projection, oldest first. For a long name, also those spelled
    /// whole that a store written before the hashed form may hold (names up to 93 bytes fit).
    package func files(for projectionName: String) -> [URL] {
        var suffixes = [Self.suffix(for: projectionName)]
        if projectionName.utf8.count > Self.longestSpelledName { suffixes.append("-" + Self.hex(projectionName.utf8) + ".snap") }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return names.filter { name in suffixes.contains { name.hasSuffix($0) && name.count == 20 + $0.count } }
            .sorted()
            .map { url.appendingPathComponent($0) }
    }

    /// Writes a snapshot atomically: temporary file, fsync, rename, directory fsync. Then
    /// deletes all but the newest `keep` snapshots of that projection.
    /// - Returns: The file's name in the directory.
    /// - Throws: ``RepositoryError/storage(_:)`` when a file operation fails.
    @discardableResult
    package func write(_ snapshot: SnapshotFile, keep: Int) throws -> String {
        let (header, stored) = try snapshot.encodedParts()
        do { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) } catch {
            throw RepositoryError.storage(StorageFailure("cannot create the snapshot directory \(url.path)", cause: error))
        }
        let name = String(format: "%020llu", snapshot.nextPosition) + Self.suffix(for: snapshot.projectionName)
        // A periodic snapshot and the one at close may write the same name at once: each
        // write gets its own temporary file.
        do {
            try StoreDirectory.writeAtomically(parts: [header, stored], directory: url.path, name: name,
                                               temporaryName: ".\(name).\(UUID().uuidString).tmp", io: fileIO)
        } catch {
            throw RepositoryError.storage(StorageFailure("writing the snapshot \(name) failed", cause: error))
        }
        let all = files(for: snapshot.projectionName)
        for old in all.dropLast(max(1, keep)) { try? FileManager.default.removeItem(at: old) }
        return name
    }

    /// What the snapshots here say the log acknowledged, for
    /// `SegmentedLog.Configuration.acknowledgedElsewhere`: each snapshot's covered positions
    /// and history epoch, read from its header alone (checked against the header's own
    /// checksum). A file whose header fails its checks, and a format 1 file (no epoch), say
    /// nothing: a damaged snapshot is never used, and must not stop the log from opening.
    package func acknowledgedPositions() -> [AcknowledgedPosition] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return names.filter { $0.hasSuffix(".snap") && !$0.hasPrefix(".") }.sorted().compactMap { name in
            let file = url.appendingPathComponent(name)
            guard let prefix = try? SystemCall.readFile(at: file.path, upTo: SnapshotFile.maximumHeaderSize),
                  let header = try? SnapshotFile.decodeHeader(prefix),
                  let epoch = header.historyEpoch, header.nextPosition > 0 else { return nil }
            return AcknowledgedPosition(nextPosition: header.nextPosition, historyEpoch: epoch, file: file.path)
        }
    }

    /// Removes every snapshot file, of any projection, but those named in `kept`, durably (the
    /// directory is synced after): what compaction does before it rewrites the log and once
    /// fresh snapshots are written, since any other (an older one, one of a projection not
    /// registered now) may name what it removes. Only the store's writer may call this, with
    /// snapshot writes held (`EventStore.holdingSnapshotWrites`).
    /// - Returns: The number of snapshot files removed.
    /// - Throws: ``RepositoryError/storage(_:)`` naming a file that cannot be removed, or the
    ///   directory when its sync fails.
    @discardableResult
    package func removeFiles(except kept: Set<String>) throws -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        var removed = 0
        for name in names where name.hasSuffix(".snap") && !name.hasPrefix(".") && !kept.contains(name) {
            let path = url.appendingPathComponent(name).path
            guard unlink(path) == 0 || errno == ENOENT else {
                throw RepositoryError.storage(StorageFailure(LogError(.io, "cannot remove the snapshot file", file: path, systemErrorNumber: errno)))
            }
            removed += 1
        }
        guard removed > 0 else { return 0 }
        do { try StoreDirectory.synchronize(url.path, io: fileIO) } catch {
            throw RepositoryError.storage(StorageFailure(error))
        }
        return removed
    }

    /// Deletes the temporary files (`.<name>.<uuid>.tmp`) that a writer killed in the middle of
    /// ``write(_:keep:)`` left behind. Only the store's writer (holding its lock) may call this:
    /// it alone writes snapshots, so at its open every temporary file is stale.
    /// - Returns: The number of files removed.
    @discardableResult
    package func removeStaleTemporaryFiles() -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        var removed = 0
        for name in names where name.hasPrefix(".") && name.hasSuffix(".tmp") {
            if unlink(url.appendingPathComponent(name).path) == 0 { removed += 1 }
        }
        if removed > 0 { logger.notice("removed stale temporary snapshot files", metadata: ["directory": "\(url.path)", "count": "\(removed)"]) }
        return removed
    }

    /// The snapshots of a projection that verify and match `schemaVersion`, newest first,
    /// decoded one at a time as the sequence is walked. Files that are corrupt or outdated are
    /// logged and skipped; one that vanished (a writer pruned it meanwhile) is skipped silently.
    package func candidates(projectionName: String, schemaVersion: UInt16) -> some Sequence<(url: URL, file: SnapshotFile)> {
        files(for: projectionName).reversed().lazy.compactMap { url -> (url: URL, file: SnapshotFile)? in
            let bytes: [UInt8]
            do { bytes = try SystemCall.readFile(at: url.path) } catch {
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
    package func newestValid(
        projectionName: String, schemaVersion: UInt16, maxNextPosition: LogPosition = .max
    ) -> SnapshotFile? {
        candidates(projectionName: projectionName, schemaVersion: schemaVersion)
            .first { $0.file.nextPosition <= maxNextPosition }?.file
    }
}
