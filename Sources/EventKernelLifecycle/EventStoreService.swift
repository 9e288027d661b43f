public import EventKernel
public import Logging
public import ServiceLifecycle

/// An event store as a swift-service-lifecycle `Service`: it runs until the service group
/// shuts down (gracefully, on SIGTERM or SIGINT when the group listens for them, or by
/// cancellation), then closes the store: no new appends, a final sync, snapshots per the
/// store's policy, observations ended, the log closed.
///
/// ```swift
/// let repository = try EventSourcedActivityRepository.open(at: directory)
/// let group = ServiceGroup(configuration: ServiceGroupConfiguration(
///     services: [EventStoreService(store: repository.store), httpServer],
///     gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
/// try await group.run()
/// ```
///
/// A group shuts its services down in reverse order, so list the store before the services
/// that write to it: they stop first, and the store closes after their last write. An append
/// acknowledged before the close is on disk (synced durability) or synced by the close
/// (buffered); an append that arrives after it fails with `RepositoryError.closed`, so nothing
/// acknowledged is lost.
public struct EventStoreService: Service {
    /// The store this service closes.
    public let store: EventStore
    private let logger: Logger

    /// Creates the service.
    /// - Parameters:
    ///   - store: The store to close on shutdown; it is open already (opening fails where
    ///     the service is built, before the group starts).
    ///   - logger: Receives the shutdown notices (start and end of the close).
    public init(store: EventStore, logger: Logger = Logger(label: "EventKernel.EventStoreService")) {
        self.store = store
        self.logger = logger
    }

    /// Waits for graceful shutdown or cancellation, then closes the store.
    /// - Throws: `RepositoryError.storage` when the final sync fails (the group then reports
    ///   it, and the process should exit with an error: some buffered appends may be lost).
    public func run() async throws {
        // Cancellation (the group failing, or no group at all) closes the store the same way:
        // an open store left behind would skip the final sync and the snapshot.
        try? await gracefulShutdown()
        logger.info("closing the event store", metadata: ["nextPosition": "\(store.nextPosition)"])
        let started = ContinuousClock.now
        try await store.close()
        logger.info("event store closed", metadata: ["duration": "\(ContinuousClock.now - started)"])
    }
}
