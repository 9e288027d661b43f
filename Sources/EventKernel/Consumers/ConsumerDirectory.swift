public import Foundation
public import EventLog
import KernelPrimitives
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The `<store>/consumers/` directory: each consumer's checkpoint (`<name>.checkpoint`) and
/// parked events (`<name>.parked`), each replaced atomically (a temporary file unique to the
/// writer, fsync, rename, directory fsync) and checked (CRC-32C, format, name) when read; and
/// each consumer's lock file (`<name>.lock`, `ConsumerLock`). File names: `ConsumerFiles`.
///
/// The store's consumers use it; so do the `eventkernel consumers`, `tail --consumer` and
/// `verify` commands, which read and reset consumers without opening the store for writing.
public struct ConsumerDirectory: Sendable {
    /// The directory holding the consumer files.
    public let url: URL
    private let fileIO: any LogFileIO

    /// Creates a handle for `<storeDirectory>/consumers/` (created on first write).
    /// - Parameters:
    ///   - storeDirectory: The store directory.
    ///   - fileIO: The system-call layer for writes and syncs (the store passes its log's).
    public init(storeDirectory: URL, fileIO: any LogFileIO = PosixFileIO()) {
        self.url = storeDirectory.appendingPathComponent(ConsumerFiles.directoryName, isDirectory: true)
        self.fileIO = fileIO
    }

    /// The path of a consumer file.
    func path(_ file: String) -> String { url.appendingPathComponent(file).path }

    /// The consumer's checkpoint, or `nil` when it has none.
    /// - Parameter name: The consumer's name (valid).
    /// - Throws: ``ConsumerError/damagedFile(path:reason:)`` when the file fails its checks,
    ///   ``ConsumerError/fileFailed(path:reason:)`` when it cannot be read.
    public func checkpoint(named name: String) throws(ConsumerError) -> ConsumerCheckpoint? {
        let file = path(ConsumerFiles.checkpointFile(for: name))
        guard let bytes = try read(file) else { return nil }
        let checkpoint: ConsumerCheckpoint
        do { checkpoint = try ConsumerCheckpoint(decoding: bytes) } catch {
            throw .damagedFile(path: file, reason: error.reason)
        }
        guard checkpoint.name == name else {
            throw .damagedFile(path: file, reason: "it records consumer \"\(checkpoint.name)\", not \"\(name)\"")
        }
        return checkpoint
    }

    /// Replaces the consumer's checkpoint atomically and durably.
    /// - Parameter checkpoint: The new checkpoint.
    /// - Throws: ``ConsumerError/fileFailed(path:reason:)``.
    public func write(_ checkpoint: ConsumerCheckpoint) throws(ConsumerError) {
        try replace(ConsumerFiles.checkpointFile(for: checkpoint.name), with: checkpoint.encoded())
    }

    /// The consumer's parked events, in position order (none when it has no file).
    /// - Parameter name: The consumer's name (valid).
    /// - Throws: ``ConsumerError/damagedFile(path:reason:)``, ``ConsumerError/fileFailed(path:reason:)``.
    public func parked(named name: String) throws(ConsumerError) -> [ParkedEvent] {
        let file = path(ConsumerFiles.parkedFile(for: name))
        guard let bytes = try read(file) else { return [] }
        let decoded: (consumer: String, events: [ParkedEvent])
        do { decoded = try ParkedEvent.decode(bytes) } catch {
            throw .damagedFile(path: file, reason: error.reason)
        }
        guard decoded.consumer == name else {
            throw .damagedFile(path: file, reason: "it records consumer \"\(decoded.consumer)\", not \"\(name)\"")
        }
        return decoded.events
    }

    /// Replaces the consumer's parked events atomically and durably (an empty list removes the file).
    /// - Parameters:
    ///   - events: The parked events.
    ///   - name: The consumer's name (valid).
    /// - Throws: ``ConsumerError/fileFailed(path:reason:)``.
    public func writeParked(_ events: [ParkedEvent], named name: String) throws(ConsumerError) {
        let file = ConsumerFiles.parkedFile(for: name)
        guard !events.isEmpty else {
            guard FileManager.default.fileExists(atPath: path(file)) else { return }
            do {
                try SystemCall.run("unlink") { unlink(path(file)) }
                try synchronizeDirectory(url.path)
            } catch let error as ConsumerError {
                throw error
            } catch {
                throw .fileFailed(path: path(file), reason: "\(error)")
            }
            return
        }
        try replace(file, with: ParkedEvent.encode(events.sorted { $0.position < $1.position }, consumer: name))
    }

    /// The names of the consumers with a checkpoint or parked events here, sorted.
    /// - Throws: ``ConsumerError/fileFailed(path:reason:)`` when the directory cannot be listed.
    public func names() throws(ConsumerError) -> [String] {
        guard FileManager.default.fileExists(atPath: url.path) else { return [] }
        let entries: [String]
        do { entries = try FileManager.default.contentsOfDirectory(atPath: url.path) } catch {
            throw .fileFailed(path: url.path, reason: "\(error)")
        }
        return Set(entries.compactMap(ConsumerFiles.consumerName(ofFile:))).sorted()
    }

    /// The files here that are not a consumer's (a user's file, a subdirectory): verify reports them.
    public func foreignFiles() -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return entries.filter { !ConsumerFiles.isOwnedFile($0) }.sorted()
    }

    private func read(_ file: String) throws(ConsumerError) -> [UInt8]? {
        guard FileManager.default.fileExists(atPath: file) else { return nil }
        do { return Array(try Data(contentsOf: URL(filePath: file))) } catch {
            throw .fileFailed(path: file, reason: "\(error)")
        }
    }

    /// As ``write(_:)``: the lock file is held by its process, whichever handle wrote.
    package func write(_ checkpoint: ConsumerCheckpoint, under lock: ConsumerLock?) throws(ConsumerError) {
        try write(checkpoint)
    }

    /// As ``writeParked(_:named:)``: the lock file is held by its process, whichever handle wrote.
    package func writeParked(_ events: [ParkedEvent], named name: String, under lock: ConsumerLock?) throws(ConsumerError) {
        try writeParked(events, named: name)
    }

    /// Takes the consumer's lock (see ``ConsumerLock``).
    package func lock(consumer name: String) throws(ConsumerError) -> ConsumerLock? {
        try ConsumerLock(consumer: name, in: self)
    }

    /// Creates the directory if it is missing, and then syncs the store directory: a file
    /// synced inside a directory whose own entry is not durable can vanish with it.
    func createIfNeeded() throws(ConsumerError) {
        guard !FileManager.default.fileExists(atPath: url.path) else { return }
        do { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) } catch {
            throw .fileFailed(path: url.path, reason: "cannot create the directory: \(error)")
        }
        try synchronizeDirectory(url.deletingLastPathComponent().path)
    }

    private func replace(_ file: String, with bytes: [UInt8]) throws(ConsumerError) {
        try createIfNeeded()
        do {
            try StoreDirectory.writeAtomically(bytes, directory: url.path, name: file,
                                               temporaryName: ConsumerFiles.temporaryFile(for: file), io: fileIO)
        } catch {
            throw .fileFailed(path: path(file), reason: "\(error)")
        }
    }

    private func synchronizeDirectory(_ directory: String) throws(ConsumerError) {
        do {
            let descriptor = try SystemCall.run("open") { open(directory, O_RDONLY) }
            defer { close(descriptor) }
            try fileIO.synchronize(descriptor: descriptor, path: directory)
        } catch {
            throw .fileFailed(path: directory, reason: "syncing the directory failed: \(error)")
        }
    }
}

extension ConsumerDirectory: ConsumerStorage {}
