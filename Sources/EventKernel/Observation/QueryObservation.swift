/// How `observe` works for every repository family (generic and Activities): one
/// implementation, so every observation has the same guarantees.
///
/// 1. A commit listener is registered first, then the initial result is computed and yielded,
///    so no commit can fall between the two unseen.
/// 2. After each commit the listener decides (cheaply, in the commit path, with no user code)
///    whether the commit may concern the query, and only then pokes the observing task.
/// 3. The task recomputes the query outside every lock (user predicates run there) and yields
///    it only if it differs from the last result yielded. Pokes coalesce, so a slow consumer
///    gets the newest result, never a stale or an unfiltered one.
/// 4. The stream ends when the consumer stops or the store closes (after yielding what the
///    last commits changed); the listener is then removed.
package enum QueryObservation {
    /// Creates an observation stream.
    /// - Parameters:
    ///   - store: The store; its ``EventStore/close()`` ends the stream.
    ///   - listen: Registers a poke to call after commits that may change the result, and
    ///     returns the function that unregisters it.
    ///   - fetch: Computes the current result; runs outside every lock.
    ///   - isDuplicate: Whether a new result is the same as the last one yielded.
    ///   - output: What the stream yields for a result.
    package static func stream<Value: Sendable, Output: Sendable>(
        store: EventStore,
        listen: (@escaping @Sendable () -> Void) -> (@Sendable () -> Void),
        fetch: @escaping @Sendable () -> Value,
        isDuplicate: @escaping @Sendable (Value, Value) -> Bool,
        output transform: @escaping @Sendable (Value) -> Output
    ) -> AsyncStream<Output> {
        let (pokes, poke) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let unlisten = listen { poke.yield() }
        let (results, output) = AsyncStream<Output>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let initial = fetch()
        output.yield(transform(initial))
        let task = Task {
            var last = initial
            for await _ in pokes {
                let next = fetch()
                if !isDuplicate(last, next) {
                    last = next
                    output.yield(transform(next))
                }
            }
            output.finish()
        }
        // Ending the pokes lets the task yield a last buffered change, then finish the stream.
        let closeToken = store.addCloseHandler { poke.finish() }
        let instrumentation = store.instrumentation
        instrumentation?.observersChanged(by: 1)
        output.onTermination = { [weak store] _ in
            instrumentation?.observersChanged(by: -1)
            task.cancel()
            poke.finish()
            unlisten()
            if let closeToken { store?.removeCloseHandler(closeToken) }
        }
        return results
    }
}
