// The disk's floor for a durable append: what one synced append cannot beat.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A file in which each ``append()`` writes 100 bytes with `pwrite` and makes them durable with
/// `fdatasync`, into space reserved up front (as the log's active segment is): a bare loop of
/// the two system calls a synced append needs, with nothing else.
public final class SyncFloor: @unchecked Sendable {
    private let descriptor: Int32
    private var offset: off_t = 4096
    private let record = [UInt8](repeating: 0x5A, count: 100)
    private let path: String

    /// Creates the file in `directory` (created if missing) with 64 MiB reserved and synced.
    public init(directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appending(path: "floor.dat").path
        descriptor = open(path, O_RDWR | O_CREAT, 0o644)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        guard posix_fallocate(descriptor, 0, 64 << 20) == 0, fsync(descriptor) == 0 else {
            close(descriptor)
            throw POSIXError(.EIO)
        }
    }

    deinit { close(descriptor) }

    /// Writes and syncs one 100-byte record (wrapping around the reserved space).
    public func append() throws {
        let written = record.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, 100, offset) }
        guard written == 100, fdatasync(descriptor) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        offset += 100
        if offset > (64 << 20) - 100 { offset = 4096 }
    }
}
