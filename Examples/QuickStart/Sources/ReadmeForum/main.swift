import EventKernel
import Foundation

struct ForumThread: Identifiable, Codable, Sendable {
    var id: Int
    var forumID: Int
    var title: String
    var isSticky = false
    var lastPostDate: Date
    var postCount = 0
}
struct Post: Identifiable, Codable, Sendable {
    var id = UUID()
    var threadID: Int
    var index: Int
    var body: String
    var createdAt = Date.now
    func check() throws { if body.isEmpty { throw RepositoryError.validationFailed("a post needs a body") } }
}

let store = try EventStore.open(at: URL(filePath: "forum"))   // or EventStore.inMemory()
let threads = try EventSourcedRepository<ForumThread>(store: store, typeName: "Thread", indexes: [
    .on(\.forumID, .descending(\.isSticky), .descending(\.lastPostDate)),
])
let posts = try EventSourcedRepository<Post>(store: store, typeName: "Post",
                                             indexes: [.on(\.threadID, \.index), .on(\.createdAt)],
                                             validate: { try $0.check() })
var thread = ForumThread(id: 7, forumID: 1, title: "Welcome", lastPostDate: .now)
try await threads.save(thread)                           // insert or replace, race-free
let post = Post(threadID: 7, index: 0, body: "Hello")
try await posts.save(post)
let page2 = try posts.fetch(EntityQuery().where(\.threadID, equals: 7).orderBy(\.index).offset(40).limit(40))
thread.title = "Welcome!"
try await threads.update(thread, expectedVersion: 1)     // or fail with .conflict
let removed = try await posts.deleteAll(where: \.createdAt, before: .now - 30 * 86_400)

// Several changes, one atomic command: versions are read before state, and a concurrent
// change re-runs the closure on the new state (EventStore.execute).
let reply = Post(threadID: 7, index: 1, body: "Hi there")
try await store.execute { command in
    guard var thread = try command.read(threads.stream(of: reply.threadID), { threads.fetch(id: reply.threadID) })
    else { throw RepositoryError.notFound(reply.threadID.entityID) }
    thread.postCount += 1
    try threads.update(thread, in: &command)
    try posts.add(reply, in: &command)
}
for await latest in try threads.observe(EntityQuery().where(\.forumID, equals: 1).limit(50)) {
    print(latest.map(\.title))                           // now, then after every change to it
    break
}
try await store.close()
