public import Activities
public import EventLog
public import Foundation

/// What one activity contributes to the read model: its start (seconds since 2001-01-01, as
/// `Date` holds it), the UTC day of its start, its type, and the whole minutes of its duration
/// (0 while it runs).
public struct ActivityReadModelRow: Hashable, Sendable {
    /// The start, `Date.timeIntervalSinceReferenceDate`.
    public var start: Double
    /// The UTC day of the start, `yyyy-MM-dd`.
    public var day: String
    /// The activity's type (`ActivityType.rawValue`).
    public var type: String
    /// Whole minutes from start to end; 0 while the activity runs.
    public var minutes: Int64

    /// A row from its columns.
    public init(start: Double, day: String, type: String, minutes: Int64) {
        self.start = start
        self.day = day
        self.type = type
        self.minutes = minutes
    }

    /// The row of an activity: the one rule both the consumer and a check computed from the
    /// store's state use.
    /// - Parameter model: The activity.
    public init(_ model: ActivityModel) {
        let start = model.startDate.timeIntervalSinceReferenceDate
        self.init(start: start, day: Self.day(of: model.startDate), type: model.type.rawValue,
                  minutes: model.endDate.map { Self.minutes(from: start, to: $0.timeIntervalSinceReferenceDate) } ?? 0)
    }

    /// Whole minutes between two instants (seconds since 2001-01-01), rounded down.
    public static func minutes(from start: Double, to end: Double) -> Int64 {
        Int64(((end - start) / 60).rounded(.down))
    }

    /// The UTC day of `date`, `yyyy-MM-dd`.
    public static func day(of date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt).year().month().day())
    }
}

/// One row of `daily_total`: the activities of one type that started on one UTC day.
public struct DailyTotal: Hashable, Sendable, CustomStringConvertible {
    /// The UTC day, `yyyy-MM-dd`.
    public var day: String
    /// The activity type.
    public var type: String
    /// How many activities.
    public var count: Int64
    /// Their total whole minutes.
    public var minutes: Int64

    /// A total from its columns.
    public init(day: String, type: String, count: Int64, minutes: Int64) {
        self.day = day
        self.type = type
        self.count = count
        self.minutes = minutes
    }

    public var description: String { "\(day) \(type): \(count) activities, \(minutes) min" }

    /// The totals of a set of activities, ordered by day and type: what the read model must
    /// hold once it has applied every event of a store whose activities are `activities`.
    /// - Parameter activities: The store's current activities.
    public static func of(_ activities: some Sequence<ActivityModel>) -> [DailyTotal] {
        var totals: [[String]: DailyTotal] = [:]
        for activity in activities {
            let row = ActivityReadModelRow(activity)
            totals[[row.day, row.type], default: DailyTotal(day: row.day, type: row.type, count: 0, minutes: 0)].count += 1
            totals[[row.day, row.type]]!.minutes += row.minutes
        }
        return totals.values.sorted { ($0.day, $0.type) < ($1.day, $1.type) }
    }
}

/// An event the read model cannot apply: the transaction that met it is rolled back.
public struct ActivityReadModelError: Error, CustomStringConvertible {
    /// The event's position in the store's log.
    public let position: LogPosition
    /// What is wrong.
    public let message: String

    /// An error about the event at `position`.
    public init(position: LogPosition, message: String) {
        self.position = position
        self.message = message
    }

    public var description: String { "event at position \(position): \(message)" }
}
