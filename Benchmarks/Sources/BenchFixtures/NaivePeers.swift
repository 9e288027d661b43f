// The repositories apps commonly write by hand, as peers.
import Activities
import ActivityWorkload
import Foundation

/// An in-memory repository as apps commonly write it: an array of ActivityModel, and every
/// query filters, sorts and takes a prefix.
public final class NaiveArrayRepository: @unchecked Sendable {
    public var activities: [ActivityModel]

    public init(_ activities: [ActivityModel] = []) { self.activities = activities }

    static func ordered(_ models: [ActivityModel], _ order: ActivitySortOrder) -> [ActivityModel] {
        switch order {
        case .newestFirst: models.sorted { $0.startDate > $1.startDate }
        case .oldestFirst: models.sorted { $0.startDate < $1.startDate }
        }
    }

    public func fetch(_ q: ActivityQuery) -> [ActivityModel] {
        let sorted = Self.ordered(activities.filter { q.matches($0) }, q.sortOrder)
        if let limit = q.limit { return Array(sorted.dropFirst(q.offset).prefix(limit)) }
        return Array(sorted.dropFirst(q.offset))
    }

    public func fetch(_ r: ActivityRangeQuery) -> [ActivityModel] {
        let sorted = Self.ordered(activities.filter { r.matches($0) }, r.sortOrder)
        if let limit = r.limit { return Array(sorted.prefix(limit)) }
        return sorted
    }

    public func add(_ model: ActivityModel) { activities.append(model) }
    public func add(contentsOf models: [ActivityModel]) { activities.append(contentsOf: models) }
}

/// A JSON-file repository as apps commonly write it: the whole array is encoded and the file
/// rewritten (atomically, no fsync) on every save. Run at a smaller N (``BenchEnv/jsonN``).
public final class JSONFileRepository: @unchecked Sendable {
    public let url: URL
    public let memory: NaiveArrayRepository

    /// Loads the file (decoding every activity), or starts empty.
    public init(url: URL) throws {
        self.url = url
        if let data = try? Data(contentsOf: url) {
            memory = NaiveArrayRepository(try JSONDecoder().decode([ActivityModel].self, from: data))
        } else {
            memory = NaiveArrayRepository()
        }
    }

    public func save() throws {
        try JSONEncoder().encode(memory.activities).write(to: url, options: .atomic)
    }

    public func add(_ model: ActivityModel) throws { memory.add(model); try save() }
    public func add(contentsOf models: [ActivityModel]) throws { memory.add(contentsOf: models); try save() }

    /// The JSON file of the live activities of the seeded history of `n` activities. Cached on disk.
    public static func fixture(n: Int = BenchEnv.jsonN) throws -> URL {
        let url = BenchEnv.cacheDirectory.appending(path: "json-v\(BenchEnv.fixtureVersion)-n\(n).json")
        if FileManager.default.fileExists(atPath: url.path) { return url }
        let data = try JSONEncoder().encode(Workload.liveActivities(n))
        try data.write(to: url, options: .atomic)
        return url
    }
}

/// Builds a value once per process and hands it to every benchmark of the target.
public actor Once<Value: Sendable> {
    private var value: Value?
    private let make: @Sendable () async throws -> Value
    public init(_ make: @escaping @Sendable () async throws -> Value) { self.make = make }
    public func get() async throws -> Value {
        if let value { return value }
        let made = try await make()
        value = made
        return made
    }
}
