import Foundation
import EventLog
import KernelPrimitives
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock on `<store>/consumers/<name>.lock` that the one user of a consumer holds: the store
/// for each consumer it has open (until it closes), `eventkernel tail --consumer` while it runs,
/// `consumers reset` and `consumers parked --skip` while they write. A second holder is refused,
/// so two processes never commit or change the parked list of one consumer at once.
///
/// `flock(2)` locks belong to the open file: the kernel releases it when the process dies.
package final class ConsumerLock: Sendable {
    private let descriptor: Int32

    /// Takes the lock without waiting (creating the directory and the file if needed).
    /// - Parameters:
    ///   - name: The consumer's name (valid).
    ///   - directory: The store's consumers directory.
    /// - Throws: ``ConsumerError/inUse(consumer:path:)`` when another holder has it,
    ///   ``ConsumerError/fileFailed(path:reason:)`` when the file cannot be created or locked.
    package init(consumer name: String, in directory: ConsumerDirectory) throws(ConsumerError) {
        try directory.createIfNeeded()
        let path = directory.path(ConsumerFiles.lockFile(for: name))
        let descriptor: Int32
        do { descriptor = try SystemCall.run("open") { open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644) } } catch {
            throw .fileFailed(path: path, reason: "\(error)")
        }
        do {
            _ = try SystemCall.run("flock") { flock(descriptor, LOCK_EX | LOCK_NB) }
        } catch {
            close(descriptor)
            if error.errorNumber == EWOULDBLOCK { throw .inUse(consumer: name, path: path) }
            throw .fileFailed(path: path, reason: "\(error)")
        }
        self.descriptor = descriptor
    }

    /// Releases the lock now (the store's close; the file stays open until the last handle goes).
    package func release() { _ = flock(descriptor, LOCK_UN) }

    deinit { close(descriptor) }
}
