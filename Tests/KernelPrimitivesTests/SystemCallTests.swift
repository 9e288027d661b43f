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
}
