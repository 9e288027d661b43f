/// Runs `body`, then awaits `close`, whether `body` returned or threw: a check that fails must
/// not leave its store open for the next trial (an unawaited close left to an unstructured task
/// runs only once a trial loop lets go of the cooperative threads, and descriptors pile up).
///
/// When `body` throws, its error is the one rethrown and a failing close is ignored: the body's
/// error says what went wrong first.
/// - Parameters:
///   - close: Closes what `body` uses (a log, a store).
///   - body: The work.
/// - Returns: What `body` returned.
/// - Throws: `body`'s error, else `close`'s.
public func withClosing<T>(_ close: () async throws -> Void, _ body: () async throws -> T) async throws -> T {
    let result: T
    do {
        result = try await body()
    } catch {
        try? await close()
        throw error
    }
    try await close()
    return result
}
