import EventKernel
import EventKernelTestSupport
import ForumsExample
import Foundation
import Testing

@Suite struct ForumsTests {
    let now = Date(timeIntervalSinceReferenceDate: 800_000_000)
    func daysAgo(_ n: Double) -> Date { now.addingTimeInterval(-n * 86_400) }

    @Test func forumsThreadsAndPosts() async throws {
        let s = try ForumsStore.inMemory()
        try await s.forums.base.addAll([Forum(id: 2, name: "B", index: 1), Forum(id: 1, name: "A", index: 0), Forum(id: 3, name: "Hidden", index: 2, isVisible: false)])
        #expect(try s.forums.fetchVisibleForums().map(\.id) == [1, 2])
        try await s.threads.base.addAll([
            ForumThread(id: 10, forumID: 1, title: "old", lastPostDate: daysAgo(40)),
            ForumThread(id: 2, forumID: 1, title: "new", lastPostDate: daysAgo(1)),
            ForumThread(id: 3, forumID: 1, title: "rules", isSticky: true, hasUnreadPosts: false, lastPostDate: daysAgo(100)),
            ForumThread(id: 4, forumID: 1, title: "hidden", isHidden: true, lastPostDate: daysAgo(2)),
            ForumThread(id: 5, forumID: 2, title: "elsewhere", lastPostDate: daysAgo(3)),
        ])
        #expect(try s.threads.fetchThreads(forForum: 1).map(\.id) == [3, 2, 10], "sticky first, then newest")
        #expect(try s.threads.fetchThreads(forForum: 1, includeSticky: false).map(\.id) == [2, 10])
        #expect(try s.threads.fetchUnreadThreads().map(\.id) == [2, 4, 5, 10])
        try await s.threads.markThreadAsRead(2)
        #expect(try await s.threads.markForumAsRead(1) == 2)
        #expect(try s.threads.fetchUnreadThreads().map(\.id) == [5])
        #expect(try await s.threads.cleanup(now: now) == 2, "threads 10 and 3 are older than 30 days")
        #expect(try s.threads.fetchThreads(forForum: 1).map(\.id) == [2])

        try await s.posts.base.addAll((1...100).map { Post(id: 1_000 + $0, threadID: 2, index: $0, author: $0 % 10 == 0 ? "spam" : "ann", body: "post \($0)") })
        #expect(try s.posts.fetchPosts(inThread: 2, page: 2).map(\.index) == Array(41...80))
        #expect(try s.posts.fetchPosts(inThread: 2, page: 3).count == 20)
        #expect(try await s.posts.deletePosts(by: "spam") == 10)
        #expect(try s.posts.fetchPosts(inThread: 2, page: 3).map(\.index) == [89, 91, 92, 93, 94, 95, 96, 97, 98, 99])
        #expect(s.posts.base.explain(QueryBuilder<Post>().where(\.threadID, equals: 2).orderBy(\.index)) == "index (\\Post.threadID, \\Post.index)")
    }

    @Test func oldThreadsAreUpcastOnOpen() async throws {
        let dir = TemporaryDirectory("ek-forums")
        do {
            // What the previous release wrote: version-1 threads.
            let store = try EventStore.open(at: dir.url, snapshotPolicy: .never)
            let v1 = try EventSourcedRepository<V1Thread>(store: store, typeName: "Thread", schema: EntitySchema(version: 1))
            try await v1.add(V1Thread(id: 7, forumID: 1, title: "from v1", isSticky: false, hasUnreadPosts: true, lastPostDate: daysAgo(1)))
            try await store.close()
        }
        let s = try ForumsStore.open(at: dir.url)
        #expect(try s.threads.fetchThreads(forForum: 1).map(\.title) == ["from v1"])
        #expect(s.threads.base.fetch(id: 7)?.isHidden == false)
        try await s.close()
    }
}

struct V1Thread: Identifiable, Codable, Sendable {
    var id: Int, forumID: Int, title: String, isSticky: Bool, hasUnreadPosts: Bool, lastPostDate: Date
}
