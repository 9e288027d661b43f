public import Foundation

/// What a finished process printed, and how it ended.
public struct ProcessOutput: Sendable {
    /// Its exit status.
    public var status: Int32
    /// Its standard output.
    public var stdout: String
    /// Its standard error.
    public var stderr: String
}

/// Runs `executable` with `arguments` to its end without holding a thread meanwhile: the wait is
/// the process's termination handler resuming a continuation, so that an async test's child
/// never takes one of Swift's cooperative threads (as many as cores) from the other tests.
/// Output goes to files (a pipe would fill and stall a child that prints much).
/// - Parameters:
///   - executable: The program; `/usr/bin/env` with the program's name as the first argument
///     runs one found on `PATH`.
///   - arguments: Its arguments.
///   - environment: Replaces the environment when given.
/// - Returns: Its status and output.
/// - Throws: When it cannot be started or its output read.
public func runProcess(_ executable: URL, arguments: [String], environment: [String: String]? = nil) async throws -> ProcessOutput {
    let scratch = TemporaryDirectory("ek-process")
    let out = scratch.file("stdout"), err = scratch.file("stderr")
    _ = FileManager.default.createFile(atPath: out.path, contents: nil)
    _ = FileManager.default.createFile(atPath: err.path, contents: nil)
    let outHandle = try FileHandle(forWritingTo: out), errHandle = try FileHandle(forWritingTo: err)
    defer {
        try? outHandle.close()
        try? errHandle.close()
    }
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if let environment { process.environment = environment }
    process.standardOutput = outHandle
    process.standardError = errHandle
    process.standardInput = FileHandle.nullDevice
    let status: Int32 = try await withCheckedThrowingContinuation { continuation in
        process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
        do { try process.run() } catch {
            process.terminationHandler = nil
            continuation.resume(throwing: error)
        }
    }
    return ProcessOutput(status: status,
                         stdout: String(decoding: try Data(contentsOf: out), as: UTF8.self),
                         stderr: String(decoding: try Data(contentsOf: err), as: UTF8.self))
}
