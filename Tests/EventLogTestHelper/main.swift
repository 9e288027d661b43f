// A helper process for the EventLog tests: contends for a store's writer lock, or appends
// with the synced policy and prints each acknowledged position (for crash tests).
//
//   EventLogTestHelper try-lock DIR          exit 0 if the writer lock was taken, 3 if locked
//   EventLogTestHelper append DIR COUNT      synced single-record appends, one "ack N" line each
import EventLog
import Foundation

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: EventLogTestHelper try-lock|append DIR [COUNT]\n".utf8))
    exit(2)
}
let directory = URL(filePath: arguments[2])

switch arguments[1] {
case "try-lock":
    do {
        let log = try SegmentedLog.open(at: directory)
        print("acquired")
        try await log.close()
        exit(0)
    } catch let error as LogError where error.code == .locked {
        print("locked: \(error)")
        exit(3)
    } catch {
        print("error: \(error)")
        exit(1)
    }
case "append":
    let count = arguments.count > 3 ? Int(arguments[3]) ?? 1000 : 1000
    do {
        var configuration = SegmentedLog.Configuration()
        configuration.segmentSize = 64 << 10
        let log = try SegmentedLog.open(at: directory, configuration: configuration)
        for i in 0..<count {
            let payload = Array("record-\(i)".utf8)
            let position = try await log.append(LogEntry(timestamp: .now(), payload: payload))
            // Unbuffered: a parent that kills this process must see every acknowledgement.
            FileHandle.standardOutput.write(Data("ack \(position) \(i)\n".utf8))
        }
        try await log.close()
        exit(0)
    } catch {
        print("error: \(error)")
        exit(1)
    }
default:
    FileHandle.standardError.write(Data("unknown command \(arguments[1])\n".utf8))
    exit(2)
}
