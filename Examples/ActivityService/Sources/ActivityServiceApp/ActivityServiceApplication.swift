import EventLog
public import Foundation
public import Hummingbird
public import Logging
import Metrics
public import Prometheus

/// Which storage the service runs on.
public enum BackendKind: String, Sendable, CaseIterable {
    /// EventKernel: an event-sourced store in the data directory (the default).
    case eventkernel
    /// SQLite through GRDB: `activities.sqlite` in the data directory.
    case grdb

    /// Opens the backend in `directory`.
    /// - Parameters:
    ///   - directory: The data directory (created if needed).
    ///   - synced: Whether a write returns only once it is on disk (both backends' default);
    ///     otherwise EventKernel syncs every 100 ms and SQLite runs `synchronous = NORMAL`.
    ///   - logger: The backend's logger.
    /// - Throws: What opening the store or the database throws.
    public func open(in directory: URL, synced: Bool = true, logger: Logger) throws -> any ActivityBackend {
        switch self {
        case .eventkernel: try EventKernelBackend(directory: directory, durability: synced ? .synced : .buffered(syncInterval: .milliseconds(100)), logger: logger)
        case .grdb: try GRDBBackend(directory: directory, synced: synced)
        }
    }
}

/// Builds the service: the activity routes over `backend`, request metrics, `/metrics` in the
/// Prometheus text format when `registry` is given, and `/health`; the backend's lifecycle
/// service runs beside the server (closing it after the server stopped).
/// - Parameters:
///   - backend: The storage.
///   - configuration: Address and server options.
///   - registry: The Prometheus registry `MetricsSystem` was bootstrapped with, or `nil`.
///   - logger: The server's logger.
public func buildApplication(
    backend: any ActivityBackend, configuration: ApplicationConfiguration = ApplicationConfiguration(),
    registry: PrometheusCollectorRegistry? = nil, logger: Logger = Logger(label: "ActivityService")
) -> some ApplicationProtocol {
    let router = Router()
    router.middlewares.add(MetricsMiddleware())
    router.middlewares.add(RepositoryErrorMiddleware())
    ActivityRoutes(backend: backend).add(to: router)
    router.get("health") { _, _ in "ok" }
    if let registry {
        router.get("metrics") { _, _ -> Response in
            var bytes: [UInt8] = []
            registry.emit(into: &bytes)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
        }
    }
    return Application(router: router, configuration: configuration, services: [backend.lifecycle], logger: logger)
}
