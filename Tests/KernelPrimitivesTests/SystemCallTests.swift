#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KernelPrimitives
import Testing

@Suite("The system-call wrapper")
struct SystemCallTests {
    /// A fake call that fails with `failures` in turn (setting errno), then returns `result`.
    final class FakeCall: @unchecked Sendable {
        var failures: [Int32]
        let result: Int
        var calls = 0
        init(failing failures: [Int32], then result: Int) {
            self.failures = failures
            self.result = result
        }
        func callAsFunction() -> Int {
            calls += 1
            if failures.isEmpty { return result }
            errno = failures.removeFirst()
            return -1
        }
    }

    @Test("readFile reads a file whole or up to a limit, larger than one read, empty, and names the call that failed")
    func readFileWholeAndPrefix() throws {
        let path = "/tmp/ek-readfile-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        defer { unlink(path) }
        // Past the 8 MiB of one pread, not a multiple of it.
        let bytes = (0..<(9 << 20) + 123).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ ($0 >> 13)) }
        let descriptor = try SystemCall.open(path, flags: O_WRONLY | O_CREAT | O_TRUNC)
        var written = 0
        while written < bytes.count {
            written += try bytes.withUnsafeBytes { try SystemCall.write(to: descriptor, from: UnsafeRawBufferPointer(rebasing: $0[written...])) }
        }
        SystemCall.close(descriptor)
        #expect(try SystemCall.readFile(at: path) == bytes)
        #expect(try SystemCall.readFile(at: path, upTo: 100) == Array(bytes[..<100]))
        #expect(try SystemCall.readFile(at: path, upTo: bytes.count + 5) == bytes)
        #expect(try SystemCall.readFile(at: path, upTo: 0) == [])
        #expect(truncate(path, 0) == 0)
        #expect(try SystemCall.readFile(at: path) == [])
        #expect { try SystemCall.readFile(at: path + "-missing") } throws: { ($0 as? SystemCallError)?.call == "open" && ($0 as? SystemCallError)?.errorNumber == ENOENT }
        // A directory opens but does not read: the read's failure, named.
        #expect { try SystemCall.readFile(at: "/tmp") } throws: { ($0 as? SystemCallError)?.call == "pread" && ($0 as? SystemCallError)?.errorNumber == EISDIR }
    }

    @Test("a call interrupted by signals is retried until it succeeds")
    func retriesEINTR() throws {
        let call = FakeCall(failing: [EINTR, EINTR, EINTR], then: 42)
        #expect(try SystemCall.run("fake") { call() } == 42)
        #expect(call.calls == 4)
        let call32 = FakeCall(failing: [EINTR], then: 0)
        #expect(try SystemCall.run("fake32") { Int32(call32()) } == 0)
        #expect(call32.calls == 2)
    }

    @Test("any other failure throws once, with the call's name and errno")
    func throwsOtherErrors() {
        let call = FakeCall(failing: [EINTR, EIO, EINTR], then: 0)
        #expect(throws: SystemCallError(call: "pwrite", errorNumber: EIO)) { try SystemCall.run("pwrite") { call() } }
        #expect(call.calls == 2)
        let error = SystemCallError(call: "fsync", errorNumber: ENOSPC)
        #expect(error.description.hasPrefix("fsync failed: "))
        #expect(error.description.hasSuffix("(errno \(ENOSPC))"))
    }

    @Test("calls that return their error number are retried on EINTR and throw it otherwise")
    func returnedErrorNumbers() {
        var results: [Int32] = [EINTR, EINTR, 0]
        #expect(throws: Never.self) { try SystemCall.run(returningErrorNumber: "fallocate") { results.removeFirst() } }
        #expect(results.isEmpty)
        results = [EINTR, EOPNOTSUPP, 0]
        #expect(throws: SystemCallError(call: "fallocate", errorNumber: EOPNOTSUPP)) {
            try SystemCall.run(returningErrorNumber: "fallocate") { results.removeFirst() }
        }
        #expect(results == [0])
    }

    @Test("a real call: open of a missing file fails with ENOENT, not a retry loop")
    func realCall() {
        #expect(throws: SystemCallError(call: "open", errorNumber: ENOENT)) {
            try SystemCall.run("open") { open("/nonexistent-\(UInt64.random(in: 0...UInt64.max))/x", O_RDONLY) }
        }
    }

    @Test("the file calls: open, write, read at the offset and at an absolute offset, each failure named")
    func fileCalls() throws {
        let path = "/tmp/ek-systemcall-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        defer { unlink(path) }
        let written = Array("0123456789".utf8)
        let descriptor = try SystemCall.open(path, flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
        defer { SystemCall.close(descriptor) }
        #expect(fcntl(descriptor, F_GETFD) & FD_CLOEXEC != 0, "no child process may inherit it")
        #expect(try written.withUnsafeBytes { try SystemCall.write(to: descriptor, from: $0) } == 10)
        var buffer = [UInt8](repeating: 0, count: 4)
        let atSix = try buffer.withUnsafeMutableBytes { try SystemCall.read(from: descriptor, atAbsoluteOffset: 6, into: $0) }
        #expect(atSix == 4 && buffer == Array("6789".utf8))
        // The descriptor's own offset is at the end (pread left it alone): read(2) finds nothing.
        #expect(try buffer.withUnsafeMutableBytes { try SystemCall.read(from: descriptor, into: $0) } == 0)
        #expect(lseek(descriptor, 2, SEEK_SET) == 2)
        #expect(try buffer.withUnsafeMutableBytes { try SystemCall.read(from: descriptor, into: $0) } == 4)
        #expect(buffer == Array("2345".utf8))

        #expect { try SystemCall.open(path + "-missing", flags: O_RDONLY) } throws: { error in
            (error as? SystemCallError) == SystemCallError(call: "open", errorNumber: ENOENT)
        }
        #expect { try buffer.withUnsafeMutableBytes { try SystemCall.read(from: -1, into: $0) } } throws: { error in
            (error as? SystemCallError) == SystemCallError(call: "read", errorNumber: EBADF)
        }
        #expect { try buffer.withUnsafeMutableBytes { try SystemCall.read(from: -1, atAbsoluteOffset: 0, into: $0) } } throws: { error in
            (error as? SystemCallError) == SystemCallError(call: "pread", errorNumber: EBADF)
        }
        #expect { try written.withUnsafeBytes { try SystemCall.write(to: -1, from: $0) } } throws: { error in
            (error as? SystemCallError) == SystemCallError(call: "write", errorNumber: EBADF)
        }
    }
}
