import EventLog
import KernelPrimitives

/// Stream versions as the store answers them: from the version table, from the projection
/// that keeps its entity type's versions, or read once from the log for a type whose
/// repository is not registered (Docs/Architecture.md, "Where versions live").
extension EventStore {
    /// The last committed version of a stream, 0 when it has no event.
    /// - Throws: ``RepositoryError/storage(_:)`` when the version must be read from the log
    ///   and that fails: for a stream whose entity type's versions are kept by a repository's
    ///   projection (it keeps each entity's version with its state) that was registered when the
    ///   store's last snapshot was written but not yet in this process (create the repository
    ///   first and this never happens).
    /// - Complexity: O(1); once per process, O(log) for such an entity type.
    public func version(of stream: StreamID) throws -> UInt64 {
        try versionAndBasis(of: stream).version
    }

    /// A stream's committed version, and the commit count read before it (the basis of a
    /// command's fast path through ``VersionTable/reserve(_:basis:planned:)``).
    func versionAndBasis(of stream: StreamID) throws -> (version: UInt64, basis: UInt64) {
        while true {
            let basis = versions.commitBasis
            switch versions.lookup(stream) {
            case .known(let version): return (version, basis)
            case .source(let source): return (source.committedVersion(of: stream), basis)
            case .unknown: try resolveAwaitingVersions()
            }
        }
    }

    /// Reads from the log the versions of entity types whose source (a repository's
    /// projection) kept them when the version snapshot was written and has not registered in
    /// this process: one scan of the whole log, then they are kept by the version table.
    /// - Complexity: O(log).
    func resolveAwaitingVersions() throws {
        try resolution.withLock { (_) throws in
            let types = versions.awaitingEntityTypes
            guard !types.isEmpty else { return }
            logger.notice("reading stream versions from the log: their repository is not registered",
                          metadata: ["entityTypes": "\(types.map(\.value).sorted())"])
            var found: [StreamID: UInt64] = [:]
            let end = log.bounds.nextPosition
            if end > 0 {
                try forEachEnvelope(from: 0, through: end - 1) { envelope in
                    if types.contains(ExactString(envelope.stream.entityType)) {
                        found[envelope.stream] = Swift.max(found[envelope.stream] ?? 0, envelope.entityVersion)
                    }
                    return true
                }
            }
            versions.resolve(types, found: found)
        }
    }
}
