#if PostgreSQL
import EventLog

/// What an instance knows of the shared log: how far it has learned it (every position below
/// ``next`` is committed), its timestamp range, and the most recent records it learned,
/// kept so that folding them into the store reads them from memory.
///
/// Records arrive from three places: the instance's own commits, the records between its
/// previous view and its own commit (fetched by the committer), and the follower's fetches.
/// The cache is a contiguous window of positions; it only speeds reads up: any position
/// below ``next`` can be read from the server.
struct LogView {
    /// One past the last position known committed.
    private(set) var next: LogPosition
    private(set) var minTimestamp: LogTimestamp?
    private(set) var maxTimestamp: LogTimestamp?
    /// The cached records, positions `cacheStart ..< cacheStart + cached.count - consumed`.
    private var cached: [LogRecord] = []
    /// How many records at the front of `cached` were dropped (trimmed lazily, so dropping
    /// is amortized O(1)).
    private var dropped = 0
    private let capacity: Int

    init(next: LogPosition, minTimestamp: LogTimestamp?, maxTimestamp: LogTimestamp?, capacity: Int) {
        self.next = next
        self.minTimestamp = minTimestamp
        self.maxTimestamp = maxTimestamp
        self.capacity = capacity
    }

    private var cacheStart: LogPosition? { dropped < cached.count ? cached[dropped].position : nil }
    private var cacheEnd: LogPosition? { cached.last.map { $0.position + 1 } }

    /// Learns committed records, contiguous and in order. Records below ``next`` are known
    /// already; records starting above it mean the ones between are committed too (an own
    /// commit whose predecessors were not fetched): ``next`` moves past them, and the cache
    /// restarts at the new records.
    /// - Returns: Whether ``next`` advanced.
    @discardableResult
    mutating func learn(_ records: some BidirectionalCollection<LogRecord>) -> Bool {
        guard let last = records.last, last.position >= next else { return false }
        for record in records where record.position >= next {
            minTimestamp = min(minTimestamp ?? record.timestamp, record.timestamp)
            maxTimestamp = max(maxTimestamp ?? record.timestamp, record.timestamp)
        }
        if capacity > 0 {
            if let end = cacheEnd, let first = records.first, first.position <= end {
                for record in records where record.position >= end { cached.append(record) }
            } else {
                cached.removeAll(keepingCapacity: true)
                dropped = 0
                cached.append(contentsOf: records.suffix(capacity))
            }
            let live = cached.count - dropped
            if live > capacity { dropped += live - capacity }
            if dropped > capacity {
                cached.removeFirst(dropped)
                dropped = 0
            }
        }
        next = last.position + 1
        return true
    }

    /// The cached records from `start` through `last`, or `nil` when the cache does not hold
    /// `start`.
    func cachedRecords(from start: LogPosition, through last: LogPosition) -> ArraySlice<LogRecord>? {
        guard let first = cacheStart, let end = cacheEnd, start >= first, start < end else { return nil }
        let lower = dropped + Int(start - first)
        let upper = dropped + Int(min(last + 1, end) - first)
        return lower < upper ? cached[lower..<upper] : nil
    }

    /// The first cached position at or above `start`, if the cache starts above it.
    func cacheStart(above start: LogPosition) -> LogPosition? {
        guard let first = cacheStart, first > start else { return nil }
        return first
    }
}
#endif
