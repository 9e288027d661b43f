// The generic storage library's repository pattern (../shared/seeds, design 002) on EventKernel:
// the app programs against `any Repository<Restaurant>`; an `EventSourcedRepository` is one, on a
// durable store or in memory, with no glue. Validation, archive instead of delete, and a composite
// local/remote repository are domain code. No storage code.
public import EventKernel
public import Foundation

public struct Location: Codable, Sendable, Equatable {
    public var latitude: Double
    public var longitude: Double
    public init(latitude: Double, longitude: Double) { self.latitude = latitude; self.longitude = longitude }
}

public struct Restaurant: Identifiable, Codable, Sendable, Equatable {
    public var id: UUID
    public var name: String
    public var rating: Int
    public var cuisine: String?
    public var location: Location
    public var isFavorite: Bool
    public var isArchived: Bool
    public init(id: UUID = UUID(), name: String, rating: Int = 3, cuisine: String? = nil,
                location: Location = Location(latitude: 0, longitude: 0), isFavorite: Bool = false, isArchived: Bool = false) {
        self.id = id; self.name = name; self.rating = rating; self.cuisine = cuisine
        self.location = location; self.isFavorite = isFavorite; self.isArchived = isArchived
    }

    /// Great-circle distance in kilometres.
    public func distance(from other: Location) -> Double {
        let rad = Double.pi / 180, dLat = (other.latitude - location.latitude) * rad, dLon = (other.longitude - location.longitude) * rad
        let a = pow(sin(dLat / 2), 2) + cos(location.latitude * rad) * cos(other.latitude * rad) * pow(sin(dLon / 2), 2)
        return 2 * 6_371 * asin(min(1, sqrt(a)))
    }
}

/// The storage abstraction the design programs against.
public protocol Repository<Model>: Sendable {
    associatedtype Model: Identifiable & Sendable where Model.ID: Sendable
    func fetchAll() async throws -> [Model]
    func fetch(id: Model.ID) async throws -> Model?
    func fetch(matching predicate: Predicate<Model>) async throws -> [Model]
    func save(_ model: Model) async throws
    @discardableResult func delete(id: Model.ID) async throws -> Bool
}

// The kernel's repository already has every one of these operations.
extension EventSourcedRepository: Repository {}

/// Restaurants' storage on `store` (durable: `EventStore.open(at:)`, or `.inMemory()`), listed by name.
public func restaurantStorage(on store: EventStore) throws -> EventSourcedRepository<Restaurant> {
    try EventSourcedRepository(store: store, typeName: "Restaurant", indexes: [.on(\.name)], defaultOrder: [.ascending(\.name)])
}

public protocol RestaurantRepositoryProtocol: Sendable {
    func fetchAll() async throws -> [Restaurant]
    func fetch(id: UUID) async throws -> Restaurant?
    func fetchFavorites() async throws -> [Restaurant]
    func fetchNearby(location: Location) async throws -> [Restaurant]
    func save(_ restaurant: Restaurant) async throws
    func delete(id: UUID) async throws
}

public enum ValidationError: Error, Equatable { case emptyName, invalidRating }
public enum StorageError: Error, Equatable { case notFound(id: UUID) }

public actor RestaurantRepository: RestaurantRepositoryProtocol {
    private let storage: any Repository<Restaurant>
    public init(storage: any Repository<Restaurant>) { self.storage = storage }

    public func fetchAll() async throws -> [Restaurant] { try await storage.fetchAll() }
    public func fetch(id: UUID) async throws -> Restaurant? { try await storage.fetch(id: id) }
    public func fetchFavorites() async throws -> [Restaurant] {
        try await storage.fetch(matching: #Predicate { $0.isFavorite == true })
    }
    /// Within 5 km: a bounding box the predicate can express, then the exact distance.
    public func fetchNearby(location: Location) async throws -> [Restaurant] {
        let dLat = 5.0 / 111, dLon = 5.0 / (111 * max(0.01, cos(location.latitude * .pi / 180)))
        let (south, north, west, east) = (location.latitude - dLat, location.latitude + dLat, location.longitude - dLon, location.longitude + dLon)
        return try await storage.fetch(matching: #Predicate {
            $0.location.latitude >= south && $0.location.latitude <= north && $0.location.longitude >= west && $0.location.longitude <= east
        }).filter { $0.distance(from: location) < 5.0 }
    }
    public func save(_ restaurant: Restaurant) async throws { try await storage.save(restaurant) }
    public func delete(id: UUID) async throws { try await storage.delete(id: id) }

    /// Validates and saves a restaurant: a name, a rating in 0...5.
    public func saveValidated(_ restaurant: Restaurant) async throws {
        guard !restaurant.name.isEmpty else { throw ValidationError.emptyName }
        guard (0...5).contains(restaurant.rating) else { throw ValidationError.invalidRating }
        try await save(restaurant)
    }

    /// Archives a restaurant instead of deleting it.
    public func archive(id: UUID) async throws {
        guard var restaurant = try await fetch(id: id) else { throw StorageError.notFound(id: id) }
        restaurant.isArchived = true
        try await save(restaurant)
    }
}

/// Local first; on an empty or failing local store, the remote one, cached locally.
public actor CompositeRestaurantRepository: RestaurantRepositoryProtocol {
    private let localStorage: any Repository<Restaurant>
    private let remoteStorage: any Repository<Restaurant>
    public init(local: any Repository<Restaurant>, remote: any Repository<Restaurant>) {
        localStorage = local; remoteStorage = remote
    }

    public func fetchAll() async throws -> [Restaurant] {
        if let local = try? await localStorage.fetchAll(), !local.isEmpty { return local }
        let remote = try await remoteStorage.fetchAll()
        for restaurant in remote { try? await localStorage.save(restaurant) }
        return remote
    }
    public func fetch(id: UUID) async throws -> Restaurant? {
        if let local = try? await localStorage.fetch(id: id) { return local }
        guard let remote = try await remoteStorage.fetch(id: id) else { return nil }
        try? await localStorage.save(remote)
        return remote
    }
    public func fetchFavorites() async throws -> [Restaurant] { try await fetchAll().filter(\.isFavorite) }
    public func fetchNearby(location: Location) async throws -> [Restaurant] {
        try await fetchAll().filter { $0.distance(from: location) < 5.0 }
    }
    /// Remote first (the source of truth), then the local cache.
    public func save(_ restaurant: Restaurant) async throws {
        try await remoteStorage.save(restaurant)
        try await localStorage.save(restaurant)
    }
    public func delete(id: UUID) async throws {
        try await remoteStorage.delete(id: id)
        try await localStorage.delete(id: id)
    }
}
