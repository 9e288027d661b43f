import Activities
import Foundation

// Durable: every mutation is an event in ./activities; queries are answered from memory.
let repository = try EventSourcedActivityRepository.open(at: URL(filePath: "activities"))
let nap = ActivityModel(startDate: .now, type: .sleep)
try await repository.add(nap)
try await repository.end(id: nap.id, at: .now + 3_600)

let lastWeek = try await repository.fetch(query: ActivityQuery(
    afterDate: .now - 7 * 86_400, types: [.sleep, .tummyTime], limit: 50, sortOrder: .newestFirst))
let today = Calendar.current.startOfDay(for: .now)
let overlapping = try await repository.fetch(overlapping: today...today + 86_400)

let history = try repository.history(of: nap.id)           // every event, with positions
let yesterday = try repository.activities(asOf: .now - 86_400)  // time travel

// Tests and previews: same engine, no disk. Dependency injection: a struct of closures.
let inMemory = InMemoryActivityRepository(activities: [nap])
let client = ActivityRepositoryClient(repository: repository)   // or .inMemory(), .preview

for await sleeps in repository.observe(query: ActivityQuery(types: [.sleep], limit: 10)) {
    print(sleeps.count)       // now, then after every change that alters this result
    break
}
try await repository.close()                                // syncs and snapshots
