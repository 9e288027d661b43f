// The shift planner's repository layer (../shared/seeds, design 003) on EventKernel: the app's own
// protocol family (Repository, Readable, Writable, CRUD, Listenable, Paginated, Queryable), users
// and shifts, and the app's own error enum mapped from the kernel's. One generic adapter serves
// every entity; the domain repositories add their queries. No storage code.
public import EventKernel
public import Foundation

public struct User: Identifiable, Codable, Sendable, Equatable {
    public var uid: String
    public var name: String
    public var email: String
    public var companyId: String
    public var id: String { uid }
    public init(uid: String, name: String, email: String, companyId: String) {
        self.uid = uid; self.name = name; self.email = email; self.companyId = companyId
    }
}

public struct Shift: Identifiable, Codable, Sendable, Equatable {
    public var id: String
    public var userId: String
    public var start: Date
    public var end: Date
    public var role: String
    public init(id: String, userId: String, start: Date, end: Date, role: String) {
        self.id = id; self.userId = userId; self.start = start; self.end = end; self.role = role
    }
}

/// The app's errors, as the design declares them.
public enum RepositoryError: Error, LocalizedError {
    case documentNotFound
    case decodingFailed
    case encodingFailed
    case networkError(any Error)
    case permissionDenied
    case unexpectedError((any Error)?)
    case invalidData
    case operationFailed(String)

    /// The app's view of a kernel error; anything the app has no case for keeps its cause.
    public init(_ error: any Error) {
        switch error {
        case let mine as RepositoryError: self = mine
        case let kernel as EventKernel.RepositoryError:
            switch kernel {
            case .notFound: self = .documentNotFound
            case .validationFailed: self = .invalidData
            case .undecodableEvent: self = .decodingFailed
            case .alreadyExists, .conflict, .invalidQuery, .limitExceeded, .streamPurged, .closed: self = .operationFailed(kernel.description)
            case .storage, .misuse: self = .unexpectedError(kernel)
            }
        case is EncodingError: self = .encodingFailed
        case is DecodingError, is BinaryDecodingError: self = .decodingFailed
        default: self = .unexpectedError(error)
        }
    }

    public var errorDescription: String? {
        switch self {
        case .documentNotFound: "not found"
        case .decodingFailed: "stored data could not be read"
        case .encodingFailed: "data could not be stored"
        case .networkError(let error): "network: \(error)"
        case .permissionDenied: "permission denied"
        case .unexpectedError(let error): "unexpected: \(error.map { "\($0)" } ?? "unknown")"
        case .invalidData: "invalid data"
        case .operationFailed(let why): why
        }
    }
}

public protocol Repository: Sendable {
    associatedtype ID: Hashable & Sendable
    associatedtype Model: Identifiable & Sendable where Model.ID == ID
}
public protocol ReadableRepository: Repository {
    func get(byId id: ID) async throws -> Model?
    func getAll() async throws -> [Model]
}
public protocol WritableRepository: Repository {
    @discardableResult func create(_ model: Model) async throws -> Model
    @discardableResult func update(_ model: Model) async throws -> Model
    func delete(byId id: ID) async throws
}
public protocol CRUDRepository: ReadableRepository, WritableRepository {}
public protocol ListenableRepository: Repository {
    func observe(where isIncluded: @escaping @Sendable (Model) -> Bool) -> AsyncStream<[Model]>
}
public struct Page<Model: Sendable>: Sendable {
    public var items: [Model]
    public var next: QueryCursor?
}
public protocol PaginatedRepository: Repository {
    func getPage(after cursor: QueryCursor?, limit: Int) async throws -> Page<Model>
}
public protocol QueryableRepository: Repository {
    func query(_ query: EntityQuery<Model>) async throws -> [Model]
}

/// Every protocol of the family for any entity, on a kernel repository (thread-safe as it is).
/// Every error leaves as the app's ``RepositoryError``.
public struct KernelRepository<Model: Identifiable & Codable & Sendable>: CRUDRepository, ListenableRepository,
    PaginatedRepository, QueryableRepository where Model.ID: EntityIDConvertible {
    public typealias ID = Model.ID
    let base: EventSourcedRepository<Model>

    public func get(byId id: ID) async throws -> Model? { base.fetch(id: id) }
    public func getAll() async throws -> [Model] { base.fetchAll() }
    public func create(_ model: Model) async throws -> Model { try await mapped { try await base.add(model) }; return model }
    public func update(_ model: Model) async throws -> Model { try await mapped { try await base.update(model) }; return model }
    public func delete(byId id: ID) async throws {
        guard try await mapped({ try await base.delete(id: id) }) else { throw RepositoryError.documentNotFound }
    }
    public func observe(where isIncluded: @escaping @Sendable (Model) -> Bool) -> AsyncStream<[Model]> { base.observe(where: isIncluded) }
    public func getPage(after cursor: QueryCursor?, limit: Int) async throws -> Page<Model> {
        let page = try await mapped { try base.fetchPage(EntityQuery<Model>().after(cursor).limit(limit)) }
        return Page(items: page.entities, next: page.nextCursor)
    }
    public func query(_ query: EntityQuery<Model>) async throws -> [Model] { try await mapped { try base.fetch(query) } }

    private func mapped<T>(_ body: () async throws -> T) async throws(RepositoryError) -> T {
        do { return try await body() } catch { throw RepositoryError(error) }
    }
}

public protocol UserRepository: CRUDRepository, ListenableRepository, PaginatedRepository, QueryableRepository
where Model == User, ID == String {
    func getTeamMembers(companyId: String) async throws -> [User]
}
extension KernelRepository: UserRepository where Model == User {
    public func getTeamMembers(companyId: String) async throws -> [User] {
        try await query(EntityQuery().where(\.companyId, equals: companyId))
    }
}

public protocol ShiftRepository: CRUDRepository, ListenableRepository, QueryableRepository where Model == Shift, ID == String {
    /// A user's shifts starting in `interval`, earliest first.
    func getShifts(forUser userId: String, in interval: DateInterval) async throws -> [Shift]
}
extension KernelRepository: ShiftRepository where Model == Shift {
    public func getShifts(forUser userId: String, in interval: DateInterval) async throws -> [Shift] {
        try await query(EntityQuery().where(\.userId, equals: userId).where(\.start, in: interval.start...interval.end))
    }
}

/// The app's repositories on one store: durable (`open(at:)`) or in memory.
public final class RepositoryFactory: Sendable {
    public let store: EventStore
    private let users: KernelRepository<User>
    private let shifts: KernelRepository<Shift>

    public static func open(at directory: URL) throws -> RepositoryFactory { try RepositoryFactory(store: .open(at: directory)) }
    public static func inMemory() throws -> RepositoryFactory { try RepositoryFactory(store: .inMemory()) }

    init(store: EventStore) throws {
        self.store = store
        users = KernelRepository(base: try EventSourcedRepository(
            store: store, typeName: "User", indexes: [.on(\.companyId, \.name)], defaultOrder: [.ascending(\.name)],
            validate: { user in
                guard user.email.contains("@") else { throw EventKernel.RepositoryError.validationFailed("user \(user.uid): email '\(user.email)'") }
            }))
        shifts = KernelRepository(base: try EventSourcedRepository(
            store: store, typeName: "Shift", indexes: [.on(\.userId, \.start), .on(\.start)], defaultOrder: [.ascending(\.start)]))
    }

    public func userRepository() -> any UserRepository { users }
    public func shiftRepository() -> any ShiftRepository { shifts }
    public func close() async throws { try await store.close() }
}
