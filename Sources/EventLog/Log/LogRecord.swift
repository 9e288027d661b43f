public import Foundation

/// A position in a log: the index of a record, assigned by the log on append,
/// gap-free and strictly increasing from 0.
public typealias LogPosition = UInt64

/// A record's timestamp: nanoseconds since 1970-01-01T00:00:00Z.
///
/// The log stores timestamps as signed 64-bit nanoseconds, which covers the years 1678 to 2262.
/// Timestamps need not be monotonic across records; batches keep their minimum and maximum so
/// that time-range reads can skip whole batches.
public struct LogTimestamp: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// Nanoseconds since 1970-01-01T00:00:00Z.
    public var nanosecondsSince1970: Int64

    /// Creates a timestamp from nanoseconds since 1970.
    public init(nanosecondsSince1970: Int64) { self.nanosecondsSince1970 = nanosecondsSince1970 }

    /// The earliest representable timestamp.
    public static let min = LogTimestamp(nanosecondsSince1970: .min)
    /// The latest representable timestamp.
    public static let max = LogTimestamp(nanosecondsSince1970: .max)

    /// Converts a date, rounding to the nearest nanosecond representable in a `Double`.
    /// - Throws: ``LogError`` with code ``LogError/Code/invalidArgument`` when the date lies
    ///   outside the years 1678...2262 or is not finite.
    public init(_ date: Date) throws {
        let nanos = (date.timeIntervalSince1970 * 1e9).rounded()
        guard nanos.isFinite, nanos >= -9.2e18, nanos <= 9.2e18 else {
            throw LogError(.invalidArgument, "date \(date.timeIntervalSince1970) s since 1970 is outside the range a log timestamp can hold (years 1678...2262)")
        }
        self.nanosecondsSince1970 = Int64(nanos)
    }

    /// Converts a date, rounding to the nearest nanosecond; dates outside the years
    /// 1678...2262 become ``min`` or ``max`` (and a non-finite date ``min``).
    public init(clamping date: Date) {
        let nanos = (date.timeIntervalSince1970 * 1e9).rounded()
        if nanos.isNaN || nanos < -9.2e18 { self = .min } else if nanos > 9.2e18 { self = .max } else {
            self.nanosecondsSince1970 = Int64(nanos)
        }
    }

    /// The current wall-clock time.
    public static func now() -> LogTimestamp {
        // Date() is always in range.
        LogTimestamp(nanosecondsSince1970: Int64((Date().timeIntervalSince1970 * 1e9).rounded()))
    }

    /// This timestamp as a `Date` (sub-microsecond precision may be lost to `Double`).
    public var date: Date { Date(timeIntervalSince1970: Double(nanosecondsSince1970) / 1e9) }

    public static func < (lhs: LogTimestamp, rhs: LogTimestamp) -> Bool {
        lhs.nanosecondsSince1970 < rhs.nanosecondsSince1970
    }

    public var description: String { date.formatted(.iso8601) }
}

/// A record to append: a timestamp and opaque payload bytes.
public struct LogEntry: Hashable, Sendable {
    /// When the record happened; stored with the record and indexed per batch.
    public var timestamp: LogTimestamp
    /// The record's bytes. The log never interprets them.
    public var payload: [UInt8]

    /// Creates an entry.
    public init(timestamp: LogTimestamp, payload: [UInt8]) {
        self.timestamp = timestamp
        self.payload = payload
    }
}

/// A record read back from a log.
public struct LogRecord: Hashable, Sendable {
    /// The record's position, assigned on append.
    public var position: LogPosition
    /// The record's timestamp, as appended.
    public var timestamp: LogTimestamp
    /// The record's bytes, as appended.
    public var payload: [UInt8]

    /// Creates a record.
    public init(position: LogPosition, timestamp: LogTimestamp, payload: [UInt8]) {
        self.position = position
        self.timestamp = timestamp
        self.payload = payload
    }
}

/// A borrowed view of a record, valid only inside the closure it is passed to.
///
/// Streaming reads (``RecordLog/forEachRecord(from:through:_:)``) hand out views rather than
/// ``LogRecord`` values so that a full replay allocates nothing per record.
public struct LogRecordView {
    /// The record's position.
    public let position: LogPosition
    /// The record's timestamp.
    public let timestamp: LogTimestamp
    /// The record's bytes; do not let the pointer escape the closure.
    public let payload: UnsafeRawBufferPointer

    package init(position: LogPosition, timestamp: LogTimestamp, payload: UnsafeRawBufferPointer) {
        self.position = position
        self.timestamp = timestamp
        self.payload = payload
    }

    /// Copies the view into an owned ``LogRecord``.
    public func copy() -> LogRecord {
        LogRecord(position: position, timestamp: timestamp, payload: Array(payload))
    }
}

/// What a log holds, cheaply: its position range and timestamp range.
public struct LogBounds: Hashable, Sendable {
    /// The first position held (0 for a log that was never truncated at the front).
    public var firstPosition: LogPosition
    /// One past the last acknowledged position: the position the next record will get.
    public var nextPosition: LogPosition
    /// The smallest record timestamp held, or `nil` for an empty log.
    public var minTimestamp: LogTimestamp?
    /// The largest record timestamp held, or `nil` for an empty log.
    public var maxTimestamp: LogTimestamp?

    /// Creates bounds.
    public init(firstPosition: LogPosition, nextPosition: LogPosition, minTimestamp: LogTimestamp?, maxTimestamp: LogTimestamp?) {
        self.firstPosition = firstPosition
        self.nextPosition = nextPosition
        self.minTimestamp = minTimestamp
        self.maxTimestamp = maxTimestamp
    }

    /// The number of records held.
    public var count: UInt64 { nextPosition - firstPosition }
    /// Whether the log holds no record.
    public var isEmpty: Bool { nextPosition == firstPosition }
    /// The last position held, or `nil` for an empty log.
    public var lastPosition: LogPosition? { isEmpty ? nil : nextPosition - 1 }

    /// The bounds of an empty log.
    public static let empty = LogBounds(firstPosition: 0, nextPosition: 0, minTimestamp: nil, maxTimestamp: nil)
}
