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

    /// Reads the file at `path` whole, or its first `limit` bytes, into a new array: one
    /// allocation of the file's size (`fstat(2)`), filled by `pread(2)`s of up to 8 MiB, then
    /// more if the file grew meanwhile. Foundation's `Data(contentsOf:)` and
    /// `FileHandle.readToEnd()` cost a second copy into `[UInt8]` (and `readToEnd` reads 4 KiB
    /// at a time): for a 20 MB snapshot, thousands of calls and a 20 MB `memmove` more.
    /// - Parameters:
    ///   - path: The file.
    ///   - limit: The most bytes to read (`nil`: all of them).
    /// - Returns: The bytes: fewer than the size seen when the file shrank meanwhile.
    /// - Throws: ``SystemCallError`` (`"open"`, `"fstat"`, `"pread"`) with the `errno`.
    package static func readFile(at path: String, upTo limit: Int? = nil) throws(SystemCallError) -> [UInt8] {
        let descriptor = try open(path, flags: O_RDONLY)
        defer { close(descriptor) }
        var status = stat()
        _ = try run("fstat") { () -> Int32 in fstat(descriptor, &status) }
        let wanted = min(Int(status.st_size), limit ?? .max)
        var failure: SystemCallError?
        var bytes = [UInt8](unsafeUninitializedCapacity: max(wanted, 1)) { buffer, count in
            while count < wanted {
                let chunk = UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[count..<min(wanted, count + (8 << 20))])
                do {
                    let read = try Self.read(from: descriptor, atAbsoluteOffset: Int64(count), into: chunk)
                    if read == 0 { return }
                    count += read
                } catch let error as SystemCallError {
                    failure = error
                    return
                } catch {
                    // `do` does not infer its error type (without FullTypedThrows): this never runs.
                    preconditionFailure("read(from:atAbsoluteOffset:into:) throws SystemCallError only")
                }
            }
        }
        if let failure { throw failure }
        // Grown since the fstat: the rest, to the end (or the limit).
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 1)
        defer { chunk.deallocate() }
        var atEnd = bytes.count < wanted
        while !atEnd, bytes.count < limit ?? .max {
            let room = min(chunk.count, (limit ?? .max) - bytes.count)
            let read = try Self.read(from: descriptor, atAbsoluteOffset: Int64(bytes.count), into: UnsafeMutableRawBufferPointer(rebasing: chunk[..<room]))
            if read == 0 {
                atEnd = true
            } else {
                bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[..<read]))
            }
        }
        return bytes
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

extension SystemCall {
    /// Exchanges the directory entries `first` and `second` in one step (`renameat2(2)` with
    /// `RENAME_EXCHANGE` on Linux, `renamex_np(2)` with `RENAME_SWAP` on macOS): both names exist
    /// throughout, so a crash leaves either the old pair or the exchanged one.
    ///
    /// Linux: glibc declares `renameat2` only under `_GNU_SOURCE`, which Swift's Glibc module
    /// does not set, so it is looked up at run time (glibc 2.28 and later have it); without it
    /// the call fails with `ENOSYS`, as on a kernel without the system call.
    /// - Throws: ``SystemCallError`` (`"renameat2"` or `"renamex_np"`) with the `errno`:
    ///   `EINVAL` or `ENOTSUP` where the file system cannot exchange, `ENOSYS` where the system cannot.
    package static func exchange(_ first: String, _ second: String) throws(SystemCallError) {
        #if canImport(Glibc)
        typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
        guard let symbol = renameat2Symbol else { throw SystemCallError(call: "renameat2", errorNumber: ENOSYS) }
        let renameat2 = unsafeBitCast(symbol, to: RenameAt2.self)
        // RENAME_EXCHANGE, from <linux/fs.h>.
        let exchange: UInt32 = 1 << 1
        _ = try run("renameat2") { () -> Int32 in renameat2(AT_FDCWD, first, AT_FDCWD, second, exchange) }
        #else
        _ = try run("renamex_np") { () -> Int32 in renamex_np(first, second, UInt32(RENAME_SWAP)) }
        #endif
    }

    #if canImport(Glibc)
    /// `renameat2` from the C library, looked up once.
    nonisolated(unsafe) private static let renameat2Symbol: UnsafeMutableRawPointer? = dlsym(dlopen(nil, RTLD_NOW), "renameat2")
    #endif
}
