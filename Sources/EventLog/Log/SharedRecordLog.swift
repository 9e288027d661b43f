/// A log that other writers append to as well: a log on a database server shared by several
/// service instances (`PostgresLog`), or a ``SegmentedLog`` opened read-only beside its writer.
///
/// What such a log adds to ``RecordLog``:
/// - ``RecordLog/bounds`` is this process's view: it covers what the log has learned so far,
///   a gap-free prefix of the shared history, and grows as the log learns more.
/// - ``refresh()`` learns what the others appended up to now.
/// - An append's positions need not follow this process's earlier ones directly: records
///   appended elsewhere may lie between them. They are always above ``RecordLog/bounds`` as it
///   was when the append was enqueued, and the records between are readable once the
///   completion runs.
/// - An append may be refused with ``LogError/Code/conflict`` when another writer changed
///   what it was decided on.
///
/// An `EventStore` over a log whose ``RecordLog/access`` says others may append
/// (``LogAccess/othersMayAppend``) folds what they append into its projections (through
/// ``setAppendedElsewhereHandler(_:)`` and ``refresh()``), so every instance answers queries,
/// observations and commands from the same history. Conforming is what a log can do; its
/// ``RecordLog/access`` says whether a store must: a ``SegmentedLog`` opened for writing
/// conforms too, and is not followed.
public protocol SharedRecordLog: RecordLog {
    /// Learns what other writers appended since the last look, so that ``RecordLog/bounds``
    /// (and reads) cover it. Blocks the calling thread while it asks (a read over the network,
    /// or of the directory).
    /// - Returns: The new bounds.
    /// - Throws: ``LogError`` when the shared log cannot be read.
    @discardableResult
    func refresh() throws -> LogBounds

    /// Sets the closure the log calls, on a thread of its own, after its ``RecordLog/bounds``
    /// grew by records appended elsewhere that it learned of by itself (a notification from
    /// the server, or its periodic look); `nil` removes it. One handler per log: the store
    /// that owns it. The handler may read the log; it must not wait for an append.
    func setAppendedElsewhereHandler(_ handler: (@Sendable () -> Void)?)
}

extension SegmentedLog: SharedRecordLog {
    /// A segmented log learns of its writer's appends only when asked (``refresh()``):
    /// nothing notifies it, so the handler is never called.
    public func setAppendedElsewhereHandler(_ handler: (@Sendable () -> Void)?) {}
}
