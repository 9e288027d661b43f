public import EventLog

/// The errors repositories and the event store report, each saying what happened and where.
///
/// The cases separate who is at fault, so a caller can switch on them: the caller's data
/// (``validationFailed(_:)``, ``invalidQuery(_:)``, ``limitExceeded(_:)``), the caller's code
/// (``misuse(_:)``: the API used in a way it does not allow), concurrency (``conflict(stream:expected:actual:)``),
/// stored data this code cannot read (``undecodableEvent(_:)``) and the storage underneath
/// (``storage(_:)``).
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
    /// An entity failed the domain's validation (a repository's `validate`, or the domain's own
    /// rules such as an end before the start); nothing was written.
    case validationFailed(String)
    /// The API was used in a way it does not allow (a projection registered twice, a stream
    /// changed twice in one command, ...): a programming error, not bad data. ``Misuse/code``
    /// says which rule; nothing was written.
    case misuse(Misuse)
    /// A value is beyond what the log can store (a stream at the largest version, a date a log
    /// timestamp cannot hold); nothing was written.
    case limitExceeded(LimitExceeded)
    /// A query was malformed (for example a range whose end precedes its start).
    case invalidQuery(String)
    /// The storage underneath failed (the log, a file); the failure keeps its cause.
    case storage(StorageFailure)
    /// A stored event could not be folded into a projection (most often: it was written with a
    /// schema version the code no longer decodes). The store refuses to open rather than skip
    /// it; nothing on disk is changed.
    case undecodableEvent(UndecodableEvent)
    /// The stream was purged (a ``Tombstone/purged`` event ends it): nothing can be appended
    /// to it again, through any repository, the CLI or an import; nothing was written.
    case streamPurged(StreamID)
    /// The store was closed.
    case closed

    public var description: String {
        switch self {
        case .notFound(let id): "no entity with id \(id) exists"
        case .alreadyExists(let id): "an entity with id \(id) already exists"
        case .conflict(let stream, let expected, let actual):
            "version conflict on \(stream): expected version \(expected), found \(actual); reload and retry"
        case .validationFailed(let why): "validation failed: \(why)"
        case .misuse(let misuse): misuse.description
        case .limitExceeded(let limit): limit.description
        case .invalidQuery(let why): "invalid query: \(why)"
        case .storage(let failure): "storage failure: \(failure)"
        case .undecodableEvent(let failure): failure.description
        case .streamPurged(let stream): "\(stream) was purged: nothing can be appended to it again (use another id)"
        case .closed: "the store is closed"
        }
    }

    /// The log error underneath, when the log failed (code, file, offset, position).
    public var logError: LogError? {
        if case .storage(let failure) = self { return failure.logError }
        return nil
    }
}

/// The API used in a way it does not allow: which rule (``code``) and where (``message``).
public struct Misuse: Error, Hashable, Sendable, CustomStringConvertible {
    /// The rule broken.
    public enum Code: String, Hashable, Sendable {
        /// Two projections of one store have the same name (snapshot files are keyed by it).
        case projectionNameTaken
        /// Two projections claim to keep the stream versions of one entity type.
        case streamVersionsKeptTwice
        /// ``EventStore/writeSnapshots()`` on a store opened without a snapshot directory.
        case noSnapshotDirectory
        /// One command appends to one stream twice (its second change would not see its first).
        case streamChangedTwice
        /// A batch update changed an entity's id.
        case idChanged
        /// A rebuild of a projection that is not registered with the store, from an instance
        /// that is not a fresh one of the same name, or while another rebuild of it is under way
        /// (``EventStore/rebuild(_:from:progress:)``).
        case invalidRebuild
        /// A field event not registered on the repository's schema (``EntitySchema/recording(_:)``).
        case unregisteredFieldEvent
        /// A repository recording field events indexes a computed property, or a property
        /// stored in part of a field's bytes: its keys could not follow a field event.
        case fieldEventIndexConflict
        /// ``EventStore/backup(to:options:)`` of a store whose log is not a local directory (an
        /// in-memory or PostgreSQL log: `eventkernel copy` copies the latter).
        case backupUnsupported
        /// An event whose type starts with `$` (reserved for the kernel) that is not a valid
        /// tombstone: an unknown `$` name, a payload, another schema version, or a stream with
        /// no event before it (``Tombstone/validate(eventType:schemaVersion:payloadCount:stream:versionBefore:)``).
        case invalidTombstone
        /// ``EventStore/compact()`` of a store whose log is not a local directory this store
        /// writes (an in-memory, PostgreSQL or read-only log).
        case compactionUnsupported
        /// ``EventStore/compact()`` while another compaction of the store is under way.
        case compactionRunning
    }

    /// The rule broken.
    public var code: Code
    /// What was done and where (the names, the stream).
    public var message: String

    /// Creates a misuse.
    /// - Parameters:
    ///   - code: The rule broken.
    ///   - message: What was done and where.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "misuse (\(code.rawValue)): \(message)" }
}

/// A value beyond what the log can store: which limit (``code``), what and where (``message``),
/// and the error underneath, if one reported it.
public struct LimitExceeded: Error, Hashable, Sendable, CustomStringConvertible {
    /// The limit.
    public enum Code: String, Hashable, Sendable {
        /// A stream is at the largest version a stream can reach.
        case streamVersion
        /// A date outside the years a log timestamp holds (1678...2262), or not finite.
        case timestamp
        /// A projection name (a repository's is `"repository:"` and its type name) longer
        /// than a snapshot header holds: 65,535 UTF-8 bytes.
        case projectionName
    }

    /// The limit.
    public var code: Code
    /// What exceeded it and where.
    public var message: String
    /// The error underneath (the log's `invalidArgument` for a timestamp), if any.
    public var cause: (any Error)?

    /// Creates the failure.
    /// - Parameters:
    ///   - code: The limit.
    ///   - message: What exceeded it and where.
    ///   - cause: The error underneath, if any.
    public init(_ code: Code, _ message: String, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String {
        guard let cause else { return "limit exceeded (\(code.rawValue)): \(message)" }
        return "limit exceeded (\(code.rawValue)): \(message): \(cause)"
    }

    public static func == (lhs: LimitExceeded, rhs: LimitExceeded) -> Bool {
        lhs.description == rhs.description
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(description) }
}

/// Why an event did not decode although its bytes may be sound: this code does not know its
/// type or its schema version. It is the ``UndecodableEvent/cause`` the store reports (the
/// event's position and stream are there), never a validation failure.
public enum EventDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// No event of this type is known for the entity type (or to the codec).
    case unknownEventType(String, entityType: String)
    /// The event type's schema version is neither the current one nor one with an upcaster.
    case unknownSchemaVersion(UInt16, eventType: String, current: UInt16)
    /// A field event (``FieldEvent``) of a stream whose entity does not exist at that point of
    /// the log: only a writer that bypassed the repository's commands can append one.
    case noEntityForFieldEvent(eventType: String, stream: StreamID)

    public var description: String {
        switch self {
        case .unknownEventType(let type, let entityType):
            "unknown event type \"\(type)\" for entity type \(entityType)"
        case .unknownSchemaVersion(let version, let type, let current):
            "event type \"\(type)\" schema version \(version) is unknown to this codec (current \(current)); register an upcaster"
        case .noEntityForFieldEvent(let type, let stream):
            "the field event \"\(type)\" sets a property of \(stream), which does not exist at that point of the log"
        }
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

    /// Why, when this code does not know the event's type or schema version (rather than the
    /// bytes failing to decode).
    public var unknownEvent: EventDecodingError? { cause as? EventDecodingError }

    /// Creates the failure for `envelope`.
    public init(projection: String, envelope: EventEnvelope, cause: any Error) {
        self.projection = projection
        self.position = envelope.position
        self.eventType = envelope.eventType
        self.schemaVersion = envelope.schemaVersion
        self.stream = envelope.stream
        self.cause = cause
    }

    /// What to do about it, by cause.
    private var remedy: String {
        switch cause as? EventDecodingError {
        case .noEntityForFieldEvent?:
            "a writer that bypassed the repository's commands appended it; `eventkernel verify` locates the log's records"
        case .unknownEventType?:
            "if a build that wrote it declares more events, register them (EntitySchema.recording for field events, Docs/ChangingEntities.md)"
        default:
            "if the entity's shape changed, register an upcaster from schema version \(schemaVersion) (Docs/ChangingEntities.md)"
        }
    }

    public var description: String {
        "projection \"\(projection)\" cannot fold the event at position \(position) (\(eventType), schema version \(schemaVersion), stream \(stream)): \(cause). Nothing was skipped and nothing on disk changed; " + remedy
    }

    public static func == (lhs: UndecodableEvent, rhs: UndecodableEvent) -> Bool {
        lhs.description == rhs.description
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(description) }
}
