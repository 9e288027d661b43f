
/// How `observe(query:)` works for both repositories.
///
/// 1. The projection observer is registered first, then the initial result is computed and
///    yielded, so no commit can fall between the two unseen.
/// 2. After each commit, the observer checks whether any changed activity (before or after
///    the change) passes the query's filter. Only then is the observing task poked.
/// 3. The task recomputes the query from the current state and yields it only if it differs
///    from the last result yielded. Pokes coalesce, so a slow consumer gets the newest result,
///    never a stale or an unfiltered one, and the commit path never runs a query.
/// 4. When the consumer stops (or the stream is dropped), the task ends and the observer is
///    removed.
enum ActivityObservation {
    static func stream(query: ActivityQuery, projection: ActivityProjection) -> AsyncStream<[ActivityModel]> {
        let (pokes, poke) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let token = projection.addObserver { changes in
            let relevant = changes.contains { change in
                change.old.map(query.matches) == true || change.new.map(query.matches) == true
            }
            if relevant { poke.yield() }
        }
        let (results, output) = AsyncStream<[ActivityModel]>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let current: () -> [ActivityModel] = {
            // An invalid query observes as empty: there is no error channel in AsyncStream.
            (try? projection.read { try $0.fetch(query) }) ?? []
        }
        let initial = current()
        output.yield(initial)
        let task = Task {
            var last = initial
            for await _ in pokes {
                let next = current()
                if next != last {
                    last = next
                    output.yield(next)
                }
            }
            output.finish()
        }
        output.onTermination = { _ in
            task.cancel()
            poke.finish()
            projection.removeObserver(token)
        }
        return results
    }
}
