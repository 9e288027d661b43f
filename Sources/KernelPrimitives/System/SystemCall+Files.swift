#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The file calls every layer makes, each retried on `EINTR` by ``SystemCall/run(_:_:)-(_,()->Int)``.
///
/// They are named after where the bytes go (`read(from:into:)`, `write(to:from:)`) and spelled
/// once here because a type with an `open` or `read` method of its own cannot call the C function
/// unqualified, and qualifying it means `Glibc.` on Linux and `Darwin.` on macOS: every such
/// caller used to carry both spellings.
extension SystemCall {
    /// Opens `path` (`open(2)`), adding `O_CLOEXEC` so that no child process inherits it.
    /// - Parameters:
    ///   - path: The file.
    ///   - flags: `open(2)` flags.
    ///   - mode: The permissions of a file `O_CREAT` creates.
    /// - Returns: The descriptor.
    /// - Throws: ``SystemCallError`` (`"open"`) with the `errno`.
    package static func open(_ path: String, flags: Int32, mode: UInt32 = 0o644) throws(SystemCallError) -> Int32 {
        try run("open") { () -> Int32 in
            #if canImport(Glibc)
            Glibc.open(path, flags | O_CLOEXEC, mode_t(mode))
            #else
            Darwin.open(path, flags | O_CLOEXEC, mode_t(mode))
            #endif
        }
    }

    /// Reads up to `buffer.count` bytes from `descriptor` at its offset (`read(2)`).
    /// - Returns: How many bytes were read; 0 at the end of the file or stream.
    /// - Throws: ``SystemCallError`` (`"read"`) with the `errno`.
    package static func read(from descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int {
        try run("read") { () -> Int in
            #if canImport(Glibc)
            Glibc.read(descriptor, buffer.baseAddress, buffer.count)
            #else
            Darwin.read(descriptor, buffer.baseAddress, buffer.count)
            #endif
        }
    }

    /// Reads up to `buffer.count` bytes from `descriptor` at `offset`, leaving its offset alone
    /// (`pread(2)`).
    /// - Returns: How many bytes were read; 0 at the end of the file.
    /// - Throws: ``SystemCallError`` (`"pread"`) with the `errno`.
    package static func read(from descriptor: Int32, atAbsoluteOffset offset: Int64,
                             into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int {
        try run("pread") { () -> Int in
            #if canImport(Glibc)
            Glibc.pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
            #else
            Darwin.pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
            #endif
        }
    }

    /// Writes up to `bytes.count` bytes to `descriptor` at its offset (`write(2)`).
    /// - Returns: How many bytes were written; may be fewer than asked.
    /// - Throws: ``SystemCallError`` (`"write"`) with the `errno`.
    package static func write(to descriptor: Int32, from bytes: UnsafeRawBufferPointer) throws(SystemCallError) -> Int {
        try run("write") { () -> Int in
            #if canImport(Glibc)
            Glibc.write(descriptor, bytes.baseAddress, bytes.count)
            #else
            Darwin.write(descriptor, bytes.baseAddress, bytes.count)
            #endif
        }
    }

    /// Closes `descriptor` (`close(2)`). Not retried: after `EINTR` the descriptor's state is
    /// unspecified on Linux and it must not be closed again (another thread may own the number).
    package static func close(_ descriptor: Int32) {
        #if canImport(Glibc)
        _ = Glibc.close(descriptor)
        #else
        _ = Darwin.close(descriptor)
        #endif
    }
}
