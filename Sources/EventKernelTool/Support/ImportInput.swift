import EventLog
import Foundation
import KernelPrimitives
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The bytes an import reads: a file, or standard input (`-` or `/dev/stdin`), with what
/// identifies them across runs.
///
/// Opening reads the input once, a chunk at a time: it computes ``identity``, refuses invalid
/// UTF-8, and copies an input that cannot be read again (standard input, a pipe, a process
/// substitution, a device) to an unlinked temporary file, so that the checking pass and the
/// appending pass can each read it from the start with ``lines()``. Memory stays a chunk (and
/// the longest line) whatever the input's size.
final class ImportInput {
    /// The bytes read at a time (1 MiB): large enough that a read costs nothing per line.
    static let defaultChunkSize = 1 << 20

    /// What messages call the input: the path as given, or `<stdin>`.
    let name: String
    /// Whether the input was standard input.
    let isStandardInput: Bool
    /// Whether the same command can read the same bytes again (a regular file: not standard
    /// input, a pipe, a process substitution or a device). The import itself reads an input
    /// that cannot be read again from its temporary copy.
    let canBeReadAgain: Bool
    /// What identifies these bytes in the store's import markers: their length and two
    /// independent checksums (CRC32C and FNV-1a, 96 bits), so that the same content read
    /// again (from the same file, a copy, or the same pipe) resumes where it stopped, and
    /// different content never does.
    let identity: String
    /// How many bytes the input held when it was opened: what ``lines()`` reads.
    let count: Int
    /// The CRC32C of those bytes, which ``lines()`` compares at its end (a file changed since).
    let checksum: UInt32
    /// The bytes ``lines()`` reads at a time.
    let chunkSize: Int
    /// The file, or the temporary copy of an input that cannot be read again.
    private let descriptor: Int32

    private init(name: String, isStandardInput: Bool, canBeReadAgain: Bool, scan: Scan, chunkSize: Int, descriptor: Int32) {
        self.name = name
        self.isStandardInput = isStandardInput
        self.canBeReadAgain = canBeReadAgain
        self.identity = scan.identity
        self.count = scan.count
        self.checksum = scan.crc
        self.chunkSize = chunkSize
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Opens and reads all of `argument`: `-` and `/dev/stdin` read standard input; anything
    /// else is a path, opened with open(2) so that a pipe or a process substitution (`<(…)`)
    /// reads too.
    /// - Parameters:
    ///   - argument: The path, `-` or `/dev/stdin`.
    ///   - chunkSize: The bytes read at a time (tests pass a few, to put chunk boundaries
    ///     inside lines and characters).
    ///   - spoolDirectory: Where the copy of an input that cannot be read again is made
    ///     (`$TMPDIR`, else `/tmp`); it is unlinked as soon as it is created, so that it is
    ///     gone when the import ends, however it ends.
    /// - Throws: ``ToolError``: exit 1 naming the path and what is wrong (no such file, a
    ///   directory, no permission, a read error), or the line, the byte of the line and the
    ///   byte offset of the first invalid UTF-8 (never replaced by U+FFFD: an import stores
    ///   exactly what the file says, or nothing); exit 4 when the copy cannot be written.
    static func open(_ argument: String, chunkSize: Int = defaultChunkSize,
                     spoolDirectory: URL = FileManager.default.temporaryDirectory) throws -> ImportInput {
        precondition(chunkSize > 0)
        let isStandardInput = argument == "-" || argument == "/dev/stdin"
        let name = argument == "-" ? "<stdin>" : argument
        var source = STDIN_FILENO
        var regular = false
        if !isStandardInput {
            do throws(SystemCallError) { source = try SystemCall.open(argument, flags: O_RDONLY) } catch {
                throw failure(argument, error.errorNumber)
            }
            var status = stat()
            guard fstat(source, &status) == 0 else { let number = errno; close(source); throw failure(argument, number) }
            if (status.st_mode & S_IFMT) == S_IFDIR { close(source); throw failure(argument, EISDIR) }
            // A regular file opened at an offset other than its start (on macOS, opening
            // /dev/fd/N shares that descriptor's offset) is read through a copy too: the
            // appending pass reads a regular file with pread from offset 0.
            regular = (status.st_mode & S_IFMT) == S_IFREG && lseek(source, 0, SEEK_CUR) == 0
        }
        // A regular file is read again from its start; anything else (standard input, even
        // redirected from a file, may not be at its start) through a copy.
        var spool: Int32?
        if !regular {
            do throws(SystemCallError) { spool = try makeSpool(in: spoolDirectory) } catch {
                if !isStandardInput { close(source) }
                throw spoolFailure(name, spoolDirectory, error)
            }
        }
        var scan = Scan()
        do {
            var buffer = [UInt8](repeating: 0, count: chunkSize)
            try buffer.withUnsafeMutableBytes { bytes in
                while true {
                    let count: Int
                    do throws(SystemCallError) {
                        count = try SystemCall.read(from: source, into: bytes)
                    } catch {
                        throw failure(name, error.errorNumber)
                    }
                    if count == 0 { break }
                    let chunk = UnsafeRawBufferPointer(rebasing: bytes[0..<count])
                    if let invalid = scan.add(chunk) { throw invalidUTF8(name, invalid) }
                    if let spool {
                        do throws(SystemCallError) { try writeAll(spool, chunk) } catch {
                            throw spoolFailure(name, spoolDirectory, error)
                        }
                    }
                }
            }
            if let invalid = scan.end() { throw invalidUTF8(name, invalid) }
        } catch {
            if let spool { close(spool) }
            if !isStandardInput { close(source) }
            throw error
        }
        if spool != nil, !isStandardInput { close(source) }
        return ImportInput(name: name, isStandardInput: isStandardInput, canBeReadAgain: regular && !isStandardInput,
                           scan: scan, chunkSize: chunkSize, descriptor: spool ?? source)
    }

    /// The input's lines, read again from its start.
    func lines() -> Lines { Lines(self) }

    /// The lines of an ``ImportInput``, a chunk at a time, numbered from 1 as the import names
    /// them.
    ///
    /// A line ends at a line feed, except one right after a carriage return: the import read
    /// its input as a Swift `String` split at `"\n"`, where CR LF is one `Character` that is not
    /// `"\n"`, and line numbers (in messages and in the import markers of stores) must stay
    /// those. The final line feed ends the last line rather than starting an empty one; an
    /// empty input is one blank line.
    struct Lines {
        private let input: ImportInput
        private var buffer: [UInt8]
        /// The unread bytes of `buffer`: `position..<filled`.
        private var position = 0
        private var filled = 0
        /// The input's offset of the byte after `buffer`'s.
        private var offset = 0
        /// Whether the byte before `buffer`'s first was a carriage return.
        private var afterCR = false
        /// The start of a line that began in an earlier chunk.
        private var partial: [UInt8] = []
        private var finished = false
        /// What messages call the input.
        var inputName: String { input.name }
        /// The number of the last line returned (0: none yet).
        private(set) var number = 0
        /// The CRC32C of the input's bytes through the last line returned, its line feed
        /// included: equal in two reads of the same bytes at the same line.
        private(set) var checksum: UInt32 = 0

        fileprivate init(_ input: ImportInput) {
            self.input = input
            buffer = [UInt8](repeating: 0, count: min(input.chunkSize, max(input.count, 1)))
        }

        /// The next line without its line feed, or `nil` after the last.
        /// - Throws: ``ToolError`` (exit 4) when the input can no longer be read, or (exit 1)
        ///   when it no longer holds the bytes it held when it was opened: a file changed
        ///   meanwhile (the import checks and appends exactly the bytes its identity names).
        mutating func next() throws -> String? {
            while true {
                if position == filled {
                    if offset == input.count { return try finish() }
                    try refill()
                }
                var search = position
                while let found = lineFeed(from: search) {
                    if found > 0 ? buffer[found - 1] == 0x0D : afterCR { search = found + 1; continue }
                    let line: String
                    if partial.isEmpty {
                        line = String(decoding: buffer[position..<found], as: UTF8.self)
                    } else {
                        partial.append(contentsOf: buffer[position..<found])
                        line = String(decoding: partial, as: UTF8.self)
                        // A very long line's buffer is not kept for the rest of the input.
                        partial.removeAll(keepingCapacity: partial.capacity <= 4 * input.chunkSize)
                    }
                    consume(through: found + 1)
                    number += 1
                    return line
                }
                // The line goes on in the next chunk.
                partial.append(contentsOf: buffer[position..<filled])
                consume(through: filled)
            }
        }

        /// The index of the first line feed of `buffer[from..<filled]`.
        private func lineFeed(from start: Int) -> Int? {
            buffer.withUnsafeBytes { bytes in
                guard start < filled, let found = memchr(bytes.baseAddress! + start, 0x0A, filled - start) else { return nil }
                return bytes.baseAddress!.distance(to: UnsafeRawPointer(found))
            }
        }

        /// Marks `buffer[position..<end]` read, adding it to ``checksum``.
        private mutating func consume(through end: Int) {
            let start = position
            checksum = buffer.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[start..<end]), continuing: checksum) }
            position = end
        }

        private mutating func finish() throws -> String? {
            guard !finished else { return nil }
            finished = true
            // Every byte is read: they must be those the identity names.
            guard checksum == input.checksum else { throw input.changed() }
            guard !partial.isEmpty || input.count == 0 else { return nil }
            number += 1
            defer { partial = [] }
            return String(decoding: partial, as: UTF8.self)
        }

        private mutating func refill() throws {
            if filled > 0 { afterCR = buffer[filled - 1] == 0x0D }
            let wanted = min(buffer.count, input.count - offset)
            let descriptor = input.descriptor, at = offset
            let count: Int
            do {
                count = try buffer.withUnsafeMutableBytes { bytes throws(SystemCallError) in
                    try SystemCall.read(from: descriptor, atAbsoluteOffset: Int64(at),
                                        into: UnsafeMutableRawBufferPointer(rebasing: bytes[0..<wanted]))
                }
            } catch let error as SystemCallError {
                throw failure(input.name, error.errorNumber)
            } catch {
                throw failure(input.name, EIO)  // withUnsafeMutableBytes rethrows only what the call threw
            }
            guard count > 0 else { throw input.changed() }
            position = 0
            filled = count
            offset += count
        }
    }

    /// The refusal when the input no longer holds what it held when opened.
    func changed() -> ToolError {
        ToolError(.badInput, "\(name) changed while it was being imported (it no longer holds the \(count) bytes it held when the import began)")
    }

    /// Computes what opening an input needs of every byte, a chunk at a time: the length, the
    /// checksums of ``ImportInput/identity`` and where the first invalid UTF-8 sequence starts.
    struct Scan {
        private(set) var count = 0
        private(set) var crc: UInt32 = 0
        private(set) var fnv = FNV1a64()
        /// The continuation bytes the UTF-8 sequence begun at `sequenceStart` still needs,
        /// and the range the next one must be in (Unicode's table 3-7 of well-formed UTF-8).
        private var needed = 0
        private var low: UInt8 = 0x80
        private var high: UInt8 = 0xBF
        private var sequenceStart = 0
        /// The line (from 1) and the offset of its first byte, where the scan is.
        private var line = 1
        private var lineStart = 0

        /// The input's identity: `<length>-<CRC32C, 8 hex digits><FNV-1a 64, 16 hex digits>`.
        var identity: String {
            "\(count)-\(String(format: "%08x", crc))\(String(format: "%016llx", fnv.value))"
        }

        /// Adds the next bytes of the input.
        /// - Returns: Where the first invalid UTF-8 sequence starts (line from 1, byte of the
        ///   line from 1, byte offset in the input from 0) when these bytes hold one.
        mutating func add(_ bytes: UnsafeRawBufferPointer) -> (line: Int, column: Int, offset: Int)? {
            crc = CRC32C.checksum(bytes, continuing: crc)
            var fnv = self.fnv
            defer { self.fnv = fnv; count += bytes.count }
            for (index, byte) in bytes.enumerated() {
                fnv.add(byte)
                if needed > 0 {
                    guard byte >= low, byte <= high else { return (line, sequenceStart - lineStart + 1, sequenceStart) }
                    needed -= 1
                    (low, high) = (0x80, 0xBF)
                    continue
                }
                if byte < 0x80 {
                    if byte == 0x0A { line += 1; lineStart = count + index + 1 }
                    continue
                }
                sequenceStart = count + index
                switch byte {
                case 0xC2...0xDF: (needed, low, high) = (1, 0x80, 0xBF)
                case 0xE0: (needed, low, high) = (2, 0xA0, 0xBF)
                case 0xED: (needed, low, high) = (2, 0x80, 0x9F)  // not a surrogate
                case 0xE1...0xEF: (needed, low, high) = (2, 0x80, 0xBF)
                case 0xF0: (needed, low, high) = (3, 0x90, 0xBF)
                case 0xF1...0xF3: (needed, low, high) = (3, 0x80, 0xBF)
                case 0xF4: (needed, low, high) = (3, 0x80, 0x8F)  // at most U+10FFFF
                default: return (line, sequenceStart - lineStart + 1, sequenceStart)
                }
            }
            return nil
        }

        /// Ends the input: a sequence it cuts short is invalid.
        func end() -> (line: Int, column: Int, offset: Int)? {
            needed > 0 ? (line, sequenceStart - lineStart + 1, sequenceStart) : nil
        }
    }

    private static func invalidUTF8(_ name: String, _ at: (line: Int, column: Int, offset: Int)) -> ToolError {
        ToolError(.badInput, "\(name):\(at.line): invalid UTF-8 at byte \(at.column) of the line (byte offset \(at.offset) in the file)\nnothing was imported")
    }

    private static func spoolFailure(_ name: String, _ directory: URL, _ error: SystemCallError) -> ToolError {
        ToolError(.io, "\(name) can be read only once, so import copies it to a temporary file in \(directory.path) (set TMPDIR to choose the directory): \(error.call) failed: \(String(cString: strerror(error.errorNumber)).lowercased())")
    }

    /// An unlinked temporary file in `directory`, open for reading and writing.
    ///
    /// On Linux it is made without a name at all (`O_TMPFILE`), so that nothing can leave it
    /// behind; where the file system or kernel lacks that, and on macOS, it is made with
    /// `mkstemp` and unlinked at once (a signal between the two would leave an empty file).
    private static func makeSpool(in directory: URL) throws(SystemCallError) -> Int32 {
        #if os(Linux)
        do throws(SystemCallError) {
            // O_TMPFILE is a macro Swift does not import: __O_TMPFILE (the same on every Linux
            // architecture Swift runs on) with O_DIRECTORY (which differs between them).
            let temporaryFile: Int32 = 0o20_000_000 | O_DIRECTORY
            return try SystemCall.open(directory.path, flags: O_RDWR | temporaryFile, mode: 0o600)
        } catch where [EOPNOTSUPP, EISDIR, EINVAL].contains(error.errorNumber) {
            // Not supported here: the named file below.
        }
        #endif
        var template = Array(directory.appending(path: ".eventkernel-import-XXXXXX").path.utf8CString)
        let descriptor = try template.withUnsafeMutableBufferPointer { path throws(SystemCallError) in
            try SystemCall.run("mkstemp") { mkstemp(path.baseAddress!) }
        }
        // Unlinked at once: the space is freed when the descriptor closes, whatever ends the
        // process, and no other process can change the copy.
        _ = template.withUnsafeBufferPointer { unlink($0.baseAddress!) }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        return descriptor
    }

    private static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
        var done = 0
        while done < bytes.count {
            done += try SystemCall.write(to: descriptor, from: UnsafeRawBufferPointer(rebasing: bytes[done...]))
        }
    }

    private static func failure(_ name: String, _ number: Int32) -> ToolError {
        let what = switch number {
        case ENOENT: "no such file"
        case EISDIR: "is a directory (give a JSON Lines file, or - for standard input)"
        case EACCES, EPERM: "permission denied"
        default: String(cString: strerror(number)).lowercased()
        }
        return ToolError(.badInput, "\(name): \(what)")
    }
}
