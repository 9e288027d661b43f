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
    /// Only for a real directory holding a complete backup and nothing but a backup's files: a
    /// file that is not a backup's would leave with the old backup, and a destination with no
    /// complete backup has none to keep. For those, for a parent directory this process cannot
    /// write, and where the file system cannot exchange two directories, `nil`: the caller
    /// restarts in place, as documented.
    ///
    /// A crash leaves the destination whole (old or new) and at most a hidden sibling, a
    /// removal leftover (``BackupManifest/isRemovalLeftover(_:)``) that the next restart into
    /// the same destination, or `backups prune`, removes.
    /// - Returns: The new backup's report, or `nil` when the caller should restart in place.
    /// - Throws: As ``backup(to:options:extraFiles:)``; the destination then holds the old backup.
    func backupBesideAndExchange(
        to destination: URL, options: BackupOptions, extraFiles: (LogPosition, UInt64) throws -> [BackupExtraFile]
    ) throws -> BackupReport? {
        let dest = destination.standardizedFileURL.path
        var st = stat()
        guard lstat(dest, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return nil }
        // One backup at a time into the destination: held until the old backup is gone.
        let lock = try Self.lockDestination(dest, onWait: options.onLockWait)
        defer { lock.unlock() }
        // Judged under the lock: no other backup can change it meanwhile.
        guard StoreDirectory.exists(dest + "/" + BackupManifest.fileName), !StoreDirectory.exists(dest + "/" + BackupManifest.partialFileName),
              try StoreDirectory.list(dest).allSatisfy(Self.isBackupOwned) else { return nil }
        let parent = (dest as NSString).deletingLastPathComponent
        let name = (dest as NSString).lastPathComponent
        // A parent this process cannot write (a mount point's, a shared directory's): in place.
        #if canImport(Glibc)
        let writable = Glibc.access(parent, W_OK | X_OK) == 0
        #else
        let writable = Darwin.access(parent, W_OK | X_OK) == 0
        #endif
        guard writable else { return nil }
        // Earlier restarts of this destination cut short (their siblings are hidden, never a backup).
        for leftover in try StoreDirectory.list(parent) where leftover.hasPrefix("." + name + BackupManifest.restartingInfix) {
            try BackupManifest.removeTree(parent + "/" + leftover, parent: parent)
        }
        let sibling = parent + "/." + name + BackupManifest.restartingInfix + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        var fresh = options
        fresh.restart = false
        let report: BackupReport
        do {
            report = try backup(to: URL(fileURLWithPath: sibling, isDirectory: true), options: fresh, extraFiles: extraFiles)
        } catch {
            try? BackupManifest.removeTree(sibling, parent: parent)
            throw error
        }
        do throws(SystemCallError) {
            try SystemCall.exchange(sibling, dest)
        } catch where [EINVAL, ENOSYS, ENOTSUP, EXDEV, EBUSY].contains(error.errorNumber) {
            // A file system that cannot exchange, or a destination that is a mount point: the
            // new backup is dropped, the old one kept, and the caller restarts in place.
            try? BackupManifest.removeTree(sibling, parent: parent)
            return nil
        } catch {
            try? BackupManifest.removeTree(sibling, parent: parent)
            throw LogError.system(error, file: dest)
        }
        try StoreDirectory.synchronize(parent, io: options.fileIO)
        // The old backup, now at the sibling's name: hidden, no longer a backup anyone reads.
        try BackupManifest.removeTree(sibling, parent: parent)
        return report
    }
}
