import EventLog
import Foundation

let log = try SegmentedLog.open(at: URL(filePath: "events"))   // synced, LZ4
let positions = try await log.append([
    LogEntry(timestamp: .now(), payload: Array("hello".utf8)),
])
try log.forEachRecord(from: 0, through: nil) { record in
    print(record.position, record.timestamp, record.payload.count)
    return true                                          // false stops the walk
}
let lastHour = try log.read(timestampsIn: try LogTimestamp(Date() - 3600)...LogTimestamp.now())
try await log.close()

let report = try SegmentedLog.verify(at: URL(filePath: "events"))
print(report.isIntact ? "intact" : report.description)
