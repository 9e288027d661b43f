/// Waits until `condition` holds, checking it every `interval`, for at most `limit`: for what
/// another thread, task or process makes true (a fold of another instance's append, a metric
/// recorded off the calling task).
/// - Returns: Whether it held (checked once more at the deadline).
/// - Throws: What `condition` throws, or `CancellationError`.
public func eventually(
    every interval: Duration = .milliseconds(5), within limit: Duration = .seconds(10), _ condition: () throws -> Bool
) async throws -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        try await Task.sleep(for: interval)
    }
    return try condition()
}
