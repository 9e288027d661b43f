// The activity tracker's repository plan (../shared/seeds, design 000) on EventKernel's
// Activities: its feature code, compiled as the plan writes it. Nothing here is storage code.
public import Activities
public import Foundation

/// The feature's view of storage, as in the plan: the five closures.
public struct ActivityFeature: Sendable {
    public var activityRepository: ActivityRepositoryClient

    public init(activityRepository: ActivityRepositoryClient) {
        self.activityRepository = activityRepository
    }

    /// Starts an activity now.
    public func startActivity(_ type: ActivityType, at date: Date = Date()) async throws -> ActivityModel {
        let activity = ActivityModel(id: UUID(), startDate: date, endDate: nil, type: type)
        try await activityRepository.add(activity)
        return activity
    }

    /// Today's activities, newest first, as the plan's query reads.
    public func today(now: Date = Date()) async throws -> [ActivityModel] {
        let query = ActivityQuery(afterDate: Calendar.current.startOfDay(for: now), sortOrder: ActivityQuery.SortOrder.newestFirst)
        return try await activityRepository.fetch(query)
    }

    /// The sleeps, any number (`limit: 0` is no limit, as in the plan's Core Data code).
    public func sleeps() async throws -> [ActivityModel] {
        try await activityRepository.fetch(ActivityQuery(types: [.sleep], limit: 0, sortOrder: .oldestFirst))
    }
}

extension ActivityRepositoryClient {
    /// The plan's dependency values, without TCA: live on a durable store, test and preview in memory.
    public static func live(at directory: URL) throws -> ActivityRepositoryClient {
        ActivityRepositoryClient(repository: try EventSourcedActivityRepository.open(at: directory))
    }
    public static var testValue: ActivityRepositoryClient {
        ActivityRepositoryClient(repository: InMemoryActivityRepository())
    }
    public static var previewValue: ActivityRepositoryClient {
        ActivityRepositoryClient(repository: InMemoryActivityRepository(activities: ActivityModel.previewData))
    }
}
