/// A typed query over a repository's entities, in the spirit of GRDB's query interface:
/// conditions on properties, an optional residual predicate, an ordering, and paging by
/// `limit`, `offset` and a stable cursor.
///
/// ```swift
/// let page = try threads.fetch(EntityQuery<Thread>()
///     .where(\.forumID, equals: forum.id)
///     .where(\.isHidden, equals: false)
///     .orderBy(\.isSticky, ascending: false)
///     .orderBy(\.lastPostDate, ascending: false)
///     .limit(40))
/// ```
///
/// **Cost.** The repository picks the declared ``EntityIndex`` that serves the most of the
/// query: equality and `IN` conditions on its first components, a range on the next, and the
/// ordering. A query an index serves entirely costs O(log n + k) for k results (plus the
/// offset, skipped a chunk at a time when no other filter applies). Conditions no index
/// serves, and the residual predicate, are checked on each candidate; an ordering no index
/// serves sorts the matches. A query that no index serves at all still works: it scans every
/// entity (O(n)), never fails for want of an index. ``EventSourcedRepository/explain(_:)`` says
/// which plan a query gets. An overlap condition (``where(_:_:overlapping:)``) is applied by an
/// ``EntityIndex/interval(start:end:)`` on its two properties, else checked on each candidate.
///
/// **Order.** Results follow the ``orderBy(_:ascending:)`` terms, or, when there are none, the
/// repository's declared default order; ties fall to insertion order (the order entities were
/// first added, in the direction of the last term), so every order is total and paging is
/// stable. Never the id's text.
///
/// Conditions are combined with AND. A residual ``where(_:)`` predicate runs outside every
/// lock, like every closure the kernel is given.
public struct EntityQuery<Entity>: Sendable {
    /// The conditions, without their getters: what planning reads. Apart from the getters, in
    /// types that do not depend on `Entity`, so that compiling a query (and finding its kept
    /// plan, `QueryPlanCache`) runs concrete code, not generic code that asks the runtime for
    /// metadata at every step (perf: that was most of compiling a 7-day window).
    var conditions: [QueryCondition] = []
    /// Per condition (by number), its property's value.
    var conditionValues: [@Sendable (Entity) -> IndexValue] = []
    /// Overlap conditions on an interval `[start, end]` (``where(_:_:overlapping:)``).
    var overlaps: [IndexedRows.OverlapFilter] = []
    /// Per overlap condition, its start's and end's values.
    var overlapValues: [OverlapValues] = []

    /// An overlap condition's getters.
    struct OverlapValues: Sendable {
        var start: @Sendable (Entity) -> IndexValue
        var end: @Sendable (Entity) -> IndexValue
    }

    var predicate: (@Sendable (Entity) -> Bool)?
    var orderings = Orderings()

    /// Ordering terms (properties and directions) and their getters, by the same numbers.
    struct Orderings: Sendable {
        var terms: [IndexedField] = []
        var values: [@Sendable (Entity) -> IndexValue] = []
    }
    /// The maximum number of results; `nil` (and 0, as in Core Data's `fetchLimit`) means all.
    public private(set) var limit: Int?
    /// How many matches to skip, after the cursor.
    public private(set) var offset: Int = 0
    /// Continue strictly after this position (from ``QueryPage/nextCursor``).
    public private(set) var cursor: QueryCursor?

    /// A query matching every entity, in the repository's default order.
    public init() {}

    /// The query's conditions alone: no ordering, limit, offset or cursor (what a count reads).
    var conditionsOnly: Self {
        var copy = EntityQuery()
        copy.conditions = conditions
        copy.conditionValues = conditionValues
        copy.overlaps = overlaps
        copy.overlapValues = overlapValues
        copy.predicate = predicate
        return copy
    }

    /// Keeps entities whose `keyPath` equals `value`.
    /// - Parameters:
    ///   - keyPath: The property.
    ///   - value: The value it must equal.
    /// - Throws: Nothing here; running the query throws ``RepositoryError/invalidQuery(_:)``
    ///   when `value` is NaN (it equals nothing, not even itself).
    public func `where`<Value: IndexValueConvertible>(_ keyPath: any KeyPath<Entity, Value> & Sendable, equals value: Value) -> Self {
        adding(keyPath, .values([value.indexValue]))
    }

    /// Keeps entities whose `keyPath` is one of `values` (SQL's `IN`; empty matches nothing,
    /// repeats count once).
    /// - Parameters:
    ///   - keyPath: The property.
    ///   - values: The values it may equal.
    /// - Throws: Nothing here; running the query throws ``RepositoryError/invalidQuery(_:)``
    ///   when a value is NaN.
    public func `where`<Value: IndexValueConvertible>(_ keyPath: any KeyPath<Entity, Value> & Sendable, isIn values: some Sequence<Value>) -> Self {
        adding(keyPath, .values(values.map(\.indexValue)))
    }

    /// Keeps entities whose `keyPath` lies in `range`, both ends inclusive.
    ///
    /// Swift traps on a `ClosedRange` whose end precedes its start before the query sees it:
    /// for bounds that come from input, use ``where(_:from:through:)``, which reports them.
    public func `where`<Value: IndexValueConvertible & Comparable>(_ keyPath: any KeyPath<Entity, Value> & Sendable, in range: ClosedRange<Value>) -> Self {
        `where`(keyPath, from: range.lowerBound, through: range.upperBound)
    }

    /// Keeps entities whose `keyPath` lies in `range` (upper end exclusive).
    ///
    /// Swift traps on a `Range` whose end precedes its start before the query sees it: for
    /// bounds that come from input, use ``where(_:from:upTo:)``, which reports them.
    public func `where`<Value: IndexValueConvertible & Comparable>(_ keyPath: any KeyPath<Entity, Value> & Sendable, in range: Range<Value>) -> Self {
        `where`(keyPath, from: range.lowerBound, upTo: range.upperBound)
    }

    /// Keeps entities whose `keyPath` is at least `lower` and at most `upper` (SQL's
    /// `BETWEEN`), never `nil`. Unlike `lower...upper` it does not trap when `upper` precedes
    /// `lower`: the query is then refused when it runs.
    /// - Parameters:
    ///   - keyPath: The property.
    ///   - lower: The inclusive start.
    ///   - upper: The inclusive end.
    /// - Throws: Nothing here; fetching, counting, observing or deleting with the query throws
    ///   ``RepositoryError/invalidQuery(_:)`` (naming the property and both bounds) when
    ///   `upper` precedes `lower`, and (naming the property) when either is NaN.
    public func `where`<Value: IndexValueConvertible>(_ keyPath: any KeyPath<Entity, Value> & Sendable, from lower: Value, through upper: Value) -> Self {
        adding(keyPath, .range(lower: Self.bound(lower, inclusive: true), upper: Self.bound(upper, inclusive: true)))
    }

    /// Keeps entities whose `keyPath` is at least `lower` and below `upper`, never `nil`.
    /// Unlike `lower..<upper` it does not trap when `upper` precedes `lower`: the query is then
    /// refused when it runs. `from: a, upTo: a` is empty, as `a..<a` is: it matches nothing
    /// and is not an error.
    /// - Parameters:
    ///   - keyPath: The property.
    ///   - lower: The inclusive start.
    ///   - upper: The exclusive end.
    /// - Throws: Nothing here; running the query throws ``RepositoryError/invalidQuery(_:)``
    ///   (naming the property and both bounds) when `upper` precedes `lower`, and (naming the
    ///   property) when either is NaN.
    public func `where`<Value: IndexValueConvertible>(_ keyPath: any KeyPath<Entity, Value> & Sendable, from lower: Value, upTo upper: Value) -> Self {
        adding(keyPath, .range(lower: Self.bound(lower, inclusive: true), upper: Self.bound(upper, inclusive: false)))
    }

    /// Keeps entities whose `keyPath` is above `value` (or equal, when `orEqual`). Never
    /// matches `nil`, as in SQL and `NSPredicate`. Running the query throws
    /// ``RepositoryError/invalidQuery(_:)`` when `value` is NaN.
    public func `where`<Value: IndexValueConvertible>(_ keyPath: any KeyPath<Entity, Value> & Sendable, greaterThan value: Value, orEqual: Bool = false) -> Self {
        adding(keyPath, .range(lower: Self.bound(value, inclusive: orEqual), upper: nil))
    }

    /// Keeps entities whose `keyPath` is below `value` (or equal, when `orEqual`). Never
    /// matches `nil`, although `nil` sorts first, as in SQL (`NULL < x` is unknown) and
    /// `NSPredicate`; `where(keyPath, equals: nil)` finds those. Running the query throws
    /// ``RepositoryError/invalidQuery(_:)`` when `value` is NaN.
    public func `where`<Value: IndexValueConvertible>(_ keyPath: any KeyPath<Entity, Value> & Sendable, lessThan value: Value, orEqual: Bool = false) -> Self {
        adding(keyPath, .range(lower: nil, upper: Self.bound(value, inclusive: orEqual)))
    }

    /// Keeps entities whose interval `[start, end]` overlaps `range`: those that start at or
    /// before its end and either end at or after its start or have not ended (`end` is `nil`:
    /// the interval runs forever, like a running activity). Both ends are inclusive, so an
    /// interval that ends exactly where the range starts overlaps it.
    ///
    /// An ``EntityIndex/interval(start:end:)`` on the same two properties (with its prefix
    /// fixed by equality or `IN` conditions) serves it: see there for the cost. Without one,
    /// every candidate is checked (a scan when nothing else narrows them).
    ///
    /// Swift traps on a `ClosedRange` whose end precedes its start before the query sees it:
    /// for bounds that come from input, use ``where(_:_:overlappingFrom:through:)``.
    /// - Parameters:
    ///   - start: The interval's start.
    ///   - end: The interval's end (included); `nil` for an interval that has not ended.
    ///   - range: The range; both ends inclusive.
    public func `where`<Value: IndexValueConvertible & Comparable>(
        _ start: any KeyPath<Entity, Value> & Sendable, _ end: any KeyPath<Entity, Value?> & Sendable,
        overlapping range: ClosedRange<Value>
    ) -> Self {
        `where`(start, end, overlappingFrom: range.lowerBound, through: range.upperBound)
    }

    /// Keeps entities whose interval `[start, end]` overlaps `[lower, upper]`; see
    /// ``where(_:_:overlapping:)``. Unlike `lower...upper` it does not trap when `upper`
    /// precedes `lower`: the query is then refused when it runs.
    /// - Parameters:
    ///   - start: The interval's start.
    ///   - end: The interval's end (included); `nil` for an interval that has not ended.
    ///   - lower: The range's inclusive start.
    ///   - upper: The range's inclusive end.
    /// - Throws: Nothing here; running the query throws ``RepositoryError/invalidQuery(_:)``
    ///   (naming the properties and both bounds) when `upper` precedes `lower` or either is NaN.
    public func `where`<Value: IndexValueConvertible>(
        _ start: any KeyPath<Entity, Value> & Sendable, _ end: any KeyPath<Entity, Value?> & Sendable,
        overlappingFrom lower: Value, through upper: Value
    ) -> Self {
        var copy = self
        copy.overlaps.append(IndexedRows.OverlapFilter(
            start: start, end: end, lower: Self.bound(lower, inclusive: true), upper: Self.bound(upper, inclusive: true)))
        copy.overlapValues.append(OverlapValues(start: { $0[keyPath: start].indexValue }, end: { $0[keyPath: end].indexValue }))
        return copy
    }

    private static func bound<Value: IndexValueConvertible>(_ value: Value, inclusive: Bool) -> IndexedRows.RangeBound {
        IndexedRows.RangeBound(value: value.indexValue, inclusive: inclusive, original: value)
    }

    /// Keeps entities for which `predicate` holds (checked after the indexed conditions,
    /// outside every lock). Several predicates are combined with AND.
    public func `where`(_ predicate: @escaping @Sendable (Entity) -> Bool) -> Self {
        var copy = self
        if let previous = copy.predicate {
            copy.predicate = { previous($0) && predicate($0) }
        } else {
            copy.predicate = predicate
        }
        return copy
    }

    /// Orders results by `keyPath` (after any earlier ordering terms).
    public func orderBy<Value: IndexValueConvertible>(_ keyPath: any KeyPath<Entity, Value> & Sendable, ascending: Bool = true) -> Self {
        var copy = self
        copy.orderings.terms.append(IndexedField(keyPath: keyPath, descending: !ascending))
        copy.orderings.values.append { $0[keyPath: keyPath].indexValue }
        return copy
    }

    /// Returns at most `limit` results; `nil` or 0 means no limit (as Core Data's `fetchLimit`).
    public func limit(_ limit: Int?) -> Self {
        var copy = self
        copy.limit = limit
        return copy
    }

    /// Skips the first `offset` matches (after the cursor).
    public func offset(_ offset: Int) -> Self {
        var copy = self
        copy.offset = offset
        return copy
    }

    /// Returns only results strictly after `cursor` (the ``QueryPage/nextCursor`` of the
    /// previous page of this same query): unlike an offset, it keeps its place when entities
    /// are added or removed before it.
    public func after(_ cursor: QueryCursor?) -> Self {
        var copy = self
        copy.cursor = cursor
        return copy
    }

    private func adding<Value: IndexValueConvertible>(_ keyPath: any KeyPath<Entity, Value> & Sendable, _ test: QueryCondition.Test) -> Self {
        var copy = self
        copy.conditions.append(QueryCondition(keyPath: keyPath, test: test))
        copy.conditionValues.append { $0[keyPath: keyPath].indexValue }
        return copy
    }

    /// The effective limit: `nil` for none.
    var effectiveLimit: Int? { limit.flatMap { $0 > 0 ? $0 : nil } }
}

/// A condition of an ``EntityQuery`` on one property, without its getter (the query keeps
/// those apart, by the same numbers): not generic, for planning.
struct QueryCondition: Sendable {
    enum Test: Sendable {
        case values([IndexValue])
        case range(lower: IndexedRows.RangeBound?, upper: IndexedRows.RangeBound?)
    }
    var keyPath: any AnyKeyPath & Sendable
    var test: Test
}

/// A stable place in a query's results: the sort key of the last result of a page. The next
/// page (``EntityQuery/after(_:)``) starts strictly after it, whatever was added or removed
/// meanwhile. A cursor belongs to the query that produced it.
public struct QueryCursor: Hashable, Sendable {
    /// The sort key of the last result.
    let key: [IndexValue]
    /// Its insertion sequence, the final tie-break.
    let sequence: UInt64
    /// The plan that produced it (`IndexedRows.planTag`: the indexes' declaration, the index, and whether it served the
    /// order or sorted), so that a cursor is never applied to an order it was not taken in.
    let plan: UInt64
}

/// One page of results and the cursor to continue after it.
public struct QueryPage<Entity: Sendable>: Sendable {
    /// The results, in the query's order.
    public var entities: [Entity]
    /// Where the next page starts (``EntityQuery/after(_:)``), or `nil` when this page was the last.
    public var nextCursor: QueryCursor?
}
