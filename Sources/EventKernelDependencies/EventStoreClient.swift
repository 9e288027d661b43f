public import Dependencies
public import EventKernel
public import Foundation

/// The event store the live repositories of a process share, as a swift-dependencies value:
/// `@Dependency(\.eventStore)`. Every repository dependency (`RepositoryClient<Entity>`,
/// `ActivityRepositoryClient`) registers its projection on this one store, so a store is one
/// directory, one lock and one log for the whole process.
///
/// The store opens on first use (a `liveValue` can neither throw nor await), at a location
/// chosen at the entry point:
///
/// ```swift
/// prepareDependencies { $0.eventStore = .open(at: URL(filePath: "/var/lib/app/store")) }
/// ```
///
/// A service that must fail at start when its store cannot open calls ``store`` there, and
/// hands the store to `EventStoreService` (product `EventKernelLifecycle`) to close it on
/// shutdown.
public struct EventStoreClient: Sendable {
    /// The store, opened now if it is not yet.
    /// - Throws: Why it could not open (`RepositoryError.storage` with the `LogError`: locked
    ///   by another process, damaged, not a directory). The next call tries again.
    public var store: @Sendable () async throws -> EventStore
    /// Closes the store if it was opened (sync, snapshots per policy); a no-op otherwise.
    /// - Throws: `RepositoryError.storage` when the final sync fails.
    public var close: @Sendable () async throws -> Void

    /// Creates a client from closures.
    public init(
        store: @escaping @Sendable () async throws -> EventStore,
        close: @escaping @Sendable () async throws -> Void
    ) {
        self.store = store
        self.close = close
    }

    /// A store that opens at `directory` on first use.
    /// - Parameters:
    ///   - directory: The store's directory (created if missing).
    ///   - configuration: The store's options (log, snapshots, logger).
    public static func open(at directory: URL, configuration: EventStore.Configuration = .init()) -> EventStoreClient {
        opening { try EventStore.open(at: directory, configuration: configuration) }
    }

    /// A store in memory (`EventStore.inMemory`), made on first use: previews and tests.
    public static func inMemory() -> EventStoreClient {
        opening { try EventStore.inMemory() }
    }

    /// A client over a store that is already open.
    public init(_ store: EventStore) {
        self.init(store: { store }, close: { try await store.close() })
    }

    private static func opening(_ open: @escaping @Sendable () throws -> EventStore) -> EventStoreClient {
        let opened = OpenedOnce(open)
        return EventStoreClient(
            store: { try await opened.value() },
            close: { try await opened.valueIfMade()?.close() })
    }

}

extension EventStoreClient: DependencyKey {
    /// A durable store at `EventStore.defaultDirectory` (`$EVENTKERNEL_STORE`, else
    /// `./eventkernel-store`), opened on first use.
    public static var liveValue: EventStoreClient { .open(at: EventStore.defaultDirectory) }

    /// Fails the test that uses it without overriding it (as swift-dependencies' test values
    /// do): a test says which store it writes to.
    public static var testValue: EventStoreClient {
        EventStoreClient(
            store: unimplemented("EventStoreClient.store"),
            close: unimplemented("EventStoreClient.close"))
    }

    /// A store in memory.
    public static var previewValue: EventStoreClient { .inMemory() }
}

extension DependencyValues {
    /// The event store the process's repositories share; see ``EventStoreClient``.
    public var eventStore: EventStoreClient {
        get { self[EventStoreClient.self] }
        set { self[EventStoreClient.self] = newValue }
    }
}
