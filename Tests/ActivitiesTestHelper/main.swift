// A helper process for the Activities reliability tests.
//
//   ActivitiesTestHelper crash DIR   opens an EventSourcedActivityRepository in DIR (synced,
//                                    16 KiB segments, a snapshot every 5 events, growthFraction
//                                    0), prints "start N" (N activities already there), then adds
//                                    activity i = N, N+1, ... (see `crashModel`) one by one,
//                                    printing "ack i" after each acknowledged add (unbuffered),
//                                    and calls store.writeSnapshots() after every 17th; runs
//                                    until killed
//   ActivitiesTestHelper hold DIR    opens DIR as the writer, prints "holding", keeps the lock
//                                    until its stdin reaches EOF (or it is killed)
import Activities
import EventKernel
import EventLog
import Foundation
import EventKernelTestSupport

func say(_ line: String) {
    // Unbuffered: a parent that kills this process must see every acknowledgement.
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: ActivitiesTestHelper crash|hold DIR\n".utf8))
    exit(2)
}
let directory = URL(filePath: arguments[2])

switch arguments[1] {
case "crash":
    do {
        var configuration = EventSourcedActivityRepository.Configuration()
        configuration.log.segmentSize = 16 << 10
        configuration.log.durability = .synced
        var policy = SnapshotPolicy(everyEvents: 5, onClose: true, keep: 2)
        policy.growthFraction = 0
        configuration.snapshots = policy
        let repository = try EventSourcedActivityRepository.open(at: directory, configuration: configuration)
        let start = repository.count
        say("start \(start)")
        for i in start..<(start + 10_000_000) {
            try await repository.add(crashModel(i))
            say("ack \(i)")
            if i % 17 == 0 { try await repository.store.writeSnapshots() }
        }
        try await repository.close()
        exit(0)
    } catch {
        say("error: \(error)")
        exit(1)
    }
case "hold":
    do {
        let repository = try EventSourcedActivityRepository.open(at: directory)
        say("holding")
        _ = FileHandle.standardInput.readDataToEndOfFile()
        try await repository.close()
        exit(0)
    } catch {
        say("error: \(error)")
        exit(1)
    }
default:
    FileHandle.standardError.write(Data("unknown command \(arguments[1])\n".utf8))
    exit(2)
}
