#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A system call that failed: which one and its `errno`.
package struct SystemCallError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The call's name (`"pwrite"`, `"fdatasync"`, ...).
    package var call: String
    /// The error number it failed with.
    package var errorNumber: Int32

    /// Creates an error.
    /// - Parameters:
    ///   - call: The call's name.
    ///   - errorNumber: The `errno` (or the returned error number) it failed with.
    package init(call: String, errorNumber: Int32) {
        self.call = call
        self.errorNumber = errorNumber
    }

    package var description: String {
        "\(call) failed: \(String(cString: strerror(errorNumber))) (errno \(errorNumber))"
    }
}

/// The one place that calls the operating system and retries a call interrupted by a signal
/// (`EINTR`), after swift-nio's `NIOPosix/System.swift`: every call site states only the
/// call and what its failures mean, never the retry loop.
package enum SystemCall {
    /// Runs `body`, a call that returns a negative value and sets `errno` on failure
    /// (`open`, `pwrite`, `pread`, `fsync`, `fdatasync`, `ftruncate`, `flock`, ...), again for
    /// as long as it fails with `EINTR`.
    /// - Parameters:
    ///   - name: The call's name, for the error.
    ///   - body: The call.
    /// - Returns: What the call returned (not negative).
    /// - Throws: ``SystemCallError`` with the name and `errno` of any other failure.
    package static func run(_ name: String, _ body: () -> Int) throws(SystemCallError) -> Int {
        try retrying(name) {
            let result = body()
            // Read errno before anything else can overwrite it.
            return result >= 0 ? (result, 0) : (nil, errno)
        }
    }

    /// The same for calls that return an `Int32` (`open`, `fsync`, `flock`, ...).
    /// - Parameters:
    ///   - name: The call's name, for the error.
    ///   - body: The call.
    /// - Returns: What the call returned (not negative).
    /// - Throws: ``SystemCallError`` with the name and `errno` of any other failure.
    @discardableResult
    package static func run(_ name: String, _ body: () -> Int32) throws(SystemCallError) -> Int32 {
        Int32(truncatingIfNeeded: try run(name) { () -> Int in Int(body()) })
    }

    /// Runs `body`, a call that returns its error number instead of setting `errno`
    /// (`posix_fallocate`), again for as long as it returns `EINTR`.
    /// - Parameters:
    ///   - name: The call's name, for the error.
    ///   - body: The call.
    /// - Throws: ``SystemCallError`` with the name and the returned error number.
    package static func run(returningErrorNumber name: String, _ body: () -> Int32) throws(SystemCallError) {
        try retrying(name) {
            let number = body()
            return number == 0 ? ((), 0) : (nil, number)
        }
    }

    /// The one retry loop: `attempt` answers the call's value, or `nil` and the error number.
    private static func retrying<R>(_ name: String, _ attempt: () -> (value: R?, errorNumber: Int32)) throws(SystemCallError) -> R {
        while true {
            let (value, number) = attempt()
            if let value { return value }
            if number == EINTR { continue }
            throw SystemCallError(call: name, errorNumber: number)
        }
    }
}
