#if PostgreSQL
import EventLog
@testable import PostgresLog
import Testing

/// The instance's view of the shared log: how far it knows the log, and its cache of recent
/// records (no server needed).
@Suite("PostgresLog's view and cache")
struct LogViewTests {
    func records(_ positions: Range<LogPosition>) -> [LogRecord] {
        positions.map { LogRecord(position: $0, timestamp: LogTimestamp(nanosecondsSince1970: Int64($0) * 10), payload: [UInt8($0 % 256)]) }
    }

    @Test("contiguous records extend the view and the cache; known ones are skipped")
    func contiguous() {
        var view = LogView(next: 0, minTimestamp: nil, maxTimestamp: nil, capacity: 100)
        let first = view.learn(records(0..<10))
        #expect(first)
        let nothingNew = view.learn(records(3..<8))
        #expect(!nothingNew, "nothing new")
        let overlapping = view.learn(records(5..<15))
        #expect(overlapping)
        #expect(view.next == 15)
        #expect(view.cachedRecords(from: 0, through: 14)?.map(\.position) == Array(0..<15))
        #expect(view.cachedRecords(from: 12, through: 100)?.map(\.position) == [12, 13, 14])
        #expect(view.cachedRecords(from: 15, through: 20) == nil)
        #expect(view.minTimestamp == LogTimestamp(nanosecondsSince1970: 0))
        #expect(view.maxTimestamp == LogTimestamp(nanosecondsSince1970: 140))
    }

    @Test("records beyond the view move it past committed positions it never read; the cache restarts there")
    func beyond() {
        var view = LogView(next: 0, minTimestamp: nil, maxTimestamp: nil, capacity: 100)
        view.learn(records(0..<5))
        let beyond = view.learn(records(20..<25))
        #expect(beyond)
        #expect(view.next == 25)
        #expect(view.cachedRecords(from: 3, through: 10) == nil, "positions 5..<20 are read from the server")
        #expect(view.cacheStart(above: 3) == 20)
        #expect(view.cachedRecords(from: 20, through: 30)?.map(\.position) == Array(20..<25))
        let further = view.learn(records(30..<32))
        #expect(further)
        #expect(view.next == 32)
        #expect(view.cachedRecords(from: 30, through: 31) != nil)
    }

    @Test("the cache keeps the newest records up to its capacity")
    func capacity() {
        var view = LogView(next: 0, minTimestamp: nil, maxTimestamp: nil, capacity: 8)
        for start in stride(from: LogPosition(0), to: 100, by: 5) { view.learn(records(start..<start + 5)) }
        #expect(view.next == 100)
        #expect(view.cacheStart(above: 0) == 92)
        #expect(view.cachedRecords(from: 92, through: 99)?.map(\.position) == Array(92..<100))
        #expect(view.cachedRecords(from: 91, through: 99) == nil)
        var none = LogView(next: 0, minTimestamp: nil, maxTimestamp: nil, capacity: 0)
        let intoNoCache = none.learn(records(0..<3))
        #expect(intoNoCache)
        #expect(none.next == 3 && none.cachedRecords(from: 0, through: 2) == nil)
    }
}
#endif
