public import EventKernel

/// The brute-force twin of a repository in the randomized query tests: every entity with the
/// sequence in which it was first saved (the order an unsorted query returns, and the tie-break
/// of a sorted one).
public struct QueryModel<Entity: Identifiable> where Entity.ID: Hashable {
    /// The live entities by id.
    public var items: [Entity.ID: (item: Entity, sequence: Int)] = [:]
    /// Every id ever saved, in order: a deterministic choice for a generator (a dictionary's
    /// order is not). A removed entity's id stays.
    public private(set) var ids: [Entity.ID] = []
    private var next = 0

    public init() {}

    /// Saves `item`: a new id takes the next sequence, an existing one keeps its own.
    public mutating func save(_ item: Entity) {
        let sequence = items[item.id]?.sequence ?? next
        if items[item.id] == nil { next += 1; ids.append(item.id) }
        items[item.id] = (item, sequence)
    }
}

/// A generated query and what filtering and sorting all of a ``QueryModel``'s entities gives
/// for it: the answer the repository must match exactly.
public struct QueryCase<Entity: Identifiable> where Entity.ID: Hashable {
    public var query: EntityQuery<Entity>
    public var filter: (Entity) -> Bool
    public var order: [(key: (Entity) -> IndexValue, descending: Bool)]
    public var limit: Int?
    public var offset: Int

    public init(query: EntityQuery<Entity>, filter: @escaping (Entity) -> Bool,
                order: [(key: (Entity) -> IndexValue, descending: Bool)], limit: Int?, offset: Int) {
        self.query = query
        self.filter = filter
        self.order = order
        self.limit = limit
        self.offset = offset
    }

    /// The model's answer: matching entities in the order's terms, ties in save order (reversed
    /// when the last term descends), then offset and limit.
    public func expected(_ model: QueryModel<Entity>) -> [Entity] {
        var all = model.items.values.filter { filter($0.item) }
        let lastDescending = order.last?.descending ?? false
        all.sort { a, b in
            for term in order {
                let c = IndexValue.compare(term.key(a.item), term.key(b.item))
                if c != 0 { return term.descending ? c > 0 : c < 0 }
            }
            return lastDescending ? a.sequence > b.sequence : a.sequence < b.sequence
        }
        let items = all.dropFirst(offset).map(\.item)
        return limit.map { Array(items.prefix($0)) } ?? items
    }
}
