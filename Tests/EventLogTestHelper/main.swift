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
//   EventLogTestHelper append-concurrent DIR TASKS SEGMENT_BYTES
//                                            TASKS tasks append synced single records
//                                            ("t-T-k-K") as fast as they can, each printing
//                                            "ack P T K" when acknowledged, through
//                                            PowerLossFileIO: nothing written reaches the file
//                                            before its sync, and each sync takes 2 ms longer,
//                                            so a kill usually finds a leader mid-sync with
//                                            followers queued, and loses what was not synced
import EventLog
import EventKernelTestSupport
import Foundation
import Synchronization

ParentWatch.start()
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
            ParentWatch.exitIfOrphaned()
            // Unbuffered: a parent that kills this process must see every acknowledgement.
            FileHandle.standardOutput.write(Data("ack \(position) \(i)\n".utf8))
        }
        try await log.close()
        exit(0)
    } catch {
        print("error: \(error)")
        exit(1)
    }
case "append-concurrent":
    let tasks = arguments.count > 3 ? Int(arguments[3]) ?? 16 : 16
    var configuration = SegmentedLog.Configuration()
    configuration.segmentSize = arguments.count > 4 ? Int(arguments[4]) ?? 4096 : 4096
    configuration.fileIO = PowerLossFileIO()
    do {
        let log = try SegmentedLog.open(at: directory, configuration: configuration)
        FileHandle.standardOutput.write(Data("start \(log.bounds.nextPosition)\n".utf8))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<tasks {
                group.addTask {
                    for k in 0..<1_000_000 {
                        let position = try await log.append(LogEntry(timestamp: .now(), payload: Array("t-\(t)-k-\(k)".utf8)))
                        ParentWatch.exitIfOrphaned()
                        FileHandle.standardOutput.write(Data("ack \(position) \(t) \(k)\n".utf8))
                    }
                }
            }
            try await group.waitForAll()
        }
        exit(0)
    } catch {
        print("error: \(error)")
        exit(1)
    }
default:
    FileHandle.standardError.write(Data("unknown command \(arguments[1])\n".utf8))
    exit(2)
}

/// A file layer that models a power loss at the moment the process dies: writes are held in
/// memory and reach the file only when it is synced (in order, before the real sync), so a
/// SIGKILL loses exactly what was never synced. Each data sync also waits 2 ms first, to hold
/// the leader mid-sync while followers queue.
final class PowerLossFileIO: LogFileIO {
    private let real = PosixFileIO()
    private let pending = Mutex<[Int32: [(offset: Int64, bytes: [UInt8])]]>([:])

    func write(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) -> Int {
        let copy = Array(bytes)
        pending.withLock { $0[descriptor, default: []].append((offset, copy)) }
        return bytes.count
    }

    private func flush(_ descriptor: Int32, _ path: String) throws(LogError) {
        let writes = pending.withLock { $0.removeValue(forKey: descriptor) ?? [] }
        for write in writes {
            var done = 0
            while done < write.bytes.count {
                let n = try write.bytes.withUnsafeBytes { (raw) -> Result<Int, LogError> in
                    Result { () throws(LogError) in
                        try real.write(UnsafeRawBufferPointer(rebasing: raw[done...]), toAbsoluteOffset: write.offset + Int64(done),
                                       descriptor: descriptor, path: path)
                    }
                }.get()
                guard n > 0 else { throw LogError(.io, "pwrite made no progress", file: path, offset: write.offset + Int64(done)) }
                done += n
            }
        }
    }

    func synchronizeData(descriptor: Int32, path: String) throws(LogError) {
        usleep(2_000)
        try flush(descriptor, path)
        try real.synchronizeData(descriptor: descriptor, path: path)
    }

    func synchronize(descriptor: Int32, path: String) throws(LogError) {
        try flush(descriptor, path)
        try real.synchronize(descriptor: descriptor, path: path)
    }

    func preallocate(descriptor: Int32, path: String, length: Int64) throws(LogError) {
        try real.preallocate(descriptor: descriptor, path: path, length: length)
    }

    func truncate(descriptor: Int32, path: String, length: Int64) throws(LogError) {
        try flush(descriptor, path)
        try real.truncate(descriptor: descriptor, path: path, length: length)
    }
}
