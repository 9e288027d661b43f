/// What a log reports of its writes, for metrics: the seam that keeps the log free of any
/// metrics library. The `EventKernelMetrics` product implements it on swift-metrics; tests and
/// other telemetry can implement it directly.
///
/// Set it in ``SegmentedLog/Configuration/instrumentation`` (an `EventStore` opened with an
/// instrumentation passes it on). `nil`, the default, costs one check per write round.
///
/// The log calls it on the thread that wrote, after the write (and its sync) and outside the
/// log's locks, once per round of group commit: keep it cheap and never block.
public protocol LogInstrumentation: Sendable {
    /// A round of group commit was written: `records` records from `appends` append calls in
    /// `bytes` bytes (batch headers and stored payloads), made durable in `sync` (synced policy:
    /// its `pwrite` into the page cache and its `fdatasync`), or left for a later sync (`nil`,
    /// buffered policy).
    func logWroteRound(appends: Int, records: Int, bytes: Int, sync: Duration?)

    /// A sync of buffered appends (the buffered policy's interval, an explicit
    /// `synchronize()`, the close) took `duration`.
    func logSynced(duration: Duration)
}
