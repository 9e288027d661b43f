public import EventLog
public import Foundation
import KernelPrimitives

/// Online, incremental backups of a store: its log (`SegmentedLog/backup(to:options:extraFiles:)`
/// holds the rule) and the newest snapshots bound to the backed-up log (Docs/Backups.md).
extension EventStore {
    /// Backs the store up into `destination` while it goes on serving appends.
    ///
    /// The backup holds the log up to the position it had when the backup began (the
    /// appends after it are in the next backup), the newest snapshot of each projection that
    /// covers no more than that and is bound to this log, and the store file. It is itself a
    /// store: `eventkernel verify` passes on it, and it opens. Into a directory that holds an
    /// earlier backup of this store and history, only new or changed files are written. The
    /// copying runs on a thread of its own, not the caller's.
    /// - Parameters:
    ///   - destination: The backup directory (created when missing).
    ///   - options: Hard links for sealed segments, starting over, the system-call layer.
    /// - Returns: What was written, linked, kept and removed, and the manifest.
    /// - Throws: ``RepositoryError/misuse(_:)`` (``Misuse/Code/backupUnsupported``) for a store
    ///   whose log is not a local directory; ``RepositoryError/storage(_:)`` wrapping the
    ///   `LogError` of `SegmentedLog/backup(to:options:extraFiles:)` (a destination that
    ///   belongs to another store or history, damage met on the way with its file and offset,
    ///   an I/O failure); the destination then holds no manifest (a restart over a complete
    ///   backup leaves that backup as it was).
    public func backup(to destination: URL, options: BackupOptions = BackupOptions()) async throws -> BackupReport {
        guard let segmented = log.localSegments else {
            throw RepositoryError.misuse(Misuse(.backupUnsupported,
                "the store's log is not a local directory: back up the PostgreSQL database with its own tools, or `eventkernel copy` it to a directory"))
        }
        let snapshots = snapshots?.url
        // Blocking file I/O for as long as the copy takes: off the cooperative threads the
        // store's own tasks run on.
        return try await runOnThreadOfItsOwn(named: "EventKernel backup") {
            try Self.backup(segmented, snapshots: snapshots, to: destination, options: options)
        }
    }

    /// Backs up the store at `source` from a read-only view of it: the writer (another
    /// process, `eventkernel backup`) goes on.
    /// - Parameters:
    ///   - source: The store directory.
    ///   - destination: The backup directory (created when missing).
    ///   - options: Hard links for sealed segments, starting over, the system-call layer.
    /// - Returns: What was written, linked, kept and removed, and the manifest.
    /// - Throws: As ``backup(to:options:)``; ``RepositoryError/storage(_:)`` with
    ///   `LogError/Code/notAStore` when `source` is not a store.
    public static func backup(storeAt source: URL, to destination: URL, options: BackupOptions = BackupOptions()) async throws -> BackupReport {
        let log: SegmentedLog
        do { log = try SegmentedLog.openReadOnly(at: source) } catch let error as LogError {
            throw RepositoryError.storage(StorageFailure(error))
        }
        let snapshots = source.appending(path: "snapshots", directoryHint: .isDirectory)
        let result: Result<BackupReport, any Error>
        do {
            result = .success(try await runOnThreadOfItsOwn(named: "EventKernel backup") {
                try backup(log, snapshots: snapshots, to: destination, options: options)
            })
        } catch {
            result = .failure(error)
        }
        try? await log.close()
        return try result.get()
    }

    private static func backup(_ log: SegmentedLog, snapshots: URL?, to destination: URL, options: BackupOptions) throws -> BackupReport {
        do {
            return try log.backup(to: destination, options: options) { position, epoch in
                guard let snapshots else { return [] }
                return try boundSnapshots(in: snapshots, log: log, position: position, epoch: epoch, earlierBackup: destination)
            }
        } catch let error as LogError {
            throw RepositoryError.storage(StorageFailure(error))
        }
    }

    /// The newest snapshot of each projection (and schema version) that covers no more than
    /// `position` and is bound to `log` as it is: the store's own rule,
    /// ``standing(nextPosition:anchor:snapshotEpoch:at:in:historyEpoch:logEnd:)``, judges each
    /// from its header (a stale one is skipped, as the store would not use it). A snapshot the
    /// writer pruned meanwhile, or that does not decode, is skipped: snapshots are derived, and
    /// the backup's first open replays instead.
    ///
    /// Only the header of each file is read first (checked against its own checksum): a file
    /// past `position`, or older than the one already chosen for its projection, is never read
    /// whole, so an incremental backup does not read the snapshots it does not carry. A file
    /// that `earlierBackup` holds unchanged (its manifest lists the file at this size, and the
    /// copy's header is this file's byte for byte: the header holds the body's length and
    /// CRC32C) is not read whole either: it is carried as that copy
    /// (``BackupExtraFile/init(name:unchanged:)``), which was checked when it was written, as
    /// an unchanged segment is kept by its batch headers; should the round not keep the copy
    /// after all and the file then not read (pruned meanwhile), the projection is carried with
    /// no snapshot (the backup's first open replays it). Any other file carried is read whole
    /// and checked (the header's and the body's checksums).
    /// - Parameters:
    ///   - earlierBackup: The backup directory the round writes into (its manifest and copies
    ///     are only read here), or `nil`.
    ///   - read: Reads a file's first `count` bytes (all of it for `nil`), `nil` when it cannot
    ///     (pruned meanwhile); tests count the reads.
    /// - Throws: `LogError/Code/corruption` for a snapshot that contradicts the log (events it
    ///   covers are missing or changed in a history never cut: damage, as at the store's open).
    static func boundSnapshots(
        in directory: URL, log: SegmentedLog, position: LogPosition, epoch: UInt64, earlierBackup: URL? = nil,
        read: @escaping @Sendable (URL, Int?) -> [UInt8]? = EventStore.readSnapshotFile
    ) throws -> [BackupExtraFile] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(".snap") && !$0.hasPrefix(".") }.sorted().reversed()
        // What the earlier backup lists; an unreadable manifest lists nothing (the round then
        // reads every file, as a first backup does).
        let earlierFiles = earlierBackup.flatMap { try? BackupManifest.read(in: $0) }
            .map { Dictionary($0.files.map { ($0.name, $0.size) }, uniquingKeysWith: { a, _ in a }) } ?? [:]
        var chosen: [String: BackupExtraFile] = [:]
        let logEnd = log.bounds.nextPosition
        for name in names {
            let url = directory.appending(path: name)
            guard let prefix = read(url, SnapshotFile.maximumHeaderSize), let header = try? SnapshotFile.decodeHeader(prefix) else { continue }
            let key = "\(header.projectionName)\u{0}\(header.schemaVersion)"
            // Past the backup's position: written since the plan (a writer in another process
            // snapshots while it appends). Not the backup's, and not judged: the view of the log
            // ends before it, where the store's rule would call it one whose events are missing.
            // Older than the one chosen: not carried, so not read.
            guard header.nextPosition <= position, chosen[key] == nil else { continue }
            let carried = "snapshots/" + name
            let (size, overflow) = Int64(header.bodyOffset).addingReportingOverflow(Int64(clamping: header.storedLength))
            let unchanged = !overflow && earlierBackup.map { backup in
                earlierFiles[carried] == size
                    && read(backup.appending(path: carried), header.bodyOffset)?.elementsEqual(prefix.prefix(header.bodyOffset)) == true
            } == true
            // A file carried by its bytes is read whole before it is judged, as always: one
            // that no longer reads (pruned) or does not check is skipped, not judged.
            let checked = unchanged ? nil : checkedSnapshot(at: url, header: header, read: read)
            guard unchanged || checked != nil else { continue }
            switch try judged(header, at: url, in: log, epoch: epoch, logEnd: logEnd) {
            case .contradicts(let error): throw error
            case .stale: continue
            case .matches:
                chosen[key] = checked.map { BackupExtraFile(name: carried, bytes: $0.bytes, crc32c: $0.crc32c) }
                    ?? BackupExtraFile(name: carried, unchanged: BackupExtraFile.EarlierCopy(size: size) {
                        Self.checkedSnapshot(at: url, header: header, read: read)?.bytes
                    })
            }
        }
        return chosen.values.sorted { $0.name < $1.name }
    }

    /// The whole snapshot file at `url`, when it checks (both checksums) and is
    /// the one `header` describes; `nil` otherwise (pruned or replaced meanwhile, damaged).
    ///
    /// Returns the bytes and their CRC32C, combined from the header's bytes and the body's
    /// checksum just checked (``CRC32C/combine(_:_:secondCount:)``): the backup's manifest lists
    /// it without a second pass over 20 MB at a million activities.
    private static func checkedSnapshot(at url: URL, header: SnapshotFile.Header, read: (URL, Int?) -> [UInt8]?) -> (bytes: [UInt8], crc32c: UInt32)? {
        // Checked as written (header and body checksums), not decompressed: a copy keeps the
        // bytes, and decoding the body (decompressing it into a fresh buffer) was a tenth of a
        // full backup (perf, `BenchProbe backup-full`). The store's open decodes it.
        guard let bytes = read(url, nil), let file = try? SnapshotFile.checkedHeader(ofFile: bytes),
              file.projectionName == header.projectionName, file.schemaVersion == header.schemaVersion,
              file.nextPosition == header.nextPosition, file.historyEpoch == header.historyEpoch, file.anchor == header.anchor else { return nil }
        return (bytes, CRC32C.combine(CRC32C.checksum(bytes[..<file.bodyOffset]), file.bodyCRC, secondCount: bytes.count - file.bodyOffset))
    }

    /// The store's rule (``standing(nextPosition:anchor:snapshotEpoch:at:in:historyEpoch:logEnd:)``)
    /// for a snapshot a backup carries, with a failure to read the log as its `LogError`.
    private static func judged(
        _ header: SnapshotFile.Header, at url: URL, in log: SegmentedLog, epoch: UInt64, logEnd: LogPosition
    ) throws -> SnapshotStanding {
        do {
            return try Self.standing(nextPosition: header.nextPosition, anchor: header.anchor, snapshotEpoch: header.historyEpoch,
                                     at: url, in: log, historyEpoch: epoch, logEnd: logEnd)
        } catch {
            if case .storage(let failure) = error as? RepositoryError, let logError = failure.logError { throw logError }
            throw error
        }
    }

    /// The first `count` bytes of a snapshot file (all of it for `nil`); `nil` when it cannot
    /// be read (a writer pruned it meanwhile).
    static func readSnapshotFile(_ url: URL, count: Int?) -> [UInt8]? {
        do {
            return try SystemCall.readFile(at: url.path, upTo: count)
        } catch {
            // A failed read gives no bytes, which no decoder accepts: the caller judges the
            // file unusable; only a file that cannot be opened (pruned meanwhile) gives nil.
            return error.call == "open" ? nil : []
        }
    }
}
