/// The kernel's own events that end a stream: a soft deletion (`$deleted`) and a purge
/// (`$purged`), appended to the entity's own stream at its next version with the caller's
/// metadata, so the log says who deleted what and when.
///
/// They belong to the kernel, not to a domain: they are written without the domain's code
/// (``EventStore/delete(stream:metadata:)``, ``EventStore/purge(stream:metadata:)``, the
/// `eventkernel delete` and `purge` commands), and every repository's projection drops the
/// entity on either, as on its own delete event. Their payload is empty and their schema
/// version is ``schemaVersion`` (Docs/FileFormat.md, "Tombstone events").
///
/// A `$purged` event marks its stream for good: the store refuses every later append to it
/// (``RepositoryError/streamPurged(_:)``), across close, reopen and full replays, and compaction
/// will remove the stream's events (Docs/Forgetting.md).
public enum Tombstone: String, Hashable, Sendable, CaseIterable {
    /// A soft deletion: the entity leaves projections; adding its id again continues the stream.
    case deleted = "$deleted"
    /// A purge: the entity leaves projections and the stream can never be appended to again.
    case purged = "$purged"

    /// The schema version tombstones are written with (their payload is empty in every version).
    public static let schemaVersion: UInt16 = 1

    /// The event type name as the log stores it (`"$deleted"`, `"$purged"`).
    public var eventType: String { rawValue }

    /// The tombstone an event type names, or `nil` for any other event type.
    /// - Parameter eventType: An event type name.
    /// - Complexity: O(1): one byte is looked at for every other name that does not start with `$`.
    public init?(eventType: String) {
        guard eventType.utf8.first == UInt8(ascii: "$") else { return nil }
        self.init(rawValue: eventType)
    }

    /// The tombstone event for `stream`, ready to append.
    /// - Parameter stream: The stream it ends.
    public func event(for stream: StreamID) -> EncodedEvent {
        EncodedEvent(eventType: rawValue, schemaVersion: Self.schemaVersion, stream: stream, payload: [])
    }

    /// The one rule for an event whose type starts with `$` (the kernel's reserved names): it
    /// must be a known tombstone, with an empty payload and schema version ``schemaVersion``,
    /// on a stream with at least one event before it. The store's append path applies it to
    /// every event (so no repository, import or CLI can store a tombstone a build could not
    /// read back), and import's checking pass calls it for each line.
    /// - Parameters:
    ///   - eventType: The event's type; names that do not start with `$` pass at once.
    ///   - schemaVersion: The event's schema version.
    ///   - payloadCount: Its payload's size in bytes.
    ///   - stream: Its stream, named in the error.
    ///   - versionBefore: The stream's version before the event (0: no event yet).
    /// - Throws: ``RepositoryError/misuse(_:)`` (``Misuse/Code/invalidTombstone``) naming the
    ///   stream and what is wrong.
    public static func validate(
        eventType: String, schemaVersion: UInt16, payloadCount: Int, stream: StreamID, versionBefore: UInt64
    ) throws(RepositoryError) {
        guard eventType.utf8.first == UInt8(ascii: "$") else { return }
        func refuse(_ problem: String) -> RepositoryError {
            .misuse(Misuse(.invalidTombstone, "the \(eventType) event of \(stream) \(problem)"))
        }
        if eventType == ForgottenStream.eventType {
            throw refuse("is a compaction receipt (ForgottenStream): only compaction writes one, in place of a `$purged` event")
        }
        guard Tombstone(rawValue: eventType) != nil else {
            throw refuse("is no tombstone (\(Tombstone.allCases.map(\.rawValue).joined(separator: ", "))): event types starting with $ are the kernel's")
        }
        guard payloadCount == 0 else { throw refuse("has a \(payloadCount)-byte payload; a tombstone's is empty") }
        guard schemaVersion == Self.schemaVersion else {
            throw refuse("has schema version \(schemaVersion); a tombstone's is \(Self.schemaVersion)")
        }
        guard versionBefore > 0 else { throw refuse("would be the stream's first event; a tombstone ends a stream that has events") }
    }
}
