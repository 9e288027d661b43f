import Foundation
import EventLog
import KernelPrimitives
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock the one user of a consumer holds: the store for each consumer it has open (until
/// it closes), `eventkernel tail --consumer` while it runs, `consumers reset` and
/// `consumers parked --skip` while they write. A second holder is refused, so two processes
/// never commit or change the parked list of one consumer at once.
///
/// For a store directory it is `<store>/consumers/<name>.lock`, locked with `flock(2)`: the
/// lock belongs to the open file, and the kernel releases it when the process dies. A log
/// that keeps the consumers itself (``ConsumerStorageSource``) supplies a ``ConsumerLease``
/// instead (on PostgreSQL, an advisory lock held by a session of its own).
package final class ConsumerLock: Sendable {
    private enum Holder: Sendable {
        case file(Int32)
        case lease(any ConsumerLease)
    }
    private let holder: Holder

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
        holder = .file(descriptor)
    }

    /// Wraps a lease a log's consumer storage took.
    package init(lease: any ConsumerLease) {
        holder = .lease(lease)
    }

    /// Whether the lock is still held: a file lock is, until released; a lease can be lost
    /// (its session ended) while its holder runs.
    package var isHeld: Bool {
        switch holder {
        case .file: true
        case .lease(let lease): lease.isHeld
        }
    }

    /// The lease this lock wraps (`nil` for a lock file): a log's storage writes through it.
    package var lease: (any ConsumerLease)? {
        switch holder {
        case .file: nil
        case .lease(let lease): lease
        }
    }

    /// Confirms with whoever grants the lock that it is still held: a lock file always is; a
    /// lease asks its server (at most about once a second: ``ConsumerLease/confirm()``).
    /// - Throws: ``ConsumerError/leaseLost(consumer:reason:)`` when the lease is gone.
    package func confirm() throws(ConsumerError) {
        if case .lease(let lease) = holder { try lease.confirm() }
    }

    /// Releases the lock now (the store's close; a lock file stays open until the last handle goes).
    package func release() {
        switch holder {
        case .file(let descriptor): _ = flock(descriptor, LOCK_UN)
        case .lease(let lease): lease.release()
        }
    }

    deinit {
        switch holder {
        case .file(let descriptor): close(descriptor)
        case .lease(let lease): lease.release()
        }
    }
}

/// A consumer's lock held elsewhere than in a file (``ConsumerStorageSource``).
package protocol ConsumerLease: Sendable {
    /// Whether the lease is still held (`false` once released or lost).
    var isHeld: Bool { get }
    /// Gives the lease up (idempotent).
    func release()
    /// The fencing token: bumped each time any instance takes this consumer's lease, so a
    /// later holder's is always greater than an earlier one's.
    var epoch: Int64 { get }
    /// Checks with the server that the lease is still held (rate-limited: a check made less
    /// than about a second ago stands), so a holder whose session ended learns it before it
    /// handles more.
    /// - Throws: ``ConsumerError/leaseLost(consumer:reason:)`` when it is not.
    func confirm() throws(ConsumerError)
}
