/// A projection that keeps, beside each entity's state, the committed version of its stream,
/// for every stream of one entity type: the store reads those versions from it instead of
/// keeping them a second time.
///
/// Why: a store-wide table of every stream's version duplicates what a repository's projection
/// already holds per entity (its id lookup and row): memory, snapshot bytes naming every id
/// again, and two random hash probes per event in every append and replay (a quarter of an
/// activity commit's fold; Docs/Benchmarks.md, "History"). With the projection as the source,
/// one lookup serves the state and its version.
///
/// The contract the store relies on (Docs/Architecture.md, "The command path"):
/// - The projection folds *every* event of ``versionedEntityType``, deletions included: a
///   deleted entity keeps its version, so that adding it again continues its stream.
/// - ``committedVersion(of:)`` reads under the same lock as the state, and a fold updates both
///   at once, so a version read before the state is never newer than it.
/// - The store folds sources after every other projection, so a version read from a source is
///   never newer than any projection's state either.
///
/// Package access: the store's ordering of folds and snapshots is built around the two
/// repository families (Activities and ``EventSourcedRepository``), which are the sources.
package protocol StreamVersionSource: Projection {
    /// The entity type whose streams' versions this projection keeps; `nil` when it keeps
    /// none (a ``ProjectedState`` not made by a repository).
    var versionedEntityType: String? { get }

    /// The committed version of `stream` (whose entity type is ``versionedEntityType``): the
    /// version of its last folded event, deleted entities included; 0 when it has none.
    /// - Complexity: O(1) on average.
    func committedVersion(of stream: StreamID) -> UInt64

    /// Whether the entity of `stream` exists now (added and not deleted); `nil` when the
    /// projection cannot tell. The store's ``EventStore/delete(stream:metadata:)`` asks it, so
    /// that deleting an entity that is already deleted writes nothing.
    func containsEntity(of stream: StreamID) -> Bool?

    /// Drops the versions kept for `streams`, purged streams whose events compaction removes:
    /// a deleted entity's version is kept so that adding it again continues its stream, but a
    /// purged stream is never continued, and its id must leave the store's snapshots. The store
    /// refuses the streams by digest from then on (``ForgottenStream``).
    func forgetVersions(of streams: [StreamID])
}

extension StreamVersionSource {
    package func containsEntity(of stream: StreamID) -> Bool? { nil }
}
