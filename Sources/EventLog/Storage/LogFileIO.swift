#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KernelPrimitives

/// The system calls through which ``SegmentedLog`` changes files: writes, syncs, sizing.
///
/// The log calls the operating system only through this protocol so that tests can inject
/// short writes, `EIO` and `ENOSPC` (see ``SegmentedLog/Configuration/fileIO``). Reads are not
/// routed through it; damage on read is simulated by damaging files.
///
/// Each method reports failure by throwing a ``LogError`` with code ``LogError/Code/io`` and
/// the `errno`; a short write is reported by returning fewer bytes than asked.
public protocol LogFileIO: Sendable {
    /// Writes up to `bytes.count` bytes at `offset` (`pwrite(2)`).
    /// - Returns: How many bytes were written; may be fewer than asked.
    func write(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) -> Int
    /// Makes the file's data durable (`fdatasync(2)`).
    func synchronizeData(descriptor: Int32, path: String) throws(LogError)
    /// Makes the file's data and metadata durable (`fsync(2)`); also used on directories.
    func synchronize(descriptor: Int32, path: String) throws(LogError)
    /// Reserves space up to `length` bytes, extending the file with zeros (`fallocate(2)`).
    func preallocate(descriptor: Int32, path: String, length: Int64) throws(LogError)
    /// Sets the file's length (`ftruncate(2)`).
    func truncate(descriptor: Int32, path: String, length: Int64) throws(LogError)
}

/// The real system calls.
public struct PosixFileIO: LogFileIO {
    /// Creates the default file layer.
    public init() {}

    public func write(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) -> Int {
        do throws(SystemCallError) {
            return try SystemCall.run("pwrite") { pwrite(descriptor, bytes.baseAddress, bytes.count, off_t(offset)) }
        } catch {
            throw .system(error, file: path, offset: offset)
        }
    }

    public func synchronizeData(descriptor: Int32, path: String) throws(LogError) {
        #if canImport(Darwin)
        // On Darwin fsync does not reach the platter; F_FULLFSYNC does.
        if fcntl(descriptor, F_FULLFSYNC) == 0 { return }
        #endif
        do throws(SystemCallError) {
            #if canImport(Glibc)
            try SystemCall.run("fdatasync") { fdatasync(descriptor) }
            #else
            try SystemCall.run("fdatasync") { fsync(descriptor) }
            #endif
        } catch {
            throw .system(error, file: path)
        }
    }

    public func synchronize(descriptor: Int32, path: String) throws(LogError) {
        do throws(SystemCallError) {
            try SystemCall.run("fsync") { fsync(descriptor) }
        } catch where error.errorNumber == EINVAL || error.errorNumber == EBADF {
            // Some file systems refuse fsync on directories; durability there is the FS's own.
        } catch {
            throw .system(error, file: path)
        }
    }

    public func preallocate(descriptor: Int32, path: String, length: Int64) throws(LogError) {
        #if canImport(Glibc)
        // Mode 0 extends the file size so that later writes inside it change no size metadata:
        // fdatasync then flushes data alone, which roughly halves its latency on ext4.
        // posix_fallocate is fallocate(2) with mode 0 on file systems that support it.
        do throws(SystemCallError) {
            try SystemCall.run(returningErrorNumber: "fallocate") { posix_fallocate(descriptor, 0, off_t(length)) }
        } catch where [EOPNOTSUPP, ENOSYS, EINVAL].contains(error.errorNumber) {
            // Preallocation is an optimisation: a file system without it is no failure.
        } catch {
            throw .system(error, file: path)
        }
        #else
        _ = (descriptor, path, length)
        #endif
    }

    public func truncate(descriptor: Int32, path: String, length: Int64) throws(LogError) {
        do throws(SystemCallError) {
            try SystemCall.run("ftruncate") { ftruncate(descriptor, off_t(length)) }
        } catch {
            throw .system(error, file: path)
        }
    }
}

extension LogFileIO {
    /// Writes all of `bytes`, continuing after short writes; a write that makes no progress is
    /// an error (as `ENOSPC` would be).
    func writeAll(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) {
        var done = 0
        while done < bytes.count {
            let n = try write(UnsafeRawBufferPointer(rebasing: bytes[done...]), toAbsoluteOffset: offset + Int64(done), descriptor: descriptor, path: path)
            if n <= 0 {
                throw LogError(.io, "write made no progress after \(done) of \(bytes.count) bytes", file: path, offset: offset + Int64(done))
            }
            done += n
        }
    }
}

/// An open file, closed when the last reference goes away, so that a reader holding a segment
/// can finish its `pread` while the writer rolls or the log closes.
final class OpenFile: Sendable {
    let descriptor: Int32
    let path: String

    init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    /// Opens `path`; `flags` as for `open(2)`.
    static func open(_ path: String, flags: Int32, mode: mode_t = 0o644) throws(LogError) -> OpenFile {
        do throws(SystemCallError) {
            return OpenFile(descriptor: try SystemCall.open(path, flags: flags, mode: UInt32(mode)), path: path)
        } catch {
            let code: LogError.Code = (error.errorNumber == ENOENT || error.errorNumber == ENOTDIR) ? .notAStore : .io
            throw LogError(code, "cannot open \(path)", file: path, systemErrorNumber: error.errorNumber)
        }
    }

    deinit { SystemCall.close(descriptor) }

    /// The file's current size.
    func size() throws(LogError) -> Int64 {
        var st = stat()
        do throws(SystemCallError) {
            try SystemCall.run("fstat") { fstat(descriptor, &st) }
        } catch {
            throw .system(error, file: path)
        }
        return Int64(st.st_size)
    }

    /// Whether `other` is open on the same file as this one (device and inode). Both are held
    /// open, so neither number can have been given to another file meanwhile. `false` when
    /// either cannot be examined.
    func isSameFile(as other: OpenFile) -> Bool {
        var mine = stat(), theirs = stat()
        guard fstat(descriptor, &mine) == 0, fstat(other.descriptor, &theirs) == 0 else { return false }
        return mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino
    }

    /// Whether `path` names this very file now (same device and inode) and the file is
    /// `size` bytes long: false when the name was renamed over (a rewritten segment), removed,
    /// or the file changed length. A refresh reuses what it knows of a sealed segment only
    /// then: a descriptor on a file that was replaced keeps reading the old one forever.
    func isStill(at path: String, size: Int64) throws(LogError) -> Bool {
        var held = stat()
        do throws(SystemCallError) {
            try SystemCall.run("fstat") { fstat(descriptor, &held) }
        } catch {
            throw .system(error, file: self.path)
        }
        var named = stat()
        // A name that cannot be looked up now is not this file: the caller loads afresh and
        // reports what that finds.
        guard stat(path, &named) == 0 else { return false }
        return named.st_dev == held.st_dev && named.st_ino == held.st_ino && Int64(held.st_size) == size
    }

    /// Reads exactly `buffer.count` bytes at `offset`, or fewer only at end of file.
    /// - Returns: The number of bytes read.
    func read(fromAbsoluteOffset offset: Int64, into buffer: UnsafeMutableRawBufferPointer) throws(LogError) -> Int {
        var done = 0
        while done < buffer.count {
            let n: Int
            do throws(SystemCallError) {
                n = try SystemCall.run("pread") { pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset + Int64(done))) }
            } catch {
                throw .system(error, file: path, offset: offset + Int64(done))
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Reads `count` bytes at `offset` into a new array; fewer only at end of file.
    func read(fromAbsoluteOffset offset: Int64, count: Int) throws(LogError) -> [UInt8] {
        // Not zeroed first: the read writes every byte it returns, and zeroing a whole segment
        // (a backup reads each at once) touched every page a second time (perf: 2% of a backup).
        var result: Result<Int, LogError> = .success(0)
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            result = Result { () throws(LogError) -> Int in try read(fromAbsoluteOffset: offset, into: UnsafeMutableRawBufferPointer(buffer)) }
            initialized = (try? result.get()) ?? 0
        }
        _ = try result.get()
        return bytes
    }
}
