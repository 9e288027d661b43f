extension AsyncStream where Element: Sendable {
    /// A stream that forwards the stream `make` returns once it has it: an observation of a
    /// repository that opens on first use. When `make` fails the stream ends at once; when the
    /// consumer stops, the forwarding stops too.
    /// - Parameter make: Opens what is observed and returns its stream.
    package static func resolving(_ make: @escaping @Sendable () async throws -> AsyncStream<Element>) -> AsyncStream<Element> {
        AsyncStream { continuation in
            let task = Task {
                if let stream = try? await make() {
                    for await element in stream { continuation.yield(element) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
