public import EventLog

/// The errors repositories and the event store report, each saying what happened and where.
///
/// Failures underneath (the log, a snapshot file, a decoder) are kept, not flattened into a
/// string: ``StorageFailure/cause`` holds the original error (a `LogError` with its code, file,
/// offset and position), so callers and the CLI can tell damage from a full disk.
public enum RepositoryError: Error, Hashable, Sendable, CustomStringConvertible {
    /// No entity has this id.
    case notFound(EntityID)
    /// An entity with this id already exists.
    case alreadyExists(EntityID)
    /// Optimistic concurrency: the stream's version was `actual`, the caller expected `expected`.
    case conflict(stream: StreamID, expected: UInt64, actual: UInt64)
    /// The input was rejected before anything was written.
    case validationFailed(String)
    /// A query was malformed (for example a range whose end precedes its start).
    case invalidQuery(String)
    /// The storage underneath failed (the log, a file); the failure keeps its cause.
    case storage(StorageFailure)
    /// A stored event could not be folded into a projection (most often: it was written with a
    /// schema version the code no longer decodes). The store refuses to open rather than skip
    /// it; nothing on disk is changed.
    case undecodableEvent(UndecodableEvent)
    /// The store was closed.
    case closed

    public var description: String {
        switch self {
        case .notFound(let id): "no entity with id \(id) exists"
        case .alreadyExists(let id): "an entity with id \(id) already exists"
        case .conflict(let stream, let expected, let actual):
            "version conflict on \(stream): expected version \(expected), found \(actual); reload and retry"
        case .validationFailed(let why): "validation failed: \(why)"
        case .invalidQuery(let why): "invalid query: \(why)"
        case .storage(let failure): "storage failure: \(failure)"
        case .undecodableEvent(let failure): failure.description
        case .closed: "the store is closed"
        }
    }

    /// The log error underneath, when the log failed (code, file, offset, position).
    public var logError: LogError? {
        if case .storage(let failure) = self { return failure.logError }
        return nil
    }
}

/// A failure of the storage underneath a repository: what was being done, and the error that
/// caused it.
public struct StorageFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// What failed, in words (the cause's own description is appended by ``description``).
    public var message: String
    /// The underlying error: a `LogError`, a `BinaryDecodingError`, a system error.
    public var cause: (any Error)?

    /// Creates a failure.
    /// - Parameters:
    ///   - message: What was being done.
    ///   - cause: The error underneath, if any.
    public init(_ message: String, cause: (any Error)? = nil) {
        self.message = message
        self.cause = cause
    }

    /// A log failure, keeping the `LogError`.
    public init(_ error: LogError) {
        self.init("the log failed", cause: error)
    }

    /// The `LogError` underneath, if the log failed.
    public var logError: LogError? { cause as? LogError }

    public var description: String {
        guard let cause else { return message }
        return "\(message): \(cause)"
    }

    public static func == (lhs: StorageFailure, rhs: StorageFailure) -> Bool {
        lhs.description == rhs.description
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(description) }
}

/// A stored event that a projection could not fold: where it is, what it is, and why.
public struct UndecodableEvent: Error, Hashable, Sendable, CustomStringConvertible {
    /// The projection that failed, e.g. `"repository:Account"`.
    public var projection: String
    /// The event's log position.
    public var position: LogPosition
    /// The event type name.
    public var eventType: String
    /// The schema version the event was written with.
    public var schemaVersion: UInt16
    /// The stream the event belongs to.
    public var stream: StreamID
    /// The decoder's or reducer's error.
    public var cause: any Error

    /// Creates the failure for `envelope`.
    public init(projection: String, envelope: EventEnvelope, cause: any Error) {
        self.projection = projection
        self.position = envelope.position
        self.eventType = envelope.eventType
        self.schemaVersion = envelope.schemaVersion
        self.stream = envelope.stream
        self.cause = cause
    }

    public var description: String {
        "projection \"\(projection)\" cannot fold the event at position \(position) (\(eventType), schema version \(schemaVersion), stream \(stream)): \(cause). Nothing was skipped and nothing on disk changed; if the entity's shape changed, register an upcaster from schema version \(schemaVersion) (Docs/ChangingEntities.md)"
    }

    public static func == (lhs: UndecodableEvent, rhs: UndecodableEvent) -> Bool {
        lhs.description == rhs.description
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(description) }
}
