// A helper process for the EventLog tests: contends for a store's writer lock, or appends
// with the synced policy and prints each acknowledged position (for crash tests).
//
//   EventLogTestHelper try-lock DIR          exit 0 if the writer lock was taken, 3 if locked
//   EventLogTestHelper append DIR COUNT      synced single-record appends, one "ack N" line each
//   EventLogTestHelper append DIR COUNT SEGMENT_BYTES
//                                            the same with SEGMENT_BYTES segments (>= 4096, so
//                                            that rolls are frequent), continuing an existing
//                                            store: record i is "record-i" at position i, and
//                                            "start N" is printed once the store is open
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
    let segmentBytes = arguments.count > 4 ? Int(arguments[4]) : nil
    do {
        var configuration = SegmentedLog.Configuration()
        configuration.segmentSize = segmentBytes ?? 64 << 10
        let log = try SegmentedLog.open(at: directory, configuration: configuration)
        var first = 0
        if segmentBytes != nil {
            first = Int(log.bounds.nextPosition)
            FileHandle.standardOutput.write(Data("start \(first)\n".utf8))
        }
        for i in first..<(first + count) {
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
