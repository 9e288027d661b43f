package import EventLog

/// What a deletion or purge of one stream did.
public enum StreamDeletion: Hashable, Sendable {
    /// The tombstone was appended: its envelope (position, version, metadata).
    case written(EventEnvelope)
    /// Nothing to delete, nothing written: the stream has no event, or (for a soft delete, when
    /// a registered repository keeps the stream's entity type) its entity does not exist now
    /// (it was deleted already, softly).
    case absent
    /// The stream was purged already: nothing was written.
    case alreadyPurged

    /// The tombstone's envelope, when one was written.
    public var envelope: EventEnvelope? {
        if case .written(let envelope) = self { return envelope }
        return nil
    }

    /// What a command's decision for one stream did, once the command committed: the one
    /// mapping for the store's and the repositories' deletions.
    /// - Parameters:
    ///   - decision: What ``EventStore/appendTombstone(_:to:metadata:in:)`` decided.
    ///   - written: The command's committed envelopes (its tombstones, in the order they were
    ///     decided), advanced past this stream's when it wrote one.
    package init(_ decision: EventStore.TombstoneDecision, written: inout IndexingIterator<[EventEnvelope]>) {
        switch decision {
        case .write:
            // One envelope per `.write`, in order: the command appended nothing else.
            guard let envelope = written.next() else { preconditionFailure("a written tombstone without its envelope") }
            self = .written(envelope)
        case .absent: self = .absent
        case .alreadyPurged: self = .alreadyPurged
        }
    }
}

/// Deleting streams without the domain's code: the kernel's tombstones (``Tombstone``).
///
/// The rules, in one place for the store, the repositories and the CLI:
/// - A soft delete (`$deleted`) of a stream with no event, or whose entity a registered
///   repository says does not exist, writes nothing (``StreamDeletion/absent``). Where no
///   repository keeps the type (the CLI on a type it has no code for), the store cannot tell a
///   live entity from a deleted one: any stream with events gets a `$deleted`.
/// - A purge (`$purged`) of a stream with events is written whether or not its entity exists:
///   purging a soft-deleted stream is how its history is released. A stream with no event is
///   ``StreamDeletion/absent`` (nothing is marked: there is nothing to forget), and a purged
///   one ``StreamDeletion/alreadyPurged``.
/// - Neither is written to a purged stream: the append path refuses it
///   (``RepositoryError/streamPurged(_:)``).
extension EventStore {
    /// Soft-deletes streams, atomically (one batch): each entity leaves every repository's
    /// projection; its events stay (until a compaction, once the stream is purged) and adding
    /// its id again continues the stream.
    /// - Parameters:
    ///   - streams: The streams; each appears once.
    ///   - metadata: Recorded with every tombstone (who deleted, and why).
    /// - Returns: What was done to each stream, in order.
    /// - Throws: ``RepositoryError/misuse(_:)`` (``Misuse/Code/streamChangedTwice``) for a
    ///   stream given twice; storage errors (nothing is written then).
    @discardableResult
    public func delete(streams: [StreamID], metadata: EventMetadata = .none) async throws -> [StreamDeletion] {
        try await end(streams, with: .deleted, metadata: metadata)
    }

    /// Soft-deletes one stream. See ``delete(streams:metadata:)``.
    /// - Throws: Storage errors.
    @discardableResult
    public func delete(stream: StreamID, metadata: EventMetadata = .none) async throws -> StreamDeletion {
        try await delete(streams: [stream], metadata: metadata)[0]
    }

    /// Purges streams, atomically (one batch): each entity leaves every projection, and the
    /// stream is marked for good: no later append to it is accepted
    /// (``RepositoryError/streamPurged(_:)``), across close, reopen and replays from the start,
    /// and ``compact()`` removes its events once its `$purged` event is in a sealed segment
    /// (until then they stay on disk; Docs/Forgetting.md).
    /// - Parameters:
    ///   - streams: The streams; each appears once.
    ///   - metadata: Recorded with every tombstone (who purged, and why).
    /// - Returns: What was done to each stream, in order.
    /// - Throws: ``RepositoryError/misuse(_:)`` (``Misuse/Code/streamChangedTwice``) for a
    ///   stream given twice; storage errors (nothing is written then).
    @discardableResult
    public func purge(streams: [StreamID], metadata: EventMetadata = .none) async throws -> [StreamDeletion] {
        try await end(streams, with: .purged, metadata: metadata)
    }

    /// Purges one stream. See ``purge(streams:metadata:)``.
    /// - Throws: Storage errors.
    @discardableResult
    public func purge(stream: StreamID, metadata: EventMetadata = .none) async throws -> StreamDeletion {
        try await purge(streams: [stream], metadata: metadata)[0]
    }

    /// Whether `stream` is purged: its `$purged` event is committed (or compaction removed the
    /// stream, which the store knows by its digest). A purge still being written is not counted
    /// (its write could fail); appends to such a stream are refused all the same, by the append
    /// path, until it settles.
    /// - Complexity: O(1) on average (and a SHA-256 of the stream once any was compacted).
    public func isPurged(_ stream: StreamID) -> Bool { versions.isPurged(stream) }

    /// How many streams are purged, those compaction removed included.
    public var purgedStreamCount: Int { versions.purgedStreams.count + versions.forgottenCount }

    /// The purged streams, each with the position of its `$purged` event: what compaction
    /// removes (every event of each, up to and including that position's, and nothing
    /// appended after it, since the store accepts none).
    package var purgedStreams: [StreamID: LogPosition] { versions.purgedStreams }

    /// The events of purged streams that come after their stream's first `$purged` event: a
    /// log this store would never write (it refuses every append to a purged stream), but an
    /// older build, or a writer that bypasses the store, could. One pass over the log, from
    /// the first purge's position; `eventkernel verify` reports them as damage.
    /// - Parameter limit: How many to return at most.
    /// - Returns: The offending events, in log order.
    /// - Throws: ``RepositoryError/storage(_:)`` when the log cannot be read.
    package func eventsAfterPurge(limit: Int = 100) throws -> [EventEnvelope] {
        let purged = versions.purgedStreams
        guard let first = purged.values.min(), limit > 0 else { return [] }
        var found: [EventEnvelope] = []
        try forEachEnvelope(from: first, through: nil) { envelope in
            if let at = purged[envelope.stream], envelope.position > at { found.append(envelope) }
            return found.count < limit
        }
        return found
    }

    /// What a command decided for one stream's tombstone.
    package enum TombstoneDecision: Hashable, Sendable {
        case write, absent, alreadyPurged
    }

    /// Decides a tombstone for `stream` as part of `command` and appends it when due: the one
    /// place the rules above live (the store's, the repositories' and the CLI's deletions all
    /// come here).
    /// - Throws: ``RepositoryError/misuse(_:)`` (``Misuse/Code/streamChangedTwice``) when the
    ///   command already appends to `stream`; storage errors reading its version.
    package func appendTombstone(
        _ tombstone: Tombstone, to stream: StreamID, metadata: EventMetadata, in command: inout CommandContext
    ) throws -> TombstoneDecision {
        guard !command.isAppending(to: stream) else {
            throw RepositoryError.misuse(Misuse(.streamChangedTwice, "\(stream) is changed twice in one command; merge the changes into one"))
        }
        // The version first (the command's rule), then the state: a purge committed meanwhile
        // shows in the version, and the append conflicts and decides again.
        let version = try command.version(of: stream)
        if versions.isPurged(stream) { return .alreadyPurged }
        guard version > 0 else { return .absent }
        if tombstone == .deleted, case .source(let source) = versions.lookup(stream), source.containsEntity(of: stream) == false {
            return .absent
        }
        command.append(tombstone.event(for: stream), metadata: metadata)
        return .write
    }

    private func end(_ streams: [StreamID], with tombstone: Tombstone, metadata: EventMetadata) async throws -> [StreamDeletion] {
        guard !streams.isEmpty else { return [] }
        let (decided, envelopes) = try await executeCommitting { command in
            command.reserveCapacity(streams.count)
            return try streams.map { stream in try self.appendTombstone(tombstone, to: stream, metadata: metadata, in: &command) }
        }
        var written = envelopes.makeIterator()
        return decided.map { StreamDeletion($0, written: &written) }
    }
}
