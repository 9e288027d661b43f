public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// When a crash test kills its child process.
public enum KillPlan: Sendable, CustomStringConvertible {
    /// After this many microseconds from spawn (early ones hit the store's open).
    case after(microseconds: Int)
    /// Once the child printed this many `ack` lines, plus a little jitter (aimed at a moment:
    /// a segment roll, a snapshot).
    case afterAcks(Int, jitterMicroseconds: Int)

    public var description: String {
        switch self {
        case .after(let us): "kill after \(us) µs"
        case .afterAcks(let n, let jitter): "kill \(jitter) µs after ack #\(n)"
        }
    }
}

/// What a killed child printed, and how it ended.
public struct KilledProcess: Sendable {
    /// The complete lines of its standard output (a line cut by the kill is dropped).
    public var lines: [String]
    /// Whether it died of the signal (rather than exiting by itself first).
    public var wasKilled: Bool
    /// Its exit status, when it exited by itself.
    public var terminationStatus: Int32
}

/// ``runAndKill(_:arguments:scratch:plan:signal:gracePeriod:)`` on a thread of its own, for an
/// async test: the harness waits for its child as long as the child runs, and a test that holds
/// one of Swift's cooperative threads that long (there are as many as cores) starves every other
/// test's tasks meanwhile.
public func runAndKillOffThePool(
    _ executable: URL, arguments: [String], scratch: URL, plan: KillPlan,
    signal: Int32 = SIGKILL, gracePeriod: Duration = .seconds(60)
) async throws -> KilledProcess {
    try await onOwnThread {
        try runAndKill(executable, arguments: arguments, scratch: scratch, plan: plan, signal: signal, gracePeriod: gracePeriod)
    }
}

/// Spawns `executable`, sends it `signal` per `plan`, and returns what it printed: the one
/// kill harness of the crash suites (SIGKILL) and of the graceful-shutdown tests (SIGTERM: the
/// child is then given `gracePeriod` to exit by itself, and SIGKILLed after it, which the
/// result's `wasKilled` shows). The child must print one line per `write(2)` (unbuffered),
/// with acknowledgements starting `ack `.
/// - Parameters:
///   - executable: The child, usually ``builtExecutable(_:)``.
///   - arguments: Its arguments.
///   - scratch: A directory for the child's captured output.
///   - plan: When to signal it.
///   - signal: The signal; SIGKILL by default.
///   - gracePeriod: How long a child sent another signal has to exit.
/// - Throws: When the child cannot be started or its output read.
public func runAndKill(
    _ executable: URL, arguments: [String], scratch: URL, plan: KillPlan,
    signal: Int32 = SIGKILL, gracePeriod: Duration = .seconds(60)
) throws -> KilledProcess {
    let outputURL = scratch.appending(path: "child-\(UUID().uuidString.prefix(8)).stdout")
    _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: outputURL) }
    let output = try FileHandle(forWritingTo: outputURL)
    defer { try? output.close() }
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    let started = ContinuousClock.now
    try process.run()
    switch plan {
    case .after(let us):
        let deadline = started.advanced(by: .microseconds(us))
        while ContinuousClock.now < deadline { usleep(100) }
    case .afterAcks(let n, let jitter):
        // Read the child's output incrementally until it printed n acks (or 120 s passed: a
        // child on a loaded machine may take long to get there; `Int.max` waits for its end).
        let reader = try FileHandle(forReadingFrom: outputURL)
        defer { try? reader.close() }
        var seen = 0
        let giveUp = started.advanced(by: .seconds(120))
        while seen < n && ContinuousClock.now < giveUp && process.isRunning {
            if let data = try reader.readToEnd(), !data.isEmpty {
                seen += String(decoding: data, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix("ack ") }.count
            } else {
                usleep(100)
            }
        }
        usleep(useconds_t(jitter))
    }
    kill(process.processIdentifier, signal)
    if signal != SIGKILL {
        let deadline = ContinuousClock.now.advanced(by: gracePeriod)
        while process.isRunning && ContinuousClock.now < deadline { usleep(1_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
    process.waitUntilExit()
    let text = String(decoding: try Data(contentsOf: outputURL), as: UTF8.self)
    // Only complete lines count: each is one write(2), but be strict anyway.
    var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    if !text.hasSuffix("\n") { lines.removeLast() }
    return KilledProcess(
        lines: lines.filter { !$0.isEmpty }.map(String.init),
        wasKilled: process.terminationReason == .uncaughtSignal,
        terminationStatus: process.terminationStatus)
}
