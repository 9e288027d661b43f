/// The identity of an entity in a store: its type and its id. The unit of concurrency, history
/// and time travel, as a stream is in every event store.
///
/// Thread 100 and post 100 of a forum are two streams (`Thread/100`, `Post/100`): each has its
/// own version, so one batch may change both. Entity types compare byte for byte, like
/// ``EntityID``'s strings.
public struct StreamID: Hashable, Sendable, CustomStringConvertible {
    /// The entity type, e.g. `"activity"`, `"Account"`.
    public var entityType: String
    /// The entity's id within its type.
    public var entityID: EntityID

    /// Creates a stream identity.
    /// - Parameters:
    ///   - entityType: The entity type name.
    ///   - entityID: The id within that type.
    public init(_ entityType: String, _ entityID: EntityID) {
        self.entityType = entityType
        self.entityID = entityID
    }

    /// `<entityType>/<entityID>`, e.g. `Post/100`.
    public var description: String { "\(entityType)/\(entityID)" }

    public static func == (lhs: StreamID, rhs: StreamID) -> Bool {
        lhs.entityID == rhs.entityID && lhs.entityType.utf8.elementsEqual(rhs.entityType.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(entityType)
        hasher.combine(entityID)
    }

    /// The entity type that records of envelope format 1 (which had no stream) belong to: the
    /// event type up to its last `.` (`"Account.added"` → `"Account"`), the naming every writer
    /// of that format used; the whole event type when it has no `.`.
    /// Whether `entityType` is what ``legacyEntityType(ofEventType:)`` derives from `eventType`
    /// (checked without building a string: it runs for every event written).
    static func isImplicit(entityType: String, ofEventType eventType: String) -> Bool {
        let type = entityType.utf8, event = eventType.utf8
        guard event.count > type.count, event.starts(with: type) else { return false }
        let rest = event.dropFirst(type.count)
        return rest.first == UInt8(ascii: ".") && !rest.dropFirst().contains(UInt8(ascii: "."))
    }

    static func legacyEntityType(ofEventType eventType: String) -> String {
        guard let dot = eventType.utf8.lastIndex(of: UInt8(ascii: ".")) else { return eventType }
        return String(eventType[..<dot])
    }
}
