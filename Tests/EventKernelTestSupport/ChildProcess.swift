public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A helper process a test talks to: its standard output goes to a file the test reads line
/// by line as it grows, its standard input is a pipe the test writes lines to, and the test
/// can SIGKILL it at any moment (the multi-process suites: several instances of a store).
/// The child must write one line per `write(2)` (unbuffered).
public final class ChildProcess: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()
    private let outputURL: URL
    private let errorURL: URL

    /// Starts `executable` with `arguments`, its output captured under `scratch`.
    /// - Throws: When it cannot be started.
    public init(_ executable: URL, arguments: [String], scratch: URL) throws {
        let name = "child-\(UUID().uuidString.prefix(8))"
        outputURL = scratch.appending(path: "\(name).stdout")
        errorURL = scratch.appending(path: "\(name).stderr")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: outputURL)
        process.standardError = try FileHandle(forWritingTo: errorURL)
        process.standardInput = input
        try process.run()
    }

    /// The complete lines it printed so far (a line still being written is left out).
    public var lines: [String] {
        let text = String(decoding: (try? Data(contentsOf: outputURL)) ?? Data(), as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if !text.hasSuffix("\n") { lines.removeLast() }
        return lines.filter { !$0.isEmpty }
    }

    /// What it printed on standard error, for a failure message.
    public var errorOutput: String { String(decoding: (try? Data(contentsOf: errorURL)) ?? Data(), as: UTF8.self) }

    /// Writes `line` and a newline to its standard input.
    public func send(_ line: String) {
        try? input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Waits until it printed a line for which `matches` holds, or `timeout` passed or it exited.
    /// - Returns: Whether such a line came.
    public func waitForLine(timeout: Duration, where matches: (String) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if lines.contains(where: matches) { return true }
            if !process.isRunning { return lines.contains(where: matches) }
            usleep(2_000)
        }
        return false
    }

    /// Kills it with SIGKILL and waits for it to be gone.
    public func kill() {
        sigkill(process.processIdentifier)
        process.waitUntilExit()
    }

    /// Waits for it to exit by itself, at most `timeout` (then kills it).
    /// - Returns: Its exit status, or `nil` when it had to be killed.
    public func waitForExit(timeout: Duration) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning && ContinuousClock.now < deadline { usleep(2_000) }
        guard !process.isRunning else {
            kill()
            return nil
        }
        return process.terminationStatus
    }

    /// Whether it is still running.
    public var isRunning: Bool { process.isRunning }

    /// Whether it died of a signal.
    public var wasKilled: Bool { !process.isRunning && process.terminationReason == .uncaughtSignal }

    deinit {
        if process.isRunning { kill() }
        try? FileManager.default.removeItem(at: outputURL)
        try? FileManager.default.removeItem(at: errorURL)
    }
}

private func sigkill(_ pid: pid_t) { kill(pid, SIGKILL) }
