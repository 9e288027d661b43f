import EventKernel
import EventKernelTestSupport
import Foundation
import RestaurantsExample
import Testing

/// A remote service double: the design's `MockRepository`, with call counts and an outage switch.
actor RemoteRestaurants: Repository {
    struct Outage: Error {}
    var items: [UUID: Restaurant]
    var fetchAllCalls = 0
    var isDown = false
    init(_ items: [Restaurant]) { self.items = Dictionary(uniqueKeysWithValues: items.map { ($0.id, $0) }) }
    func goDown() { isDown = true }

    func fetchAll() throws -> [Restaurant] {
        fetchAllCalls += 1
        if isDown { throw Outage() }
        return items.values.sorted { $0.name < $1.name }
    }
    func fetch(id: UUID) throws -> Restaurant? { if isDown { throw Outage() }; return items[id] }
    func fetch(matching predicate: Predicate<Restaurant>) throws -> [Restaurant] { try fetchAll().filter { try predicate.evaluate($0) } }
    func save(_ model: Restaurant) throws { if isDown { throw Outage() }; items[model.id] = model }
    func delete(id: UUID) throws -> Bool { if isDown { throw Outage() }; return items.removeValue(forKey: id) != nil }
}

@Suite struct RestaurantsTests {
    let sanFrancisco = Location(latitude: 37.7749, longitude: -122.4194)
    let newYork = Location(latitude: 40.7128, longitude: -74.0060)

    @Test func theRepositoryReadsWritesAndFindsFavoritesAndNearby() async throws {
        let repository = RestaurantRepository(storage: try restaurantStorage(on: .inMemory()))
        let near = Restaurant(name: "Nearby", location: sanFrancisco, isFavorite: true)
        let far = Restaurant(name: "Far Away", location: newYork)
        try await repository.save(near)
        try await repository.save(far)
        #expect(try await repository.fetchAll().map(\.name) == ["Far Away", "Nearby"], "ordered by name")
        #expect(try await repository.fetch(id: far.id) == far)
        #expect(try await repository.fetchFavorites().map(\.id) == [near.id])
        #expect(try await repository.fetchNearby(location: sanFrancisco).map(\.name) == ["Nearby"])
        try await repository.delete(id: near.id)
        #expect(try await repository.fetch(id: near.id) == nil)
        #expect(try await repository.fetchFavorites().isEmpty)
    }

    @Test func validationRefusesAnEmptyNameAndARatingOutsideZeroToFiveAndWritesNothing() async throws {
        let storage = try restaurantStorage(on: .inMemory())
        let repository = RestaurantRepository(storage: storage)
        await #expect(throws: ValidationError.emptyName) { try await repository.saveValidated(Restaurant(name: "")) }
        await #expect(throws: ValidationError.invalidRating) { try await repository.saveValidated(Restaurant(name: "A", rating: 6)) }
        await #expect(throws: ValidationError.invalidRating) { try await repository.saveValidated(Restaurant(name: "A", rating: -1)) }
        #expect(storage.count == 0)
        for rating in [0, 5] { try await repository.saveValidated(Restaurant(name: "R\(rating)", rating: rating)) }
        #expect(storage.fetchAll().map(\.rating) == [0, 5])
    }

    @Test func archiveKeepsTheRestaurantAndUnknownIdsAreNotFound() async throws {
        let dir = TemporaryDirectory("ek-restaurants")
        let kept = Restaurant(name: "Kept")
        do {
            let store = try EventStore.open(at: dir.url)
            let repository = RestaurantRepository(storage: try restaurantStorage(on: store))
            try await repository.save(kept)
            try await repository.archive(id: kept.id)
            let missing = UUID()
            await #expect(throws: StorageError.notFound(id: missing)) { try await repository.archive(id: missing) }
            try await store.close()
        }
        let store = try EventStore.open(at: dir.url)
        let storage = try restaurantStorage(on: store)
        #expect(storage.fetch(id: kept.id)?.isArchived == true, "archived, durable, not deleted")
        #expect(try storage.history(of: kept.id).count == 2)
        try await store.close()
    }

    @Test func aPredicateThatFailsThrowsRatherThanAnsweringPartially() async throws {
        let storage = try restaurantStorage(on: .inMemory())
        try await storage.save(Restaurant(name: "A", cuisine: "thai"))
        try await storage.save(Restaurant(name: "B", cuisine: nil))
        #expect(try storage.fetch(matching: #Predicate { $0.cuisine == "thai" }).map(\.name) == ["A"])
        #expect(throws: (any Error).self) { try storage.fetch(matching: #Predicate { $0.cuisine! == "thai" }) }
    }

    @Test func theCompositeReadsLocalFirstFallsBackToRemoteAndCachesIt() async throws {
        let local = try restaurantStorage(on: .inMemory())
        let remote = RemoteRestaurants([Restaurant(name: "Remote 1"), Restaurant(name: "Remote 2", isFavorite: true)])
        let composite = CompositeRestaurantRepository(local: local, remote: remote)

        #expect(try await composite.fetchAll().map(\.name) == ["Remote 1", "Remote 2"], "local empty: remote")
        #expect(local.fetchAll().map(\.name) == ["Remote 1", "Remote 2"], "cached locally")
        #expect(try await composite.fetchFavorites().map(\.name) == ["Remote 2"])
        #expect(await remote.fetchAllCalls == 1, "the second read was served locally")

        await remote.goDown()
        #expect(try await composite.fetchAll().count == 2, "a remote outage does not matter once cached")
        await #expect(throws: RemoteRestaurants.Outage.self) { try await composite.save(Restaurant(name: "New")) }
        #expect(local.count == 2, "a save the remote refused is not cached")
    }
}
