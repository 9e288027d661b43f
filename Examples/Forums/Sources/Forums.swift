// The forum reader's repositories (../shared/seeds, design 001) on EventKernel: forums,
// threads and posts with a query builder, paging, batch update and delete, the 30-day cleanup
// and a schema migration. Domain code only: no storage code.
public import EventKernel
public import Foundation

public struct Forum: Identifiable, Codable, Sendable, Equatable {
    public var id: Int
    public var name: String
    public var index: Int
    public var isVisible: Bool
    public var lastRefresh: Date?
    public init(id: Int, name: String, index: Int, isVisible: Bool = true) {
        self.id = id; self.name = name; self.index = index; self.isVisible = isVisible
    }
}

public struct ForumThread: Identifiable, Codable, Sendable, Equatable {
    public var id: Int
    public var forumID: Int
    public var title: String
    public var isSticky: Bool
    public var isHidden: Bool
    public var hasUnreadPosts: Bool
    public var lastPostDate: Date
    public init(id: Int, forumID: Int, title: String, isSticky: Bool = false, isHidden: Bool = false,
                hasUnreadPosts: Bool = true, lastPostDate: Date) {
        self.id = id; self.forumID = forumID; self.title = title; self.isSticky = isSticky
        self.isHidden = isHidden; self.hasUnreadPosts = hasUnreadPosts; self.lastPostDate = lastPostDate
    }
}

/// Version 1 of a thread, before `isHidden`: what old stores hold.
public struct ForumThreadV1: Codable, Sendable {
    public var id: Int, forumID: Int, title: String, isSticky: Bool, hasUnreadPosts: Bool, lastPostDate: Date
}

public struct Post: Identifiable, Codable, Sendable, Equatable {
    public var id: Int
    public var threadID: Int
    public var index: Int
    public var author: String
    public var body: String
    public init(id: Int, threadID: Int, index: Int, author: String, body: String) {
        self.id = id; self.threadID = threadID; self.index = index; self.author = author; self.body = body
    }
}

/// The design's query builder: `where`, `orderBy`, `limit`, `offset`, on EntityQuery.
public typealias QueryBuilder<T> = EntityQuery<T>

public final class ForumsRepository: Sendable {
    public let base: EventSourcedRepository<Forum>
    init(store: EventStore) throws {
        base = try EventSourcedRepository(store: store, typeName: "Forum", indexes: [.on(\.isVisible, \.index)])
    }
    public func fetchVisibleForums() throws -> [Forum] {
        try base.fetch(QueryBuilder().where(\.isVisible, equals: true).orderBy(\.index))
    }
    public func fetchForum(by id: Int) -> Forum? { base.fetch(id: id) }
    public func updateLastRefresh(for id: Int, at date: Date = Date()) async throws {
        try await base.updateAll(matching: QueryBuilder().where { $0.id == id }) { $0.lastRefresh = date }
    }
}

public final class ThreadsRepository: Sendable {
    /// Version 2 added `isHidden`; version-1 events are read through the upcaster.
    public static let schema = EntitySchema<ForumThread>(version: 2)
        .upcasting(from: 1, decoding: ForumThreadV1.self) {
            ForumThread(id: $0.id, forumID: $0.forumID, title: $0.title, isSticky: $0.isSticky,
                        isHidden: false, hasUnreadPosts: $0.hasUnreadPosts, lastPostDate: $0.lastPostDate)
        }
    public let base: EventSourcedRepository<ForumThread>
    init(store: EventStore) throws {
        base = try EventSourcedRepository(store: store, typeName: "Thread", schema: Self.schema, indexes: [
            .on(\.forumID, .descending(\.isSticky), .descending(\.lastPostDate)),
            .on(\.hasUnreadPosts, \.lastPostDate),
            .on(\.lastPostDate),
        ])
    }
    /// A forum's threads: sticky first, then by last post, newest first.
    public func fetchThreads(forForum forumID: Int, includeSticky: Bool = true, limit: Int = 50) throws -> [ForumThread] {
        var query = QueryBuilder<ForumThread>().where(\.forumID, equals: forumID).where(\.isHidden, equals: false)
        if !includeSticky { query = query.where(\.isSticky, equals: false) }
        return try base.fetch(query.orderBy(\.isSticky, ascending: false).orderBy(\.lastPostDate, ascending: false).limit(limit))
    }
    public func fetchUnreadThreads() throws -> [ForumThread] {
        try base.fetch(QueryBuilder().where(\.hasUnreadPosts, equals: true).orderBy(\.lastPostDate, ascending: false))
    }
    public func markThreadAsRead(_ id: Int) async throws {
        try await base.updateAll(matching: QueryBuilder().where { $0.id == id }) { $0.hasUnreadPosts = false }
    }
    /// Batch update: every thread of a forum read, in one atomic batch.
    @discardableResult
    public func markForumAsRead(_ forumID: Int) async throws -> Int {
        try await base.updateAll(matching: QueryBuilder().where(\.forumID, equals: forumID).where(\.hasUnreadPosts, equals: true)) {
            $0.hasUnreadPosts = false
        }
    }
    /// The 30-day cleanup: threads without a post in 30 days go, in one batch.
    @discardableResult
    public func cleanup(now: Date = Date()) async throws -> Int {
        try await base.deleteAll(where: \.lastPostDate, before: now.addingTimeInterval(-30 * 86_400))
    }
}

public final class PostsRepository: Sendable {
    public let base: EventSourcedRepository<Post>
    init(store: EventStore) throws {
        base = try EventSourcedRepository(store: store, typeName: "Post", indexes: [.on(\.threadID, \.index)])
    }
    /// Page `page` (from 1) of a thread, `postsPerPage` posts each, in thread order.
    public func fetchPosts(inThread threadID: Int, page: Int = 1, postsPerPage: Int = 40) throws -> [Post] {
        try base.fetch(QueryBuilder().where(\.threadID, equals: threadID).orderBy(\.index)
            .offset((page - 1) * postsPerPage).limit(postsPerPage))
    }
    public func fetchPost(by id: Int) -> Post? { base.fetch(id: id) }
    /// Batch delete by predicate.
    @discardableResult
    public func deletePosts(by author: String) async throws -> Int {
        try await base.deleteAll(where: { $0.author == author })
    }
}

/// The three repositories on one store.
public final class ForumsStore: Sendable {
    public let store: EventStore
    public let forums: ForumsRepository
    public let threads: ThreadsRepository
    public let posts: PostsRepository
    public static func open(at directory: URL) throws -> ForumsStore { try ForumsStore(store: .open(at: directory)) }
    public static func inMemory() throws -> ForumsStore { try ForumsStore(store: .inMemory()) }
    public init(store: EventStore) throws {
        self.store = store
        forums = try ForumsRepository(store: store)
        threads = try ThreadsRepository(store: store)
        posts = try PostsRepository(store: store)
    }
    public func close() async throws { try await store.close() }
}
