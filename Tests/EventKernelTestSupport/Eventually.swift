/// Waits until `condition` holds, checking it every `interval`, for `limit` of checks: for what
/// another thread, task or process makes true (a fold of another instance's append, a metric
/// recorded off the calling task).
///
/// The default limit is long on purpose: it costs nothing when the condition comes true, and
/// the whole suite runs in parallel on a few cores, where other tests' synchronous work (crash
/// suites waiting on their children, the corruption sweep) can hold every cooperative thread
/// for tens of seconds; a short limit then fails a test that was merely not scheduled.
/// - Returns: Whether it held (checked once more at the deadline).
/// - Throws: What `condition` throws, or `CancellationError`.
public func eventually(
    every interval: Duration = .milliseconds(5), within limit: Duration = .seconds(180), _ condition: () throws -> Bool
) async throws -> Bool {
    // The limit counts checks, not wall time: a test starved of threads by other tests (under a
    // sanitizer, for minutes) makes no checks meanwhile, and is not failed for it. A condition
    // that never comes true still fails after at least `limit` of checking.
    let checks = max(1, Int(limit / interval))
    for _ in 0..<checks {
        if try condition() { return true }
        try await Task.sleep(for: interval)
    }
    return try condition()
}
