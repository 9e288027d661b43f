// A helper process for the lifecycle tests: a service group that writes activities until a
// real SIGTERM shuts it down.
//
//   LifecycleTestHelper MODE DIR WRITERS
//
// Opens an EventSourcedActivityRepository in DIR (synced; snapshots on close only), prints
// "start N" (N activities already there), then runs a ServiceGroup listening for SIGTERM with
// an EventStoreService and a writer service of WRITERS concurrent tasks; writer w adds activity
// i = N + w, N + w + WRITERS, ... (see `crashModel`), printing "ack i" after each acknowledged
// add (unbuffered).
//
// MODE orderly: the group lists the store first, so the writers stop first (each finishes the
//               add it is in) and the store closes after their last write: the documented use.
// MODE racing:  the writers run outside the group, so the store closes under them; they keep
//               adding until an add fails with RepositoryError.closed: the close racing appends.
//
// After the group has run, prints "closed P" (P: the store's next position) and exits 0; any
// other failure prints "error: ..." and exits 1.
import Activities
import EventKernel
import EventKernelLifecycle
import EventKernelTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

func say(_ line: String) {
    // Unbuffered: the parent must see every acknowledgement that was printed.
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
    ParentWatch.exitIfOrphaned()
}

/// Set once the group begins its graceful shutdown.
final class Stopping: Sendable {
    let flag = Atomic(false)
}

/// Adds activities from `writers` tasks until shutdown (orderly) or until the store refuses.
struct Writers: Service {
    let repository: EventSourcedActivityRepository
    let start: Int
    let writers: Int
    let stopOnShutdown: Bool

    func run() async throws {
        let stopping = Stopping()
        try await withGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        var i = start + writer
                        while !(stopOnShutdown && stopping.flag.load(ordering: .relaxed)) {
                            do {
                                try await repository.add(crashModel(i))
                            } catch RepositoryError.closed {
                                return
                            } catch {
                                say("error: writer \(writer), activity \(i): \(error)")
                                throw error
                            }
                            say("ack \(i)")
                            i += writers
                        }
                    }
                }
                try await group.waitForAll()
            }
        } onGracefulShutdown: {
            stopping.flag.store(true, ordering: .relaxed)
        }
    }
}

ParentWatch.start()
let arguments = CommandLine.arguments
guard arguments.count == 4, let writers = Int(arguments[3]), ["orderly", "racing"].contains(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: LifecycleTestHelper orderly|racing DIR WRITERS\n".utf8))
    exit(2)
}
do {
    var configuration = EventStore.Configuration()
    configuration.log.durability = .synced
    configuration.snapshots = SnapshotPolicy(everyEvents: nil, onClose: true)
    let repository = try EventSourcedActivityRepository.open(at: URL(filePath: arguments[2]), configuration: configuration)
    let start = repository.count
    say("start \(start)")
    var logger = Logger(label: "LifecycleTestHelper")
    logger.logLevel = .warning
    let store = EventStoreService(store: repository.store, logger: logger)
    let writing = Writers(repository: repository, start: start, writers: writers, stopOnShutdown: arguments[1] == "orderly")
    var groupConfiguration: ServiceGroupConfiguration
    let racingWriters: Task<Void, any Error>?
    if arguments[1] == "orderly" {
        groupConfiguration = ServiceGroupConfiguration(services: [store, writing], logger: logger)
        racingWriters = nil
    } else {
        // Not a service of the group (the group would call a service that ends before it is
        // asked to a failure): writers the shutdown does not know about, as request handlers
        // outside the group would be.
        groupConfiguration = ServiceGroupConfiguration(services: [store], logger: logger)
        racingWriters = Task { try await writing.run() }
    }
    groupConfiguration.gracefulShutdownSignals = [.sigterm]
    try await ServiceGroup(configuration: groupConfiguration).run()
    try await racingWriters?.value
    say("closed \(repository.store.nextPosition)")
    exit(0)
} catch {
    say("error: \(error)")
    exit(1)
}
