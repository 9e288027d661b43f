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
struct ImportInput {
    /// What messages call the input: the path as given, or `<stdin>`.
    var name: String
    /// Whether the input was standard input.
    var isStandardInput: Bool
    /// Whether the same command can read the same bytes again (a regular file: not standard
    /// input, a pipe, a process substitution or a device).
    var canBeReadAgain: Bool
    /// Everything the input held.
    var data: Data

    /// Reads all of `argument`: `-` and `/dev/stdin` read standard input; anything else is a
    /// path, opened with open(2) so that a pipe or a process substitution (`<(…)`) reads too.
    /// - Throws: ``ToolError`` (exit 1) naming the path and what is wrong: no such file, a
    ///   directory, no permission, a read error.
    static func read(_ argument: String) throws -> ImportInput {
        if argument == "-" || argument == "/dev/stdin" {
            let data = try readAll(STDIN_FILENO, name: argument == "-" ? "<stdin>" : argument)
            return ImportInput(name: argument == "-" ? "<stdin>" : argument, isStandardInput: true, canBeReadAgain: false, data: data)
        }
        let descriptor = open(argument, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure(argument, errno) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw failure(argument, errno) }
        if (status.st_mode & S_IFMT) == S_IFDIR { throw failure(argument, EISDIR) }
        return ImportInput(name: argument, isStandardInput: false, canBeReadAgain: (status.st_mode & S_IFMT) == S_IFREG,
                           data: try readAll(descriptor, name: argument))
    }

    private static func readAll(_ descriptor: Int32, name: String) throws -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count: Int
            do {
                count = try buffer.withUnsafeMutableBytes { bytes throws(SystemCallError) in
                    try SystemCall.run("read") { systemRead(descriptor, bytes.baseAddress, bytes.count) }
                }
            } catch let error as SystemCallError {
                throw failure(name, error.errorNumber)
            } catch {
                throw failure(name, EIO)  // withUnsafeMutableBytes rethrows only what the call threw
            }
            if count == 0 { return data }
            data.append(contentsOf: buffer[0..<count])
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

    /// What identifies these bytes in the store's import markers: their length and two
    /// independent checksums (CRC32C and FNV-1a, 96 bits), so that the same content read
    /// again (from the same file, a copy, or the same pipe) resumes where it stopped, and
    /// different content never does.
    var identity: String {
        let crc = data.withUnsafeBytes { CRC32C.checksum($0) }
        var fnv: UInt64 = 0xcbf2_9ce4_8422_2325
        data.withUnsafeBytes { raw in
            for byte in raw { fnv = (fnv ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        }
        return "\(data.count)-\(String(format: "%08x", crc))\(String(format: "%016llx", fnv))"
    }
}

private func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    #if canImport(Glibc)
    Glibc.read(descriptor, buffer, count)
    #else
    Darwin.read(descriptor, buffer, count)
    #endif
}
