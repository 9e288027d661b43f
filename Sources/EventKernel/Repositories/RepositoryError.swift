/// The errors repositories and the event store report, each saying what happened and to which id.
public enum RepositoryError: Error, Hashable, Sendable, CustomStringConvertible {
    /// No entity has this id.
    case notFound(EntityID)
    /// An entity with this id already exists.
    case alreadyExists(EntityID)
    /// Optimistic concurrency: the entity's version was `actual`, the caller expected `expected`.
    case conflict(entity: EntityID, expected: UInt64, actual: UInt64)
    /// The input was rejected before anything was written.
    case validationFailed(String)
    /// A query was malformed (for example a range whose end precedes its start).
    case invalidQuery(String)
    /// The storage underneath failed (the log, a decode of stored bytes); the text says how.
    case storage(String)
    /// The store was closed.
    case closed

    public var description: String {
        switch self {
        case .notFound(let id): "no entity with id \(id) exists"
        case .alreadyExists(let id): "an entity with id \(id) already exists"
        case .conflict(let id, let expected, let actual):
            "version conflict on entity \(id): expected version \(expected), found \(actual); reload and retry"
        case .validationFailed(let why): "validation failed: \(why)"
        case .invalidQuery(let why): "invalid query: \(why)"
        case .storage(let why): "storage failure: \(why)"
        case .closed: "the store is closed"
        }
    }
}
