import EventKernel

/// `observe(query:)` for both Activities repositories, on the kernel's one observation path
/// (`QueryObservation`: listener first, recompute outside locks, drop duplicates, end on close).
///
/// The listener runs in the commit path and pokes only when a changed activity (before or after
/// the change) passes the query's filter, so commits that cannot alter the result cost the
/// observing task nothing.
enum ActivityObservation {
    static func stream(query: ActivityQuery, projection: ActivityProjection, store: EventStore) -> AsyncStream<[ActivityModel]> {
        QueryObservation.stream(
            store: store,
            listen: { poke in
                let token = projection.addListener { changes in
                    // No changes: a rebuild replaced the whole index.
                    let relevant = changes.isEmpty || changes.contains { change in
                        change.old.map(query.matches) == true || change.new.map(query.matches) == true
                    }
                    if relevant { poke() }
                }
                return { projection.removeListener(token) }
            },
            // An invalid query observes as empty: there is no error channel in AsyncStream.
            fetch: { (try? projection.read { try $0.fetch(query) }) ?? [] },
            isDuplicate: { $0 == $1 },
            output: { $0 })
    }
}
