#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KernelPrimitives

/// The file that makes a directory a store (`<store>/eventkernel.store`), and the history epoch.
///
/// ```
/// offset size field
///      0    8 magic "EKSTORE1"
///      8    4 format version (1; 2 when a flag is set)
///     12    4 flags: features a reader must know (bit 0: sparse batches, written by compaction)
///     16    8 history epoch
///     24    4 CRC32C of bytes 0..<24
/// ```
///
/// A directory is a store when it holds this file, or (stores written before it existed)
/// segment files with valid names; a writer adds the file to such a store. Anything else, a
/// directory with only `server.log` in it for example, is "not a store".
///
/// The history epoch advances whenever the log's history is cut: a torn tail truncated at open,
/// a `repair`. Derived state recorded against the log (EventKernel's snapshots) records the
/// epoch it was built in: a snapshot that no longer matches the log was invalidated by a cut
/// when its epoch is older, and is evidence of damage when it is not (Docs/Durability.md).
///
/// The flags are the store-format marker: a feature that older builds cannot read sets its bit
/// before its first byte is written, and a build refuses a store with a bit it does not know
/// (``LogError/Code/unsupportedVersion``), rather than misreading it. A file with a flag set is
/// format version 2, so that builds from before the flags (which accept version 1 only) refuse
/// it by its version too.
struct StoreManifest: Hashable, Sendable {
    static let fileName = "eventkernel.store"
    static let magic: [UInt8] = Array("EKSTORE1".utf8)
    static let formatVersion: UInt32 = 1
    /// The version of a store file with a feature flag set.
    static let featuresFormatVersion: UInt32 = 2
    static let size = 28

    /// Features of the store's files that a reader must know.
    struct Features: OptionSet, Hashable, Sendable {
        let rawValue: UInt32
        /// Segments may hold sparse batches (compaction removed records: Docs/FileFormat.md).
        static let sparseBatches = Features(rawValue: 1 << 0)
        /// Every feature this build reads.
        static let known: Features = [.sparseBatches]
    }

    var historyEpoch: UInt64
    var features: Features = []

    init(historyEpoch: UInt64, features: Features = []) {
        self.historyEpoch = historyEpoch
        self.features = features
    }

    func encoded() -> [UInt8] {
        var bytes = Self.magic
        bytes.reserveCapacity(Self.size)
        bytes.appendLittleEndian(features.isEmpty ? Self.formatVersion : Self.featuresFormatVersion)
        bytes.appendLittleEndian(features.rawValue)
        bytes.appendLittleEndian(historyEpoch)
        bytes.appendLittleEndian(bytes.withUnsafeBytes { CRC32C.checksum($0) })
        return bytes
    }

    /// Decodes a manifest; the error carries the offset, not the file.
    static func decode(_ bytes: [UInt8]) -> Result<StoreManifest, LogError> {
        bytes.withUnsafeBytes { raw in
            guard raw.count == size else {
                return .failure(LogError(.corruption, "store file has \(raw.count) bytes, not \(size)", offset: Int64(min(raw.count, size))))
            }
            guard Array(raw[0..<8]) == magic else { return .failure(LogError(.corruption, "bad store file magic", offset: 0)) }
            let stored = raw.loadLittleEndian(at: 24, as: UInt32.self)
            guard stored == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<24])) else {
                return .failure(LogError(.corruption, "store file checksum mismatch", offset: 24))
            }
            let version = raw.loadLittleEndian(at: 8, as: UInt32.self)
            guard version == formatVersion || version == featuresFormatVersion else {
                return .failure(LogError(.unsupportedVersion, "store format version \(version) is not supported by this build", offset: 8))
            }
            let features = Features(rawValue: raw.loadLittleEndian(at: 12, as: UInt32.self))
            guard (version == featuresFormatVersion) == !features.isEmpty else {
                return .failure(LogError(.corruption, "store format version \(version) with flags 0x\(String(features.rawValue, radix: 16)) (version 2 exactly when a flag is set)", offset: 8))
            }
            guard Features.known.isSuperset(of: features) else {
                return .failure(LogError(.unsupportedVersion,
                    "the store uses features this build cannot read (store flags 0x\(String(features.subtracting(.known).rawValue, radix: 16))): open it with a newer build",
                    offset: 12))
            }
            return .success(StoreManifest(historyEpoch: raw.loadLittleEndian(at: 16, as: UInt64.self), features: features))
        }
    }

    /// Reads the manifest of `directory`: nil when there is none.
    /// - Throws: ``LogError`` (corruption with the file and offset) when it exists but is invalid.
    static func read(in directory: String) throws(LogError) -> StoreManifest? {
        let path = directory + "/" + fileName
        guard StoreDirectory.exists(path) else { return nil }
        let file = try OpenFile.open(path, flags: O_RDONLY)
        let bytes = try file.read(fromAbsoluteOffset: 0, count: Int(try file.size()))
        switch decode(bytes) {
        case .success(let manifest): return manifest
        case .failure(var error):
            error.file = path
            throw error
        }
    }

    /// Writes the manifest atomically (temporary file, fsync, rename, directory fsync).
    func write(in directory: String, io: any LogFileIO) throws(LogError) {
        try StoreDirectory.writeAtomically(encoded(), directory: directory, name: Self.fileName, io: io)
    }

    /// Names a store directory may hold besides segments and their side files, without being
    /// something else: the lock, kept bytes, snapshots, consumers' checkpoints, hidden files.
    static func isStoreOwnedOrIgnorable(_ name: String) -> Bool {
        name == fileName || name == fileName + ".tmp" || name == DirectoryLock.fileName || name == RecoveredFiles.directoryName
            || name == "snapshots" || name == ConsumerFiles.directoryName || name.hasPrefix(".")
            || name == BackupManifest.fileName || name == BackupManifest.partialFileName
    }

    /// Makes sure `directory` is a store, for a writer: reads its manifest, adds one to a store
    /// written before manifests existed or to an empty directory, and refuses a directory that
    /// holds other files.
    /// - Returns: The manifest.
    /// - Throws: ``LogError/Code/notAStore`` for a directory holding files but no store;
    ///   corruption for a damaged manifest.
    static func prepareForWriting(in directory: String, io: any LogFileIO) throws(LogError) -> StoreManifest {
        try refuseIncompleteBackup(in: directory)
        if let manifest = try read(in: directory) { return manifest }
        try requireStoreContents(in: directory)
        let manifest = StoreManifest(historyEpoch: 0)
        try manifest.write(in: directory, io: io)
        return manifest
    }

    /// The manifest, for a reader: a store written before manifests existed reads as epoch 0.
    /// - Throws: ``LogError/Code/notAStore`` when the directory is not a store.
    static func requireForReading(in directory: String) throws(LogError) -> StoreManifest {
        try refuseIncompleteBackup(in: directory)
        if let manifest = try read(in: directory) { return manifest }
        guard Segment.Name.containsSegment(try StoreDirectory.list(directory)) else {
            throw LogError(.notAStore, "\(directory) is not a store: it has no \(fileName) file and no segment files", file: directory)
        }
        return StoreManifest(historyEpoch: 0)
    }

    /// Refuses a backup directory a backup is writing, or one a killed backup left: its files
    /// are a prefix of some store (a full backup cut at 60% reads as a shorter, consistent
    /// store), so no reader, writer or verify may take it for one.
    /// - Throws: ``LogError/Code/notAStore`` when `directory` holds the backup's partial marker.
    static func refuseIncompleteBackup(in directory: String) throws(LogError) {
        let marker = directory + "/" + BackupManifest.partialFileName
        guard StoreDirectory.exists(marker) else { return }
        throw LogError(.notAStore,
            "\(directory) is a backup in progress or cut short (it holds \(BackupManifest.partialFileName)), not a store: see `eventkernel backups list`, and run the backup again to complete it",
            file: marker)
    }

    /// Fails unless the directory is empty (but for what a store may hold) or holds segments.
    /// Called before a writer takes the lock too, so that refusing leaves nothing behind.
    static func requireStoreContents(in directory: String) throws(LogError) {
        let names = try StoreDirectory.list(directory)
        if Segment.Name.containsSegment(names) { return }
        let foreign = names.filter { !isStoreOwnedOrIgnorable($0) }.sorted()
        guard foreign.isEmpty else {
            let shown = foreign.prefix(3).joined(separator: ", ") + (foreign.count > 3 ? ", ..." : "")
            throw LogError(.notAStore,
                "\(directory) holds other files (\(shown)) and is not a store: open an empty directory or an existing store",
                file: directory)
        }
    }
}
