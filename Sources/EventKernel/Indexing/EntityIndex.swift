/// One property of an index key, with its direction.
public struct IndexComponent<Entity>: Sendable {
    /// The property; conditions and orderings on the same key path are served by the index.
    public let keyPath: any PartialKeyPath<Entity> & Sendable
    /// Whether larger values come first.
    public let descending: Bool
    let value: @Sendable (Entity) -> IndexValue
    /// Appends the property's value of each of a run of entities (a snapshot part's).
    let values: @Sendable (_ entities: [Entity], _ into: inout [IndexValue]) -> Void

    /// The bytes of the entity the property is stored in; `nil` for a computed property.
    let storage: Range<Int>?
    /// The index value of a value of the property's type (`nil` for another type): what a field
    /// event (``FieldEvent``) splices into the keys, computed outside every lock.
    let indexValueOf: @Sendable (any Sendable) -> IndexValue?

    private init<Value: IndexValueConvertible>(_ keyPath: any KeyPath<Entity, Value> & Sendable, descending: Bool) {
        self.keyPath = keyPath
        self.descending = descending
        (value, values) = Self.readers(keyPath)
        storage = MemoryLayout<Entity>.offset(of: keyPath).map { $0..<$0 + MemoryLayout<Value>.size }
        indexValueOf = { ($0 as? Value)?.indexValue }
    }

    /// The property `keyPath`, smaller values first.
    public static func ascending<Value: IndexValueConvertible>(_ keyPath: any KeyPath<Entity, Value> & Sendable) -> Self {
        Self(keyPath, descending: false)
    }

    /// The property `keyPath`, larger values first (`true` before `false`, newest date first).
    public static func descending<Value: IndexValueConvertible>(_ keyPath: any KeyPath<Entity, Value> & Sendable) -> Self {
        Self(keyPath, descending: true)
    }

    /// Reads `keyPath`'s value as an index value: a stored property (at any depth of inline
    /// structs) by its offset in the entity, anything else (computed properties, classes,
    /// optional chaining) through the key path.
    ///
    /// Why the offset: this code is generic and not specialised for the domain's types, and a
    /// key path read here goes through `swift_getAtKeyPath`, which instantiates generic metadata
    /// on every read: computing three index keys per entity was a sixth of a snapshot open of a
    /// million entities (perf). `MemoryLayout.offset(of:)` is non-nil exactly when the key path
    /// names storage inline in the entity, so loading a `Value` there reads the same value.
    ///
    /// And why a reader of many: a snapshot open computes every entity's keys, and this generic
    /// code asks the runtime for the entity's and the value's metadata on every call of the
    /// one-entity reader (perf: `_swift_getGenericMetadata` was a sixth of an open of 297,378
    /// activities, the keys a third); one call per run of entities asks once per run.
    private static func readers<Value: IndexValueConvertible>(_ keyPath: any KeyPath<Entity, Value> & Sendable) -> (
        one: @Sendable (Entity) -> IndexValue, all: @Sendable ([Entity], inout [IndexValue]) -> Void
    ) {
        guard let offset = MemoryLayout<Entity>.offset(of: keyPath) else {
            return ({ $0[keyPath: keyPath].indexValue }, { entities, out in
                for entity in entities { out.append(entity[keyPath: keyPath].indexValue) }
            })
        }
        return ({ entity in
            withUnsafeBytes(of: entity) { $0.load(fromByteOffset: offset, as: Value.self) }.indexValue
        }, { entities, out in
            let stride = MemoryLayout<Entity>.stride
            entities.withUnsafeBytes { raw in
                var at = offset
                for _ in 0..<entities.count {
                    out.append(raw.load(fromByteOffset: at, as: Value.self).indexValue)
                    at &+= stride
                }
            }
        })
    }

    /// The key path's name, for messages: `\Thread.lastPostDate`.
    public var name: String { String(describing: keyPath) + (descending ? " desc" : "") }
}

/// An index a repository declares and keeps up to date in its projection: entities ordered by
/// one or more properties, so that equality, `IN` and range conditions on a prefix of them,
/// and orderings by them, cost O(log n + k) instead of a scan.
///
/// ```swift
/// let threads = try EventSourcedRepository<Thread>(store: store, typeName: "Thread", indexes: [
///     .on(\.forumID, .descending(\.isSticky), .descending(\.lastPostDate)),
///     .on(\.hasUnreadPosts),
/// ])
/// ```
///
/// An index orders entities by its components in turn, then by insertion (so equal keys keep
/// a stable order). It serves a query whose equality conditions cover its first components
/// (in any order), with at most one range condition on the next one, and whose ordering is the
/// components after those, all in the index's directions or all reversed. See ``EntityQuery``
/// for what happens when no index fits (a scan, never an error).
///
/// An interval index (``interval(start:end:)``) orders by its prefix and start like
/// `.on(prefix…, start)`, and also answers which entities' `[start, end]` overlaps a range.
public struct EntityIndex<Entity>: Sendable {
    /// The key's properties, most significant first. An interval index's last component is
    /// its start.
    public let components: [IndexComponent<Entity>]
    /// The end of an interval index (``interval(start:end:)``), `nil` for an ordinary index.
    public let intervalEnd: IndexComponent<Entity>?

    /// An index over `components`, most significant first.
    public init(_ components: [IndexComponent<Entity>]) {
        precondition(!components.isEmpty && components.count <= 255, "an index has 1 to 255 components")
        self.components = components
        self.intervalEnd = nil
    }

    private init(prefix: [IndexComponent<Entity>], start: IndexComponent<Entity>, end: IndexComponent<Entity>) {
        precondition(prefix.count < 255, "an index has 1 to 255 components")
        self.components = prefix + [start]
        self.intervalEnd = end
    }

    /// An interval index: entities as intervals `[start, end]`, where a `nil` end is open (the
    /// interval runs forever, like a running activity), ordered by start, then insertion.
    ///
    /// It serves ``EntityQuery/where(_:_:overlapping:)`` (entities whose interval overlaps a
    /// closed range), and, like `.on(start)`, ranges of and orderings by `start`.
    ///
    /// ```swift
    /// let activities = try EventSourcedRepository<Activity>(store: store, typeName: "Activity", indexes: [
    ///     .interval(start: \.startDate, end: \.endDate),
    /// ])
    /// let today = try activities.fetch(EntityQuery<Activity>()
    ///     .where(\.startDate, \.endDate, overlapping: midnight...now))
    /// ```
    ///
    /// Besides its entries the index keeps the entities whose end is `nil`, in the same order,
    /// and a histogram of the ended ones' durations in power-of-two buckets: an overlap query
    /// scans only the starts in `[a − longest duration, b]` and the open entries that start
    /// earlier. The histogram bounds the longest duration within a factor of two and shrinks
    /// again when a long interval is removed or corrected (a running maximum would not). Starts
    /// and ends that are not numbers or dates give no duration: the query then scans every
    /// start up to `b`, still right.
    /// - Parameters:
    ///   - start: The interval's start.
    ///   - end: The interval's end, included; `nil` for an interval that has not ended.
    /// - Complexity: An overlap query costs O(log n + m + k) for the m entities starting in
    ///   `[a − d, b]` (d the longest duration, within 2×) and k open ones starting before; an
    ///   upsert or delete O(log n) more than an ordinary index's.
    public static func interval<Value: IndexValueConvertible>(
        start: any KeyPath<Entity, Value> & Sendable, end: any KeyPath<Entity, Value?> & Sendable
    ) -> Self {
        Self(prefix: [], start: .ascending(start), end: .ascending(end))
    }

    /// An interval index for each value of `prefix` (``interval(start:end:)`` within each):
    /// it serves overlap queries with an equality or `IN` condition on `prefix`.
    /// - Parameters:
    ///   - prefix: The property the queries fix by equality or `IN`.
    ///   - start: The interval's start.
    ///   - end: The interval's end, included; `nil` for an interval that has not ended.
    /// - Complexity: See ``interval(start:end:)``; per value of the prefix for `IN`.
    public static func interval<P: IndexValueConvertible, Value: IndexValueConvertible>(
        on prefix: any KeyPath<Entity, P> & Sendable,
        start: any KeyPath<Entity, Value> & Sendable, end: any KeyPath<Entity, Value?> & Sendable
    ) -> Self {
        Self(prefix: [.ascending(prefix)], start: .ascending(start), end: .ascending(end))
    }

    /// An interval index for each combination of the `prefix` components' values (see
    /// the one-property form above).
    /// - Parameters:
    ///   - prefix: The properties the queries fix by equality or `IN`, most significant first.
    ///   - start: The interval's start.
    ///   - end: The interval's end, included; `nil` for an interval that has not ended.
    public static func interval<Value: IndexValueConvertible>(
        on prefix: [IndexComponent<Entity>],
        start: any KeyPath<Entity, Value> & Sendable, end: any KeyPath<Entity, Value?> & Sendable
    ) -> Self {
        Self(prefix: prefix, start: .ascending(start), end: .ascending(end))
    }

    /// An index over `components`, most significant first.
    public static func on(_ components: IndexComponent<Entity>...) -> Self { Self(components) }

    /// An ascending index on one property (equality, `IN`, range, and order by it).
    public static func on<A: IndexValueConvertible>(_ a: any KeyPath<Entity, A> & Sendable) -> Self {
        Self([.ascending(a)])
    }

    /// An ascending index on two properties: equality on the first, range or order on the second.
    public static func on<A: IndexValueConvertible, B: IndexValueConvertible>(
        _ a: any KeyPath<Entity, A> & Sendable, _ b: any KeyPath<Entity, B> & Sendable
    ) -> Self {
        Self([.ascending(a), .ascending(b)])
    }

    /// An index whose first property is ascending and whose others are given with directions.
    public static func on<A: IndexValueConvertible>(
        _ a: any KeyPath<Entity, A> & Sendable, _ rest: IndexComponent<Entity>...
    ) -> Self {
        Self([.ascending(a)] + rest)
    }

    /// The keys a run of entities has in this index, in order (see ``IndexComponent``'s readers
    /// for why a run at once).
    func keys(of entities: [Entity]) -> [IndexKey] {
        let columns = components.map { component in
            var column: [IndexValue] = []
            column.reserveCapacity(entities.count)
            component.values(entities, &column)
            return column
        }
        switch components.count {
        case 1: return columns[0].map { IndexKey($0) }
        case 2: return zip(columns[0], columns[1]).map { IndexKey($0, $1) }
        default: return entities.indices.map { i in IndexKey(columns.map { $0[i] }) }
        }
    }

    /// The key `entity` has in this index, read for the entity alone: the tests' oracle for
    /// ``keys(of:)`` (the kernel reads a run of entities' keys at once). Keys of one and two
    /// components are built without an intermediate array.
    func key(of entity: Entity) -> IndexKey {
        switch components.count {
        case 1: IndexKey(components[0].value(entity))
        case 2: IndexKey(components[0].value(entity), components[1].value(entity))
        default: IndexKey(components.map { $0.value(entity) })
        }
    }

    /// The index's description, for messages and `explain`: `(\Thread.forumID, \Thread.isSticky desc)`,
    /// or for an interval index `interval(\Activity.type, \Activity.startDate ... \Activity.endDate)`.
    /// (A snapshot keeps each index's order under its name.)
    public var name: String {
        guard let intervalEnd else { return "(" + components.map(\.name).joined(separator: ", ") + ")" }
        return "interval(" + components.map(\.name).joined(separator: ", ") + " ... " + intervalEnd.name + ")"
    }
}
