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
//   ActivitiesTestHelper consume DIR HANDLED TOTAL
//                                    opens an EventStore in DIR (synced) and, at once, appends
//                                    "Counted" events in batches of 10 until the log holds TOTAL,
//                                    while named consumer "crash" runs (batches of at most 16):
//                                    its handler appends each handled position to the file HANDLED
//                                    (one line each, one write per batch, fsynced before the
//                                    handler returns, so before the commit), then prints "ack P"
//                                    (P: the batch's last position). It fails on purpose: always
//                                    on a batch holding a position P with P % 101 == 7 (so the
//                                    batch is split and P parked), and once per process on one
//                                    holding P % 37 == 5 (a retry handles it). Prints "done" and
//                                    exits once every event is appended and committed
//   ActivitiesTestHelper append DIR TOTAL BATCH
//                                    the kill bar's writer: opens an EventStore in DIR (synced, no
//                                    snapshots) and appends "Counted" events, BATCH per append,
//                                    until the log holds TOTAL; prints "start N" first, "ack P" (P:
//                                    the last position appended) every 16 appends, then "done"
//   ActivitiesTestHelper follow DIR HANDLED TOTAL
//                                    the kill bar's consumer, beside a writer in another process:
//                                    cuts a line a kill tore off the end of the file HANDLED, opens
//                                    DIR read-only (refreshed every millisecond until it holds
//                                    TOTAL events) and runs named
//                                    consumer "bar" (batches of at most 64, commits every 50 ms): its
//                                    handler appends each handled position to HANDLED (one line
//                                    each, one write per batch, fsynced before it returns, so before
//                                    the commit). Prints "start C" (C: the committed position), then
//                                    "done C" once it has handled and committed every position
//                                    below TOTAL
//   ActivitiesTestHelper snapshot-close DIR
//                                    opens DIR with the snapshot-determinism workload's store
//                                    (`SnapshotDeterminism`, snapshots on close only), which
//                                    replays the log, and closes it: the close writes the
//                                    snapshots; prints "closed P" (P: the next position)
//   ActivitiesTestHelper instance DIR SCHEMA NAME SECONDS WRITERS
//                                    one service instance on the PostgreSQL log in SCHEMA (server:
//                                    $EVENTKERNEL_POSTGRES_URL), snapshots in DIR: WRITERS tasks
//                                    add ScaleOutItems "NAME-w-i" for SECONDS, printing "ack ID"
//                                    after each acknowledged add; every 4th add each writer also
//                                    races the other instances for "shared-w-k", printing "won ID"
//                                    or "lost ID". Then prints "done", waits for a line on stdin,
//                                    catches up with the log and prints "result NAME COUNT DIGEST"
//                                    per query of ScaleOutItem.report, and "end"
//   ActivitiesTestHelper lease SCHEMA TOTAL
//                                    one service instance on the PostgreSQL log in SCHEMA: prints
//                                    "waiting", waits for the lease of consumer "failover", prints
//                                    "leased P" (P: its committed position), then runs it (batches
//                                    of at most 8, committing every 20 ms), printing "handled P1
//                                    P2 ..." per batch before the handler returns (then it sleeps
//                                    20 ms); once the committed position reaches TOTAL it closes
//                                    the store, prints "done" and exits
import Activities
import EventKernel
import EventLog
import Foundation
import EventKernelTestSupport
#if PostgreSQL
import PostgresLog
#endif

/// Appends the events' positions, one per line, to the side file `fd` and fsyncs it: a
/// consumer's handler records what it handled durably before it returns, so the tests know
/// the handled set at every kill.
func recordHandled(_ events: [EventEnvelope], in fd: Int32) throws {
    let text = events.map { "\($0.position)\n" }.joined()
    let written = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
    guard written == text.utf8.count, fsync(fd) == 0 else { throw POSIXError(.EIO) }
}

func say(_ line: String) {
    // Unbuffered: a parent that kills this process must see every acknowledgement.
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
    ParentWatch.exitIfOrphaned()
}

ParentWatch.start()
let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: ActivitiesTestHelper crash|hold DIR\n".utf8))
    exit(2)
}
let directory = URL(filePath: arguments[2])

switch arguments[1] {
case "crash":
    do {
        var configuration = EventStore.Configuration()
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
case "consume":
    do {
        guard arguments.count == 5, let total = UInt64(arguments[4]) else {
            FileHandle.standardError.write(Data("usage: ActivitiesTestHelper consume DIR HANDLED TOTAL\n".utf8))
            exit(2)
        }
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        let handled = open(arguments[3], O_WRONLY | O_CREAT | O_APPEND, 0o644)
        guard handled >= 0 else { throw POSIXError(.EIO) }
        let writer = Task {
            var batch = 0
            while store.nextPosition < total {
                let count = Int(min(10, total - store.nextPosition))
                try await store.append((0..<count).map { i in
                    PendingEvent(EncodedEvent(eventType: "Counted", schemaVersion: 1, stream: StreamID("Counted", .string("e\((batch * 10 + i) % 97)")), payload: [1]))
                })
                batch += 1
            }
        }
        // Commits every 2 ms: often enough that kills land between commits, and through the
        // interval's paths (a batch past it; caught up and idle through it).
        let consumer = try store.consumer(named: "crash", options: ConsumerOptions(
            readBatchSize: 16, retry: RetryPolicy(maxAttempts: 2, initialDelay: .microseconds(100), maxDelay: .milliseconds(1)),
            commitInterval: .milliseconds(2)))
        let run = Task {
            var failedOnce: Set<UInt64> = []
            try await consumer.run { events in
                if events.contains(where: { $0.position % 101 == 7 }) { throw POSIXError(.EAGAIN) }
                if let flaky = events.first(where: { $0.position % 37 == 5 && !failedOnce.contains($0.position) }) {
                    failedOnce.insert(flaky.position)
                    throw POSIXError(.EBUSY)
                }
                try recordHandled(events, in: handled)
                say("ack \(events[events.count - 1].position)")
            }
        }
        try await writer.value
        while consumer.committed < total { try await Task.sleep(for: .milliseconds(1)) }
        run.cancel()
        try await run.value
        try await store.close()
        say("done")
        exit(0)
    } catch {
        say("error: \(error)")
        exit(1)
    }
case "snapshot-close":
    do {
        let (store, _) = try SnapshotDeterminism.open(at: directory, snapshotPolicy: SnapshotPolicy(everyEvents: nil, onClose: true))
        let position = store.nextPosition
        try await store.close()
        say("closed \(position)")
        exit(0)
    } catch {
        say("error: \(error)")
        exit(1)
    }
case "append":
    do {
        guard (5...6).contains(arguments.count), let total = UInt64(arguments[3]), let batch = UInt64(arguments[4]), batch > 0,
              let pause = arguments.count == 6 ? UInt32(arguments[5]) : 0 else {
            FileHandle.standardError.write(Data("usage: ActivitiesTestHelper append DIR TOTAL BATCH [PAUSE_MICROSECONDS]\n".utf8))
            exit(2)
        }
        let store = try EventStore.open(at: directory, snapshotPolicy: .never)
        say("start \(store.nextPosition)")
        var appends = 0
        while store.nextPosition < total {
            let first = store.nextPosition
            let count = min(batch, total - first)
            let appended = try await store.append((0..<count).map { i in
                PendingEvent(EncodedEvent(eventType: "Counted", schemaVersion: 1, stream: StreamID("Counted", .string("e\((first + i) % 97)")), payload: [1]))
            })
            appends += 1
            ParentWatch.exitIfOrphaned()
            if appends % 16 == 0 { say("ack \(appended[appended.count - 1].position)") }
            // A writer that "goes on" beside a test need not take a whole core from the
            // processes under test (under the sanitizers that starved the whole run).
            if pause > 0 { usleep(pause) }
        }
        try await store.close()
        say("done")
        exit(0)
    } catch {
        say("error: \(error)")
        exit(1)
    }
case "follow":
    do {
        guard arguments.count == 5, let total = UInt64(arguments[4]) else {
            FileHandle.standardError.write(Data("usage: ActivitiesTestHelper follow DIR HANDLED TOTAL\n".utf8))
            exit(2)
        }
        let handled = open(arguments[3], O_RDWR | O_CREAT | O_APPEND, 0o644)
        guard handled >= 0 else { throw POSIXError(.EIO) }
        // A kill in the middle of a write may leave part of a line: that batch's handler never
        // returned, so it was not committed; cut it, or the next line would be glued to it.
        let text = try Data(contentsOf: URL(filePath: arguments[3]))
        if let last = text.lastIndex(of: UInt8(ascii: "\n")).map({ $0 + 1 }) ?? (text.isEmpty ? nil : 0), last < text.count {
            guard ftruncate(handled, off_t(last)) == 0, fsync(handled) == 0 else { throw POSIXError(.EIO) }
        }
        let store = try EventStore(log: try SegmentedLog.openReadOnly(at: directory), directory: directory, snapshotPolicy: .never)
        let consumer = try store.consumer(named: "bar", startingAt: .beginning,
                                          options: ConsumerOptions(readBatchSize: 64, commitInterval: .milliseconds(50)))
        say("start \(consumer.committed)")
        // The writer is another process: its commits reach this store when it refreshes (until
        // it holds all TOTAL: a refresh re-reads the log's index files once its writer closed).
        let poller = Task {
            while !Task.isCancelled && store.nextPosition < total {
                ParentWatch.exitIfOrphaned()
                do {
                    try store.refresh()
                } catch {
                    say("error: refresh: \(error)")
                    exit(1)
                }
                try? await Task.sleep(for: .milliseconds(1))
            }
        }
        if consumer.committed < total {
            try await Task {
                try await consumer.run { events in
                    try recordHandled(events, in: handled)
                    // Everything handled: end the run, which commits it.
                    if events[events.count - 1].position + 1 >= total { withUnsafeCurrentTask { $0?.cancel() } }
                }
            }.value
        }
        poller.cancel()
        await poller.value
        let committed = consumer.committed
        try await store.close()
        guard committed >= total else { throw POSIXError(.EIO) }
        say("done \(committed)")
        exit(0)
    } catch {
        say("error: \(error)")
        exit(1)
    }
#if PostgreSQL
case "instance":
    do {
        guard arguments.count == 7, let seconds = Double(arguments[5]), let writers = Int(arguments[6]),
              let configuration = try PostgresTestDatabase.configurationIfAvailable(schema: arguments[3]) else {
            say("error: usage: instance DIR SCHEMA NAME SECONDS WRITERS, with EVENTKERNEL_POSTGRES_URL set")
            exit(2)
        }
        let name = arguments[4]
        var policy = SnapshotPolicy(everyEvents: 500, onClose: false, keep: 1)
        policy.growthFraction = 0
        let store = try await EventStore.open(postgres: configuration, snapshotsIn: directory, snapshotPolicy: policy)
        let items = try ScaleOutItem.repository(on: store)
        let deadline = ContinuousClock.now + .seconds(seconds)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    var i = 0
                    while ContinuousClock.now < deadline {
                        let id = "\(name)-\(writer)-\(i)"
                        try await items.add(ScaleOutItem(id: id, writer: "\(name)-\(writer)", value: i))
                        say("ack \(id)")
                        if i % 4 == 0 {
                            let contested = "shared-\(writer)-\(i / 4)"
                            do {
                                try await items.add(ScaleOutItem(id: contested, writer: name, value: i))
                                say("won \(contested)")
                            } catch RepositoryError.alreadyExists {
                                say("lost \(contested)")
                            }
                        }
                        i += 1
                    }
                }
            }
            try await group.waitForAll()
        }
        say("done")
        _ = readLine()
        try store.refresh()
        for line in try ScaleOutItem.report(items) { say("result \(line)") }
        try await store.close()
        say("end")
        exit(0)
    } catch {
        say("error: \(error)")
        exit(1)
    }
case "lease":
    do {
        guard arguments.count == 4, let total = UInt64(arguments[3]),
              let configuration = try PostgresTestDatabase.configurationIfAvailable(schema: arguments[2]) else {
            say("error: usage: lease SCHEMA TOTAL, with EVENTKERNEL_POSTGRES_URL set")
            exit(2)
        }
        let store = try await EventStore.open(postgres: configuration)
        say("waiting")
        let consumer = try await store.consumer(named: "failover", options: ConsumerOptions(readBatchSize: 8, commitInterval: .milliseconds(20)),
                                                waitingForLease: .milliseconds(250))
        say("leased \(consumer.committed)")
        let run = Task {
            try await consumer.run { events in
                say("handled " + events.map { "\($0.position)" }.joined(separator: " "))
                // Not cut short by the cancel at the end: the batch counts as handled.
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        let watch = Task {
            while consumer.committed < total { try await Task.sleep(for: .milliseconds(5)) }
            run.cancel()
        }
        // A run that fails (a lost lease) ends the process with its error.
        defer { watch.cancel() }
        try await run.value
        try await store.close()
        say("done")
        exit(0)
    } catch {
        say("error: \(error)")
        exit(1)
    }
#endif
default:
    FileHandle.standardError.write(Data("unknown command \(arguments[1])\n".utf8))
    exit(2)
}
