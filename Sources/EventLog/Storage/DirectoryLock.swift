#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KernelPrimitives

/// The exclusive writer lock of a store: `flock(2)` on `<store>/LOCK`.
///
/// flock locks belong to an open file description, so a second open in the same process
/// conflicts just as one from another process does; the kernel drops the lock when the
/// process dies, so a crash never leaves a stale lock behind.
final class DirectoryLock: Sendable {
    static let fileName = "LOCK"
    let file: OpenFile

    /// Takes the lock without waiting.
    /// - Throws: ``LogError`` with code ``LogError/Code/locked`` when another writer holds it.
    init(directory: String) throws(LogError) {
        let path = directory + "/" + Self.fileName
        // O_NOFOLLOW: a LOCK that is a symbolic link (planted, or copied by a careless tool) must not
        // have its target truncated and overwritten with our pid below.
        let file = try OpenFile.open(path, flags: O_RDWR | O_CREAT | O_NOFOLLOW)
        do throws(SystemCallError) {
            try SystemCall.run("flock") { flock(file.descriptor, LOCK_EX | LOCK_NB) }
        } catch where error.errorNumber == EWOULDBLOCK {
            throw LogError(.locked, "the store is locked by another writer (in this or another process); open it read-only, or stop the other writer", file: path, systemErrorNumber: error.errorNumber)
        } catch {
            throw .system(error, file: path)
        }
        // The file locked must still be the one at `path`: a directory exchanged or renamed
        // between the open and the flock (a backup restarted beside its destination) leaves
        // this descriptor on a file no longer there, whose lock guards nothing.
        var opened = stat(), current = stat()
        guard fstat(file.descriptor, &opened) == 0, lstat(path, &current) == 0,
              opened.st_dev == current.st_dev, opened.st_ino == current.st_ino else {
            throw LogError(.locked, "the directory was replaced while its lock was being taken; try again", file: path)
        }
        // Informational only: who holds the lock, for people inspecting a stuck store.
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(file.descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(file.descriptor, $0.baseAddress, $0.count, 0) }
        self.file = file
    }

    /// Releases the lock now (closing the file would too).
    func unlock() { _ = flock(file.descriptor, LOCK_UN) }
}
