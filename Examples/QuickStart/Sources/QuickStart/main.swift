import EventKernel
import Foundation

struct Note: Identifiable, Codable, Sendable {
    var id = UUID()
    var title: String
    var created: Date
}

let directory = URL(filePath: CommandLine.arguments.dropFirst().first ?? "notes-store")
var store = try EventStore.open(at: directory)       // every save is an event in a durable log
var notes = try EventSourcedRepository<Note>(store: store, typeName: "Note", indexes: [.on(\.created)])

let recent = EntityQuery<Note>().where(\.created, greaterThan: .now - 3_600).orderBy(\.created)
let updates = try notes.observe(recent)              // the result now, then after every change to it
try await notes.save(Note(title: "Buy milk", created: .now))
try await notes.save(Note(title: "Call Ada", created: .now + 60))
print("queried:", try notes.fetch(recent).map(\.title))
for await latest in updates where latest.count >= 2 { print("observed:", latest.map(\.title)); break }
try await store.close()                              // syncs, then writes a snapshot

store = try EventStore.open(at: directory)           // reopens from the snapshot, then the log's tail
notes = try EventSourcedRepository<Note>(store: store, typeName: "Note", indexes: [.on(\.created)])
print("reopened:", notes.count, "notes")
try await store.close()
