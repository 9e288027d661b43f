#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import KernelPrimitives

/// Starting a backup over (``BackupOptions/restart``) where a complete backup stands: the new
/// one is written beside it and the two directories are exchanged in one step, so that the
/// destination holds a complete backup at every instant, the old one until the exchange and
/// the new one after it (issue 28's bar for a SIGKILL at any instant).
extension SegmentedLog {
    /// Backs up into a hidden sibling of `destination` (`<parent>/.<name>.restarting-<random>`),
    /// exchanges it with `destination` (``SystemCall/exchange(_:_:)``), then removes the old
    /// backup, now at the sibling's name.
    ///
    /// Only for a real directory (not a mount point) holding a complete backup and nothing but a
    /// backup's files, in a parent this process can write: a file that is not a backup's would
    /// leave with the old backup, and a destination with no complete backup has none to keep.
    /// For those, and where the file system cannot exchange two directories, `nil`: the caller
    /// restarts in place, as documented. A sibling that does not fit beside the old backup
    /// (`ENOSPC`, `EDQUOT`) is an error that says so: the old backup is kept.
    ///
    /// A crash leaves the destination whole (old or new) and at most a hidden sibling, a
    /// removal leftover (``BackupManifest/isRemovalLeftover(_:)``) that the next restart into
    /// the same destination, or `backups prune`, removes once no restart holds the destination.
    /// - Returns: The new backup's report, or `nil` when the caller should restart in place.
    /// - Throws: As ``backup(to:options:extraFiles:)``, until the exchange: the destination then
    ///   holds the old backup. Nothing after it: the new backup is in place, and an old one
    ///   that could not be removed is a leftover.
    func backupBesideAndExchange(
        to destination: URL, options: BackupOptions, extraFiles: (LogPosition, UInt64) throws -> [BackupExtraFile]
    ) throws -> BackupReport? {
        let dest = destination.standardizedFileURL.path
        let parent = (dest as NSString).deletingLastPathComponent
        let name = (dest as NSString).lastPathComponent
        var destStat = stat(), parentStat = stat()
        // A real directory on its parent's file system (a mount point cannot be exchanged, and
        // its sibling would land on another disk).
        guard lstat(dest, &destStat) == 0, (destStat.st_mode & S_IFMT) == S_IFDIR,
              stat(parent, &parentStat) == 0, parentStat.st_dev == destStat.st_dev else { return nil }
        // A parent this process cannot write (a shared directory's): in place.
        #if canImport(Glibc)
        let writable = Glibc.access(parent, W_OK | X_OK) == 0
        #else
        let writable = Darwin.access(parent, W_OK | X_OK) == 0
        #endif
        guard writable else { return nil }
        // One backup at a time into the destination: held until the exchange is done (a leftover
        // of this destination is never removed while it is held: ``BackupManifest/removeLeftovers(in:)``).
        let lock = try Self.lockDestination(dest, onWait: options.onLockWait)
        defer { lock.unlock() }
        // Judged under the lock: no other backup can change it meanwhile.
        guard StoreDirectory.exists(dest + "/" + BackupManifest.fileName), !StoreDirectory.exists(dest + "/" + BackupManifest.partialFileName),
              !(try Self.backupContents(of: dest).holdsForeign) else { return nil }
        // Earlier restarts of this destination cut short (their siblings are hidden, never a backup).
        for leftover in try StoreDirectory.list(parent) where BackupManifest.restartDestination(ofLeftover: leftover) == name {
            try? Self.removeOldBackup(parent + "/" + leftover, parent: parent, name: name)
        }
        let sibling = parent + "/." + name + BackupManifest.restartingInfix + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        var fresh = options
        fresh.restart = false
        var report: BackupReport
        do {
            report = try backup(to: URL(fileURLWithPath: sibling, isDirectory: true), options: fresh, extraFiles: extraFiles)
        } catch let error as LogError where [ENOSPC, EDQUOT].contains(error.systemErrorNumber ?? 0) {
            // No room for two backups: the old one stays, whole, and the user chooses.
            try? BackupManifest.removeTree(sibling, parent: parent)
            throw LogError(error.code, "\(error.message); a restart writes the new backup beside the old one, which it keeps until the new one is complete: there is no room for both. Remove the old backup first (it is then not kept meanwhile) or back up into another directory",
                           file: error.file, offset: error.offset, position: error.position, systemErrorNumber: error.systemErrorNumber)
        } catch {
            try? BackupManifest.removeTree(sibling, parent: parent)
            throw error
        }
        do throws(SystemCallError) {
            try SystemCall.exchange(sibling, dest)
        } catch where [EINVAL, ENOSYS, ENOTSUP, EXDEV, EBUSY, EPERM].contains(error.errorNumber) {
            // A file system that cannot exchange (or refuses it here): the new backup is
            // dropped, the old one kept, and the caller restarts in place.
            try? BackupManifest.removeTree(sibling, parent: parent)
            return nil
        } catch {
            try? BackupManifest.removeTree(sibling, parent: parent)
            throw LogError.system(error, file: dest)
        }
        // From here the new backup is in place: what follows is tidying, and its failures leave
        // a leftover, not a failed backup.
        try? StoreDirectory.synchronize(parent, io: options.fileIO)
        do throws(LogError) { try Self.removeOldBackup(sibling, parent: parent, name: name) } catch {
            report.warnings.append(error.message)
        }
        return report
    }

    /// Removes an old backup (or a sibling cut short) file by file, only the files a backup
    /// owns, then its directory. Anything else found in it (a file put there meanwhile) is never
    /// removed: the directory is then renamed to a visible `<name>.kept-<random>` beside it,
    /// with what remains, and that is an error.
    private static func removeOldBackup(_ path: String, parent: String, name destination: String) throws(LogError) {
        for name in try Self.backupContents(of: path).ownedFiles { try StoreDirectory.remove(path + "/" + name) }
        if StoreDirectory.exists(path + "/snapshots") { try? StoreDirectory.removeDirectory(path + "/snapshots") }
        do throws(LogError) {
            try StoreDirectory.removeDirectory(path)
        } catch {
            let visible = parent + "/" + destination + ".kept-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            _ = rename(path, visible)
            throw LogError(.io, "the old backup held files that are not a backup's: they were kept in \(visible)", file: path)
        }
        try StoreDirectory.synchronize(parent, io: PosixFileIO())
    }
}
