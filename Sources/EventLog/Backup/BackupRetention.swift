#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import Foundation

/// Removing backup generations (`eventkernel backups prune`): a directory of backups, each
/// subdirectory one complete backup, the oldest removed by a retention rule.
extension BackupManifest {
    /// The infix of a generation being removed: `<root>/.<name>.removing-<random>`.
    static let removingInfix = ".removing-"
    /// The infix of the sibling a restarted backup is written into before it is exchanged with
    /// its destination (`SegmentedLog.backupBesideAndExchange`): `<root>/.<name>.restarting-<random>`.
    static let restartingInfix = ".restarting-"

    /// Whether a directory entry of a directory of generations is a removal cut short (a
    /// hidden name that ``removeBackup(at:expecting:)`` gave a generation before removing its
    /// files) or the hidden sibling of a restarted backup (`backup --restart`: the new backup
    /// being written, or the old one it replaced; ``removeLeftovers(in:)`` leaves it while that
    /// restart runs).
    /// - Parameter name: The entry's name.
    public static func isRemovalLeftover(_ name: String) -> Bool {
        name.hasPrefix(".") && (name.contains(removingInfix) || name.contains(restartingInfix))
    }

    /// The backup directory whose restart left the hidden sibling `name` (a name in the same
    /// parent, `.<destination>.restarting-<random>`), or `nil` when `name` is not one. The one
    /// reading of such a name, for the restart that clears its own leftovers and for
    /// ``removeLeftovers(in:)``, which leaves a sibling while its destination is held.
    static func restartDestination(ofLeftover name: String) -> String? {
        // The last infix: a destination whose own name holds it is still read whole.
        guard name.hasPrefix("."), let range = name.range(of: restartingInfix, options: .backwards) else { return nil }
        let random = name[range.upperBound...]
        let destination = name[name.index(after: name.startIndex)..<range.lowerBound]
        // The random part is base 36.
        guard !destination.isEmpty, !random.isEmpty, random.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else { return nil }
        return String(destination)
    }

    /// Removes one complete backup directory, whole: under its lock (no backup writes into it
    /// meanwhile), it is renamed out of the way in one step (`<parent>/.<name>.removing-…`, the
    /// parent synced), so that killed midway it is no longer a backup anywhere, only a hidden
    /// leftover that ``removeLeftovers(in:)`` finishes; then its files are removed.
    /// - Parameters:
    ///   - directory: A complete backup (``state(of:)`` is ``DirectoryState/complete``), a real
    ///     directory (a symbolic link is refused: removing it would leave the bytes).
    ///   - expected: The manifest the caller decided on: when given, the backup is removed only
    ///     if its manifest, read again under the lock, is still this one (a round since made it
    ///     another backup, to be judged again).
    /// - Throws: ``LogError``: ``LogError/Code/locked`` when a backup is writing into it;
    ///   ``LogError/Code/backupMismatch`` when it is not a complete backup (cut short, or not a
    ///   backup: never removed), a symbolic link, or its manifest changed since `expected`;
    ///   ``LogError/Code/io`` when a rename, removal or sync fails.
    public static func removeBackup(at directory: URL, expecting expected: BackupManifest? = nil) throws(LogError) {
        let path = directory.standardizedFileURL.path
        var st = stat()
        if lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFLNK {
            throw LogError(.backupMismatch, "\(path) is a symbolic link: not removed (its target would stay)", file: path)
        }
        let lock: DirectoryLock
        do { lock = try DirectoryLock(directory: path) } catch {
            guard error.code == .locked else { throw error }
            throw LogError(.locked, "a backup is writing into \(path): not removed", file: path, systemErrorNumber: error.systemErrorNumber)
        }
        defer { lock.unlock() }
        // Judged under the lock: no backup can start or end in it meanwhile.
        guard StoreDirectory.exists(path + "/" + fileName), !StoreDirectory.exists(path + "/" + partialFileName) else {
            throw LogError(.backupMismatch, "\(path) holds no complete backup: not removed", file: path)
        }
        if let expected, (try? read(in: directory)) != expected {
            throw LogError(.backupMismatch, "\(path) changed since it was judged (a backup ran into it): not removed; prune again to judge it anew", file: path)
        }
        let parent = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        let hidden = parent + "/." + name + removingInfix + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        guard rename(path, hidden) == 0 else {
            throw LogError(.io, "cannot rename the backup out of the way: \(String(cString: strerror(errno)))", file: path, systemErrorNumber: errno)
        }
        try StoreDirectory.synchronize(parent, io: PosixFileIO())
        try removeTree(hidden, parent: parent)
    }

    /// Finishes the removals cut short in a directory of generations.
    /// - Parameter root: The directory of generations.
    /// - Returns: The leftovers removed, by name.
    /// - Throws: ``LogError/Code/io`` when a removal fails.
    @discardableResult
    public static func removeLeftovers(in root: URL) throws(LogError) -> [String] {
        let path = root.standardizedFileURL.path
        var removed: [String] = []
        for name in try StoreDirectory.list(path).filter(isRemovalLeftover).sorted() {
            if let destination = restartDestination(ofLeftover: name) {
                // A restart's sibling: left while that restart holds its destination's lock (the
                // new backup being written there, or the exchange under way).
                if lockHeld(path + "/" + destination + "/" + DirectoryLock.fileName) { continue }
            }
            try removeTree(path + "/" + name, parent: path)
            removed.append(name)
        }
        return removed
    }

    /// Removes `path` and everything under it, then syncs `parent`.
    /// - Throws: ``LogError/Code/io`` when a removal or the sync fails.
    static func removeTree(_ path: String, parent: String) throws(LogError) {
        do { try FileManager.default.removeItem(atPath: path) } catch {
            throw LogError(.io, "cannot remove \(path): \(error)", file: path)
        }
        try StoreDirectory.synchronize(parent, io: PosixFileIO())
    }
}
