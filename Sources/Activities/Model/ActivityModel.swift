public import Foundation

/// One activity: something of a given type that started at a date and,
/// once finished, ended at a later one.
///
/// An activity without an end date is *active* (still running).
public struct ActivityModel: Identifiable, Equatable, Hashable, Codable, Sendable {
    /// The stable identity of the activity.
    public var id: UUID
    /// When the activity started.
    public var startDate: Date
    /// When the activity ended, or `nil` while it is still running.
    public var endDate: Date?
    /// What kind of activity this is.
    public var type: ActivityType

    /// Creates an activity.
    ///
    /// - Parameters:
    ///   - id: The identity; a fresh random UUID by default.
    ///   - startDate: When the activity started.
    ///   - endDate: When it ended, or `nil` if it is still running.
    ///   - type: The kind of activity.
    /// - Complexity: O(1)
    @inlinable
    public init(id: UUID = UUID(), startDate: Date, endDate: Date? = nil, type: ActivityType) {
        self.id = id
        self.startDate = startDate
        self.endDate = endDate
        self.type = type
    }

    /// Whether the activity is still running (it has no end date).
    @inlinable
    public var isActive: Bool { endDate == nil }

    /// How long the activity lasted, or `nil` while it is still running.
    @inlinable
    public var duration: TimeInterval? {
        endDate.map { $0.timeIntervalSince(startDate) }
    }

    /// How long the activity has lasted as of a given date.
    ///
    /// A finished activity reports its full duration whatever `date` is; a
    /// running one reports the time from its start to `date`, and never less
    /// than zero so that clock skew cannot produce a negative duration.
    ///
    /// - Parameter date: The "now" to measure a running activity against.
    /// - Returns: The duration in seconds.
    /// - Complexity: O(1)
    @inlinable
    public func duration(asOf date: Date) -> TimeInterval {
        if let endDate { return endDate.timeIntervalSince(startDate) }
        return max(0, date.timeIntervalSince(startDate))
    }
}

extension ActivityModel {
    /// A plausible day of activities (today, in the current time zone), for previews and
    /// tests: `InMemoryActivityRepository(activities: ActivityModel.previewData)`.
    public static var previewData: [ActivityModel] {
        let calendar = Calendar(identifier: .gregorian)
        let today = calendar.startOfDay(for: Date())
        func at(_ hours: Double) -> Date { today.addingTimeInterval(hours * 3_600) }
        return [
            ActivityModel(startDate: at(-4), endDate: at(6.5), type: .sleep),
            ActivityModel(startDate: at(7.5), endDate: at(7.75), type: .tummyTime),
            ActivityModel(startDate: at(9.5), endDate: at(11), type: .sleep),
            ActivityModel(startDate: at(11.25), endDate: at(11.5), type: .tummyTime),
            ActivityModel(startDate: at(13), endDate: at(14.5), type: .sleep),
            ActivityModel(startDate: at(16), type: .tummyTime),
        ]
    }
}
