#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
package import KernelPrimitives

/// The one error type thrown by the `EventLog` module.
///
/// Modelled on swift-nio's `FileSystemError`: a machine-readable ``Code``, a human-readable
/// message, and, where they apply, the file, byte offset and log position where the problem
/// was found, plus the operating-system error number that caused it.
///
/// ```swift
/// do { _ = try await log.append([entry]) }
/// catch let error as LogError where error.code == .locked { ... }
/// ```
public struct LogError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Stable: scripts and callers may switch on it.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable name of the code, as printed in messages (`"corruption"`, `"locked"`, ...).
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// A system call failed (see ``LogError/systemErrorNumber``).
        public static let io = Code("io")
        /// Stored bytes failed a check: bad magic, checksum mismatch, impossible lengths, gaps.
        public static let corruption = Code("corruption")
        /// Another writer holds the store's lock.
        public static let locked = Code("locked")
        /// The log was closed, or is closing.
        public static let closed = Code("closed")
        /// A previous write or sync failed; nothing more is acknowledged until the log is reopened.
        public static let poisoned = Code("poisoned")
        /// The log was opened read-only and a write was attempted.
        public static let readOnly = Code("read-only")
        /// An argument was out of range or malformed (a timestamp, a position, an empty batch).
        public static let invalidArgument = Code("invalid-argument")
        /// A record or batch exceeds the format's limits.
        public static let tooLarge = Code("too-large")
        /// The directory is not a store, does not exist, or is not a directory.
        public static let notAStore = Code("not-a-store")
        /// The files were written by a newer, unknown format version.
        public static let unsupportedVersion = Code("unsupported-version")
        /// Compression or decompression failed.
        public static let compression = Code("compression")
        /// A shared log refused an append because another writer changed what it was decided on
        /// (a stream version taken by another instance); ``LogError/cause`` says which.
        public static let conflict = Code("conflict")
        /// The server holding a shared log could not be reached, or the connection was lost
        /// (the message names the host and whether an append's outcome is known).
        public static let unavailable = Code("unavailable")
        /// A backup destination holds another store's backup, another history's, a damaged
        /// manifest, or files that are not a backup's (Docs/Backups.md).
        public static let backupMismatch = Code("backup-mismatch")
    }

    /// What kind of failure this is.
    public var code: Code
    /// What happened, in words; ``description`` adds the location.
    public var message: String
    /// The file involved, when one is.
    public var file: String?
    /// The byte offset in ``file`` where the problem was found.
    public var offset: Int64?
    /// The log position involved (for corruption: the first position of the damaged batch).
    public var position: UInt64?
    /// The `errno` of the failed system call, for ``Code/io`` and ``Code/poisoned``.
    public var systemErrorNumber: Int32?
    /// The error underneath, kept as it was: a database driver's error for
    /// ``Code/unavailable``, the refused expectation for ``Code/conflict``.
    public var cause: (any Error & Sendable)?

    /// Creates an error.
    /// - Parameters:
    ///   - code: The kind of failure.
    ///   - message: What happened.
    ///   - file: The file involved, if any.
    ///   - offset: The byte offset in `file`, if known.
    ///   - position: The log position involved, if known.
    ///   - systemErrorNumber: The `errno` of a failed system call, if any.
    ///   - cause: The error underneath, if any.
    public init(
        _ code: Code, _ message: String, file: String? = nil, offset: Int64? = nil,
        position: UInt64? = nil, systemErrorNumber: Int32? = nil, cause: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.file = file
        self.offset = offset
        self.position = position
        self.systemErrorNumber = systemErrorNumber
        self.cause = cause
    }

    /// The message with its code and location, for example
    /// `corruption: payload checksum mismatch (file /data/00000000000000000000.log, offset 4096, position 1000)`.
    public var description: String {
        var where_: [String] = []
        if let file { where_.append("file \(file)") }
        if let offset { where_.append("offset \(offset)") }
        if let position { where_.append("position \(position)") }
        if let systemErrorNumber {
            where_.append("errno \(systemErrorNumber): \(String(cString: strerror(systemErrorNumber)))")
        }
        let suffix = where_.isEmpty ? "" : " (\(where_.joined(separator: ", ")))"
        return "\(code): \(message)\(suffix)"
    }

    /// A failed system call as an ``Code/io`` error at `file` (and `offset`).
    static func system(_ error: SystemCallError, file: String?, offset: Int64? = nil) -> LogError {
        LogError(.io, "\(error.call) failed", file: file, offset: offset, systemErrorNumber: error.errorNumber)
    }

    /// A compression failure as a log error: ``Code/tooLarge`` beyond LZ4's input limit,
    /// ``Code/compression`` otherwise.
    /// - Parameter error: The failure.
    package init(_ error: CompressionError) {
        self.init(error.kind == .tooLarge ? .tooLarge : .compression, error.message)
    }
}
