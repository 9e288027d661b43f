#if PostgreSQL
import EventLog
import Logging
import PostgresNIO

extension PostgresLog {
    /// Runs until the log closes: whenever rung (a notification, the poll timer, the listener
    /// reconnecting), reads what other instances committed beyond this instance's view and,
    /// when there was something, calls the store's handler.
    ///
    /// Notifications are only a hint: the read asks for every position from the view's end,
    /// so a lost, late or coalesced notification costs at most one poll interval, never an
    /// event.
    func runFollower() async {
        while await followerBell.wait() {
            do {
                if try await fetchNew() {
                    appendedElsewhere.withLock { $0 }?()
                }
            } catch {
                logger.notice("could not read other instances' appends; retrying at the next poll", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Learns a page of records read from the server from position `next` on (the view's next
    /// when the page was asked for). Positions are gap-free (assigned under the head row's
    /// lock), so a page that does not start at `next` means a row is missing: that is damage,
    /// reported, never a view moved over it.
    /// - Returns: Whether the view advanced.
    /// - Throws: ``LogError/Code/corruption`` naming the missing position.
    func learn(_ records: [LogRecord], readFrom next: LogPosition) throws -> Bool {
        if let first = records.first, first.position != next {
            throw LogError(.corruption, "position \(next) is missing from \(table): the next row holds \(first.position)", file: table, position: next)
        }
        return view.withLock { $0.learn(records) }
    }

    /// Reads the records beyond the view, a page at a time.
    /// - Returns: Whether the view advanced.
    private func fetchNew() async throws -> Bool {
        var advanced = false
        while true {
            let next = view.withLock { $0.next }
            let query = Self.rangeQuery(schema: configuration.schema, from: next, through: nil, limit: configuration.readPageSize)
            let rows = try await client.query(query, logger: logger).collect()
            let records = try rows.map { try EventRow.record(from: $0, table: table) }
            if try learn(records, readFrom: next) { advanced = true }
            if records.count < configuration.readPageSize { return advanced }
        }
    }

    /// Runs until the log closes: listens on the log's channel and rings the follower for
    /// each notification announcing a head beyond the view from another instance (a
    /// notification names the appending instance: this one's own are skipped). Reconnects after a lost connection, and
    /// rings once each time it (re)starts listening, for what was announced meanwhile.
    func runListener() async {
        var backoff = Duration.milliseconds(50)
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: self.configuration.channel) { notifications in
                        self.listening.withLock { $0 = true }
                        defer { self.listening.withLock { $0 = false } }
                        self.followerBell.ring()
                        backoff = .milliseconds(50)
                        for try await notification in notifications {
                            // "<head> <origin>": this instance's own commits, and heads it
                            // knows already, need no look.
                            let parts = notification.payload.split(separator: " ", maxSplits: 1)
                            if parts.count == 2, parts[1] == self.origin { continue }
                            if let head = parts.first.flatMap({ UInt64($0) }), head <= self.view.withLock({ $0.next }) { continue }
                            self.followerBell.ring()
                        }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                logger.notice("lost the notification channel; polling meanwhile", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: backoff)
            backoff = min(backoff * 2, .seconds(5))
        }
    }

    /// Whether the instance is listening for notifications now (tests wait for it before they
    /// count on one).
    package var isListening: Bool { listening.withLock { $0 } }
}
#endif
