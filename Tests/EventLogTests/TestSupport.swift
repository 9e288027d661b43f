import EventLog
import Foundation
import Testing
import EventKernelTestSupport

func entry(_ i: Int, size: Int = 0, at timestamp: Int64? = nil) -> LogEntry {
    var payload = Array("record-\(i)".utf8)
    if size > payload.count {
        // Pseudo-random filler, so that LZ4 cannot shrink it and segment sizes are predictable.
        var state = UInt64(truncatingIfNeeded: i) &* 0x9E37_79B9_7F4A_7C15 | 1
        for _ in payload.count..<size {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            payload.append(UInt8(truncatingIfNeeded: state))
        }
    }
    return LogEntry(timestamp: LogTimestamp(nanosecondsSince1970: timestamp ?? Int64(i) * 1_000), payload: payload)
}

func segmentFiles(in directory: TemporaryDirectory) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".log") }.sorted()
}

func fileSize(_ path: String) throws -> Int64 {
    (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
}

func allRecords(_ log: some RecordLog) throws -> [LogRecord] {
    try log.read(from: 0)
}

/// Runs the helper executable and returns its exit status and output.
func runHelper(_ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = builtExecutable("EventLogTestHelper")
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
