#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import Foundation
import KernelPrimitives

/// The last file of a backup (`<backup>/eventkernel.backup`, JSON): what the backup holds and
/// which store and history it was taken from. Written last, atomically, after every file it
/// lists and the directories given new entries are synced, so a directory with this file is a
/// complete backup; one without it is not (Docs/Backups.md, Docs/FileFormat.md "Backup manifest").
public struct BackupManifest: Codable, Hashable, Sendable {
    /// The manifest's file name in a backup directory.
    public static let fileName = "eventkernel.backup"
    /// The marker a backup in progress leaves until its manifest is written.
    public static let partialFileName = "eventkernel.backup.partial"
    /// The manifest format this build writes and reads.
    public static let currentFormat = 1

    /// One file of the backup.
    public struct File: Codable, Hashable, Sendable {
        /// The path relative to the backup directory (`snapshots/<name>` for a snapshot).
        public var name: String
        /// Its size in bytes.
        public var size: Int64
        /// The CRC32C of its bytes.
        public var crc32c: UInt32
        /// For a segment: the CRC32C of its header and its batch headers in order, each without
        /// its own trailing CRC32C (each holds its payload's CRC32C), which an incremental backup
        /// compares for a sealed segment instead of reading it whole, and before keeping or
        /// growing a segment's copy; `nil` for other files.
        public var headers: UInt32?
        /// For a segment: the file it was read from, as `<device>:<inode>:<inode generation>`
        /// (hex). A later incremental backup that reads the same file again trusts the copy's
        /// listed prefix from its last batch header alone, as a log never rewrites a file's
        /// committed bytes in place; `nil` for other files, on file systems that give no inode
        /// generation, and in manifests written before it was recorded (their segments are
        /// fingerprinted whole).
        public var source: String?
    }

    /// The manifest format (``currentFormat``).
    public var format: Int
    /// The store the backup was taken from: its first batch (`<crc32c of the batch header>-<minimum
    /// timestamp>`, hex), which no other store shares; `nil` for an empty store.
    public var storeIdentity: String?
    /// The source log's history epoch (Docs/Durability.md): a `repair` of the source starts another.
    public var historyEpoch: UInt64
    /// One past the last position the backup holds: it holds exactly the positions below.
    public var nextPosition: UInt64
    /// The last batch the backup holds, as `<segment file>@<offset>:<header crc32c hex>`, so
    /// that an incremental backup checks the source still holds the same history; `nil` when
    /// the backup holds no event.
    public var lastBatch: String?
    /// When the backup was completed (ISO 8601, UTC).
    public var createdAt: String
    /// Every file of the backup but the manifest, sorted by name.
    public var files: [File]

    /// The total size of the backup's files.
    public var totalBytes: Int64 { files.reduce(0) { $0 + $1.size } }

    /// Reads the manifest of a backup directory.
    /// - Parameter directory: The backup directory.
    /// - Returns: The manifest, or `nil` when the directory has none.
    /// - Throws: ``LogError`` (``LogError/Code/corruption``, naming the file) when it exists
    ///   but does not decode; ``LogError/Code/unsupportedVersion`` for a newer format.
    public static func read(in directory: URL) throws(LogError) -> BackupManifest? {
        let path = directory.path + "/" + fileName
        guard StoreDirectory.exists(path) else { return nil }
        let file = try OpenFile.open(path, flags: O_RDONLY)
        let bytes = try file.read(fromAbsoluteOffset: 0, count: Int(try file.size()))
        let manifest: BackupManifest
        do { manifest = try JSONDecoder().decode(BackupManifest.self, from: Data(bytes)) } catch {
            throw LogError(.corruption, "the backup manifest does not decode: \(error)", file: path, offset: 0)
        }
        guard manifest.format == currentFormat else {
            throw LogError(.unsupportedVersion, "backup manifest format \(manifest.format) is not supported by this build", file: path)
        }
        return manifest
    }

    /// What a directory holds as a backup, without reading its files.
    public enum DirectoryState: Hashable, Sendable {
        /// A complete backup: a manifest and no backup in progress over it.
        case complete
        /// A backup is writing into it now (it holds the directory's `LOCK`): the files may
        /// change until it writes its manifest.
        case inProgress
        /// A backup into it was interrupted (killed, a full disk) before its manifest: read
        /// commands refuse it; the next backup into it completes it.
        case interrupted
        /// Neither a manifest nor the marker of a backup in progress: not a backup.
        case notABackup
    }

    /// Whether `directory` holds a complete backup, one being written, or one cut short: the
    /// marker a backup leaves until its manifest (``partialFileName``) and the directory's lock
    /// tell, whether an earlier manifest is there or not.
    /// - Parameter directory: The directory.
    /// - Returns: Its state; ``DirectoryState/notABackup`` for a directory that cannot be read.
    public static func state(of directory: URL) -> DirectoryState {
        let path = directory.path
        let partial = StoreDirectory.exists(path + "/" + partialFileName)
        guard partial || StoreDirectory.exists(path + "/" + fileName) else { return .notABackup }
        if lockHeld(path + "/" + DirectoryLock.fileName) { return .inProgress }
        // Read again after the lock: a backup that ended meanwhile removed its marker.
        return StoreDirectory.exists(path + "/" + partialFileName) ? .interrupted : .complete
    }

    /// Whether a backup (or a writer) holds the lock file at `path` now: a shared lock is
    /// refused while an exclusive one is held; taken, it is released at once.
    static func lockHeld(_ path: String) -> Bool {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        if flock(descriptor, LOCK_SH | LOCK_NB) == 0 {
            _ = flock(descriptor, LOCK_UN)
            return false
        }
        return errno == EWOULDBLOCK
    }

    /// The manifest's bytes: sorted keys, so the same backup writes the same bytes.
    func encoded() throws(LogError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        do { return Array(try encoder.encode(self)) + [0x0A] } catch {
            throw LogError(.invalidArgument, "the backup manifest does not encode: \(error)")
        }
    }
}

/// How ``SegmentedLog/backup(to:options:extraFiles:)`` copies.
public struct BackupOptions: Sendable {
    /// Hard-link sealed segments and their index files instead of copying them, when the
    /// destination is on the same filesystem (else they are copied). Sealed files are never
    /// written again, so a link shares immutable bytes.
    public var link: Bool
    /// Start over: nothing in the destination is trusted, every file is written again and the
    /// files of the backup there that the new one does not hold are removed. A destination
    /// holding another store's (or another history's) backup, or a damaged manifest, is then
    /// taken over instead of refused; one holding files that are not a backup's still is refused,
    /// and so is one holding no backup (no manifest, nor the marker of one cut short: a store).
    public var restart: Bool
    /// The system-call layer for the backup's writes and syncs (fault injection in tests).
    public var fileIO: any LogFileIO
    /// Called once when the backup finds its destination's lock held and starts waiting for it
    /// (a test's handshake: the holder releases only once the backup is waiting).
    public var onLockWait: (@Sendable () -> Void)?

    /// Creates options.
    /// - Parameters:
    ///   - link: Hard-link sealed files where possible.
    ///   - restart: Start over in a destination that is refused otherwise.
    ///   - fileIO: The system-call layer for writes and syncs.
    ///   - onLockWait: Called once when the destination's lock is found held, before waiting.
    public init(link: Bool = false, restart: Bool = false, fileIO: any LogFileIO = PosixFileIO(),
                onLockWait: (@Sendable () -> Void)? = nil) {
        self.link = link
        self.restart = restart
        self.fileIO = fileIO
        self.onLockWait = onLockWait
    }
}

/// What a backup did.
public struct BackupReport: Sendable {
    /// The manifest written last.
    public var manifest: BackupManifest
    /// Whether an earlier complete backup of the same store and history was there to build on.
    public var incremental: Bool
    /// The files written (copied), by name.
    public var copiedFiles: [String] = []
    /// The bytes written.
    public var copiedBytes: Int64 = 0
    /// The files hard-linked (``BackupOptions/link``).
    public var linkedFiles: [String] = []
    /// The files already in the destination with the same size and CRC32C: not written.
    public var unchangedFiles: [String] = []
    /// Files removed from the destination: no longer part of the backup.
    public var removedFiles: [String] = []
    /// What the backup left for the user after it was complete (a restart's old backup that
    /// held files that are not a backup's, kept beside it): each a sentence naming the path.
    public var warnings: [String] = []
}

/// A file of the store beside the log that a backup carries (EventKernel's snapshots), already
/// read and checked by its owner.
public struct BackupExtraFile: Sendable {
    /// The path relative to the backup directory; at most one directory level (`snapshots/x`).
    public var name: String
    /// The file's bytes (empty for a file given by ``earlierCopy``).
    public var bytes: [UInt8]
    /// The CRC32C of ``bytes`` when the caller computed it while checking them (the backup
    /// then lists it without reading the bytes again); `nil`: the backup computes it.
    public var crc32c: UInt32?
    /// For a file the caller found unchanged in the backup the round builds on: what the
    /// earlier copy's size must be, and how to read the file when the round cannot keep it.
    public var earlierCopy: EarlierCopy?

    /// A file the earlier backup holds unchanged, as far as the caller could tell without
    /// reading it whole.
    public struct EarlierCopy: Sendable {
        /// The size the earlier backup's manifest must list for the file.
        public var size: Int64
        /// The file's checked bytes, read when the round does not build on an earlier backup
        /// that lists the file at ``size`` (a first backup, `restart`, another history, or a
        /// copy since removed); `nil` when it cannot be read any more (the file is then left out).
        public var read: @Sendable () throws -> [UInt8]?

        /// Creates the description of an unchanged file.
        public init(size: Int64, read: @escaping @Sendable () throws -> [UInt8]?) {
            self.size = size
            self.read = read
        }
    }

    /// Creates an extra file.
    /// - Parameters:
    ///   - name: The path relative to the backup directory.
    ///   - bytes: The contents.
    ///   - crc32c: Their CRC32C, when the caller computed it; `nil` (the default): the backup does.
    public init(name: String, bytes: [UInt8], crc32c: UInt32? = nil) {
        self.name = name
        self.bytes = bytes
        self.crc32c = crc32c
    }

    /// Creates an extra file that the backup the round builds on holds unchanged: the round
    /// keeps that copy, unread, when its manifest lists the file at `earlierCopy`'s size and
    /// the file is there at that size, and otherwise writes what `earlierCopy` reads.
    ///
    /// The caller vouches that the bytes are the earlier copy's (a snapshot compares its
    /// header, which holds the body's length and CRC32C, with the copy's): the earlier copy
    /// was checked when that backup wrote it, as a segment whose batch headers are unchanged
    /// is kept unread.
    /// - Parameters:
    ///   - name: The path relative to the backup directory.
    ///   - earlierCopy: Its size in the earlier backup, and how to read it otherwise.
    public init(name: String, unchanged earlierCopy: EarlierCopy) {
        self.name = name
        self.bytes = []
        self.earlierCopy = earlierCopy
    }
}
