import KernelPrimitives
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The names of the files a store's named consumers keep in `<store>/consumers/`: the one
/// place that knows them, for EventKernel's consumers (which write them) and for
/// ``SegmentedLog/removeStore(at:)`` (which must recognise them as the store's own).
///
/// - `<name>.checkpoint`: the consumer's committed position.
/// - `<name>.parked`: the events it parked after its handler failed on them.
/// - `<name>.lock`: locked (flock) by the one process that has the consumer open, so that
///   the CLI's reset, skip and `tail --consumer` refuse to change a consumer in use.
/// - `.<file>.<unique>.tmp`: the temporary of an atomic replacement of one of them, unique per
///   writer (process id and a counter) so that two processes never write the same temporary.
///
/// A consumer name is a file-name-safe token: 1 to 128 of `A-Z a-z 0-9 . _ -`, not starting
/// with `.` (so that it is never a hidden file, `.` or `..`).
package enum ConsumerFiles {
    /// The directory, relative to the store directory.
    package static let directoryName = "consumers"
    /// The suffix of a checkpoint file.
    package static let checkpointSuffix = ".checkpoint"
    /// The suffix of a parked-events file.
    package static let parkedSuffix = ".parked"
    /// The suffix of a consumer's lock file.
    package static let lockSuffix = ".lock"
    /// The longest name accepted.
    package static let maximumNameLength = 128

    /// Why `name` is not a consumer name, or `nil` when it is one.
    package static func problem(withName name: String) -> String? {
        if name.isEmpty { return "a consumer name cannot be empty" }
        if name.utf8.count > maximumNameLength {
            return "a consumer name has at most \(maximumNameLength) characters (got \(name.utf8.count))"
        }
        if name.hasPrefix(".") { return "a consumer name cannot start with \".\" (got \"\(name)\")" }
        if let bad = name.unicodeScalars.first(where: { !isNameCharacter($0) }) {
            return "a consumer name holds only A-Z, a-z, 0-9, \".\", \"_\" and \"-\" (got \"\(name)\", with \"\(bad.escaped(asASCII: true))\")"
        }
        return nil
    }

    /// The checkpoint file's name for consumer `name`.
    package static func checkpointFile(for name: String) -> String { name + checkpointSuffix }

    /// The parked-events file's name for consumer `name`.
    package static func parkedFile(for name: String) -> String { name + parkedSuffix }

    /// The lock file's name for consumer `name`.
    package static func lockFile(for name: String) -> String { name + lockSuffix }

    private static let temporaries = Locked<UInt64>(0)

    /// A temporary for replacing `file` atomically: hidden (listings skip it) and unique to
    /// this call (process id, counter), so concurrent writers never clobber each other's.
    package static func temporaryFile(for file: String) -> String {
        let serial = temporaries.withLock { counter -> UInt64 in
            counter += 1
            return counter
        }
        return "." + file + ".\(getpid())-\(serial).tmp"
    }

    /// The consumer a file belongs to, when `file` is a checkpoint or parked-events file.
    package static func consumerName(ofFile file: String) -> String? {
        for suffix in [checkpointSuffix, parkedSuffix] where file.hasSuffix(suffix) {
            let name = String(file.dropLast(suffix.count))
            return problem(withName: name) == nil ? name : nil
        }
        return nil
    }

    /// Whether `file` (an entry of `consumers/`) is one the consumers write: a checkpoint, a
    /// parked list, a lock, or the temporary of a checkpoint or parked list.
    package static func isOwnedFile(_ file: String) -> Bool {
        if file.hasPrefix("."), file.hasSuffix(".tmp") {
            let inner = String(file.dropFirst().dropLast(4))
            // `.<file>.<pid>-<n>.tmp`, or `.<file>.tmp` as earlier builds named it.
            if consumerName(ofFile: inner) != nil { return true }
            guard let dot = inner.lastIndex(of: ".") else { return false }
            return consumerName(ofFile: String(inner[..<dot])) != nil
        }
        if file.hasSuffix(lockSuffix) { return problem(withName: String(file.dropLast(lockSuffix.count))) == nil }
        return consumerName(ofFile: file) != nil
    }

    private static func isNameCharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "A"..."Z", "a"..."z", "0"..."9", ".", "_", "-": true
        default: false
        }
    }
}
