public import Activities
public import ActivityWorkload
public import Foundation
public import ServiceLifecycle

/// What the HTTP service needs of its storage: the apps' `ActivityRepositoryProtocol`, plus
/// versions (for `ETag` / `If-Match`) and history. Two implementations, chosen at start:
/// ``EventKernelBackend`` (the default) and ``GRDBBackend`` (SQLite), which refuse the same
/// input with the same `RepositoryError`s, so the routes cannot tell them apart.
public protocol ActivityBackend: ActivityRepositoryProtocol {
    /// The backend's name in logs and metrics: `eventkernel` or `grdb`.
    var name: String { get }

    /// The activity with `id` and its version (how many changes were recorded for the id),
    /// or `nil`. The version is never newer than the activity returned with it.
    func versionedActivity(id: UUID) async throws -> (activity: ActivityModel, version: UInt64)?

    /// Replaces an existing activity if its version is still `expectedVersion`.
    /// - Throws: `RepositoryError.conflict` when it changed since, `notFound`, `validationFailed`.
    func update(_ activity: ActivityModel, expectedVersion: UInt64) async throws

    /// Every change of one activity, oldest first; empty for an id never written.
    func history(of id: UUID) async throws -> [ActivityChange]

    /// Applies a generated history atomically (all or none), each operation checked as a
    /// single write is: how `seed` fills a backend for the load test.
    func apply(_ operations: [ActivityOperation]) async throws

    /// Closes the backend: live feeds end, the store syncs (EventKernel also writes its
    /// snapshot), later calls fail.
    func close() async throws

    /// A service that closes the backend when the service group shuts down (list it before
    /// the HTTP server: the server stops first, then the backend closes).
    var lifecycle: any Service { get }
}

/// One recorded change of an activity.
public struct ActivityChange: Sendable, Equatable {
    /// What happened.
    public enum Kind: String, Sendable {
        case added, updated, ended, deleted
    }

    /// The activity's version after the change (1 for its first).
    public var version: UInt64
    /// When the change was recorded.
    public var recordedAt: Date
    /// What happened.
    public var kind: Kind
    /// The activity after the change; `nil` after a deletion.
    public var activity: ActivityModel?

    /// Creates a change.
    public init(version: UInt64, recordedAt: Date, kind: Kind, activity: ActivityModel?) {
        self.version = version
        self.recordedAt = recordedAt
        self.kind = kind
        self.activity = activity
    }
}
