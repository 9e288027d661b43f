public import Foundation

/// The order in which queries return activities.
///
/// Activities are ordered by start date, and activities that start at the
/// same instant by their id's bytes, so every order is total and results are
/// deterministic. `.newestFirst` is the exact reverse of `.oldestFirst`.
public enum ActivitySortOrder: String, Hashable, Sendable, Codable, CaseIterable {
    /// Earliest start date first.
    case oldestFirst
    /// Latest start date first.
    case newestFirst
}

/// A stable pagination position: the sort key of the last activity of the
/// previous page.
///
/// Unlike an offset, a cursor keeps pointing at the same place when
/// activities are inserted or removed elsewhere, so walking pages with it
/// returns each activity exactly once. The next page holds the activities
/// strictly after the cursor in the query's sort order.
public struct ActivityCursor: Hashable, Sendable, Codable, Comparable {
    /// The start date of the last activity of the previous page.
    public var startDate: Date
    /// The id of the last activity of the previous page; breaks ties.
    public var id: UUID

    /// Creates a cursor from a sort key.
    ///
    /// - Parameters:
    ///   - startDate: The start date of the activity to continue after.
    ///   - id: The id of that activity.
    /// - Complexity: O(1)
    @inlinable
    public init(startDate: Date, id: UUID) {
        self.startDate = startDate
        self.id = id
    }

    /// Creates a cursor that continues after the given activity.
    ///
    /// - Parameter model: The last activity of the previous page.
    /// - Complexity: O(1)
    @inlinable
    public init(after model: ActivityModel) {
        self.init(startDate: model.startDate, id: model.id)
    }

    /// Orders cursors (and so activities) oldest first: by start date, then
    /// by the id's bytes compared lexicographically.
    ///
    /// - Complexity: O(1)
    @inlinable
    public static func < (lhs: ActivityCursor, rhs: ActivityCursor) -> Bool {
        if lhs.startDate != rhs.startDate { return lhs.startDate < rhs.startDate }
        return ActivityCursor.idLess(lhs.id, rhs.id)
    }

    /// Whether `a`'s bytes sort before `b`'s; the tie-break of every sort.
    ///
    /// - Complexity: O(1)
    @inlinable
    public static func idLess(_ a: UUID, _ b: UUID) -> Bool {
        // Big-endian words compare like the byte sequence, in two steps.
        let (ah, al) = idWords(a)
        let (bh, bl) = idWords(b)
        return ah != bh ? ah < bh : al < bl
    }

    @inlinable
    static func idWords(_ id: UUID) -> (UInt64, UInt64) {
        withUnsafeBytes(of: id.uuid) { raw in
            (UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self)),
             UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
    }
}

/// A query is malformed; the message says what is wrong and with which values.
///
/// Repositories map this to their own invalid-query error.
public struct ActivityQueryError: Error, Sendable, CustomStringConvertible, Equatable {
    /// A human-readable explanation naming the offending values.
    public var message: String

    /// Creates an error with an explanation.
    ///
    /// - Parameter message: What is wrong, with the offending values.
    public init(_ message: String) { self.message = message }

    /// The message, prefixed so it reads well in logs.
    public var description: String { "invalid activity query: \(message)" }
}

/// A filtered, sorted, paginated selection of activities.
///
/// Semantics, each of which callers may rely on:
/// - `afterDate` is exclusive: only activities with `startDate > afterDate`.
/// - `beforeDate` is exclusive: only activities with `startDate < beforeDate`.
///   So `afterDate == beforeDate` matches nothing, and `afterDate > beforeDate`
///   is an error rather than an empty result, because it is almost certainly
///   a caller bug (swapped arguments).
/// - `types == nil` matches any type; `types == []` matches nothing.
/// - `limit == nil` and `limit == 0` return everything (0 is "no limit", as
///   Core Data's `fetchLimit` and the apps' repositories read it); a negative
///   limit is an error.
/// - Results are ordered by `(startDate, id)` (id bytes break ties),
///   reversed entirely for `.newestFirst`.
/// - `cursor` keeps only activities strictly after it in the sort order;
///   then `offset` (never negative) skips that many matches; then `limit`
///   applies.
public struct ActivityQuery: Hashable, Sendable, Codable {
    /// Keep only activities that start strictly after this date.
    public var afterDate: Date?
    /// Keep only activities that start strictly before this date.
    public var beforeDate: Date?
    /// Keep only activities of these types; `nil` means any type.
    public var types: Set<ActivityType>?
    /// The maximum number of results; `nil` means no limit.
    public var limit: Int?
    /// The order of the results.
    public var sortOrder: ActivitySortOrder
    /// The spelling of the apps' repository plans: `ActivityQuery.SortOrder.newestFirst`.
    public typealias SortOrder = ActivitySortOrder
    /// How many matches to skip (after applying the cursor).
    public var offset: Int
    /// Keep only activities strictly after this position in the sort order.
    public var cursor: ActivityCursor?

    /// Creates a query; see the type's documentation for the exact semantics.
    ///
    /// - Parameters:
    ///   - afterDate: Exclusive lower bound on the start date.
    ///   - beforeDate: Exclusive upper bound on the start date.
    ///   - types: The types to keep, or `nil` for all.
    ///   - limit: The maximum result count, or `nil` for all.
    ///   - sortOrder: The result order; newest first by default.
    ///   - offset: Matches to skip; 0 by default.
    ///   - cursor: Continue strictly after this position, or `nil` to start
    ///     at the beginning.
    /// - Complexity: O(1)
    public init(
        afterDate: Date? = nil,
        beforeDate: Date? = nil,
        types: Set<ActivityType>? = nil,
        limit: Int? = nil,
        sortOrder: ActivitySortOrder = .newestFirst,
        offset: Int = 0,
        cursor: ActivityCursor? = nil
    ) {
        self.afterDate = afterDate
        self.beforeDate = beforeDate
        self.types = types
        self.limit = limit
        self.sortOrder = sortOrder
        self.offset = offset
        self.cursor = cursor
    }

    /// Creates a query whose types come from an array, as the apps' repository plans pass
    /// them (`types: [.sleep]`); see the main initializer.
    public init(
        afterDate: Date? = nil,
        beforeDate: Date? = nil,
        types: [ActivityType]?,
        limit: Int? = nil,
        sortOrder: ActivitySortOrder = .newestFirst,
        offset: Int = 0,
        cursor: ActivityCursor? = nil
    ) {
        self.init(afterDate: afterDate, beforeDate: beforeDate, types: types.map(Set.init), limit: limit,
                  sortOrder: sortOrder, offset: offset, cursor: cursor)
    }

    /// The limit to apply: `nil` for none (a `limit` of `nil` or 0).
    @inlinable
    public var effectiveLimit: Int? { limit == 0 ? nil : limit }

    /// Checks that the query is well formed.
    ///
    /// - Throws: `ActivityQueryError` if `limit` or `offset` is negative, a date
    ///   is NaN, or `afterDate` is later than `beforeDate`.
    /// - Complexity: O(1)
    public func validate() throws(ActivityQueryError) {
        // NaN compares false with everything (and a NaN `Date` traps when printed), so it is
        // rejected here before any message interpolates a date.
        if afterDate?.timeIntervalSinceReferenceDate.isNaN == true { throw ActivityQueryError("afterDate is not a number (NaN)") }
        if beforeDate?.timeIntervalSinceReferenceDate.isNaN == true { throw ActivityQueryError("beforeDate is not a number (NaN)") }
        if cursor?.startDate.timeIntervalSinceReferenceDate.isNaN == true { throw ActivityQueryError("cursor startDate is not a number (NaN)") }
        if let limit, limit < 0 {
            throw ActivityQueryError("limit must not be negative (limit: \(limit))")
        }
        if offset < 0 {
            throw ActivityQueryError("offset must not be negative (offset: \(offset))")
        }
        if let afterDate, let beforeDate, afterDate > beforeDate {
            throw ActivityQueryError(
                "afterDate must not be later than beforeDate (afterDate: \(afterDate), beforeDate: \(beforeDate))"
            )
        }
    }

    /// Whether a query can match anything at all, given it is valid.
    @inlinable
    var isTriviallyEmpty: Bool {
        if let types, types.isEmpty { return true }
        if let afterDate, let beforeDate, afterDate >= beforeDate { return true }
        return false
    }

    /// Whether an activity passes the query's filters and cursor.
    ///
    /// Offset and limit depend on the other results, so they are not checked.
    ///
    /// - Parameter model: The activity to test.
    /// - Returns: `true` if the activity would be among the candidates.
    /// - Complexity: O(1) on average.
    public func matches(_ model: ActivityModel) -> Bool {
        if let afterDate, !(model.startDate > afterDate) { return false }
        if let beforeDate, !(model.startDate < beforeDate) { return false }
        if let types, !types.contains(model.type) { return false }
        if let cursor {
            let key = ActivityCursor(after: model)
            switch sortOrder {
            case .oldestFirst: if !(cursor < key) { return false }
            case .newestFirst: if !(key < cursor) { return false }
            }
        }
        return true
    }
}

/// A query over a closed date window: either the activities whose start date
/// lies in the window, or those whose lifetime overlaps it.
///
/// Both ends of the window are inclusive. An activity `x` overlaps `[a, b]`
/// when `x.startDate <= b` and either `x.endDate >= a` or `x` is still
/// active (a running activity extends to the indefinite future).
public struct ActivityRangeQuery: Hashable, Sendable, Codable {
    /// How the window selects activities.
    public enum Kind: String, Hashable, Sendable, Codable {
        /// Activities whose start date lies in the window.
        case startingIn
        /// Activities whose lifetime overlaps the window.
        case overlapping
    }

    /// How the window selects activities.
    public var kind: Kind
    /// The inclusive start of the window.
    public var lowerBound: Date
    /// The inclusive end of the window.
    public var upperBound: Date
    /// Keep only activities of these types; `nil` means any type, `[]` none.
    public var types: Set<ActivityType>?
    /// The order of the results.
    public var sortOrder: ActivitySortOrder
    /// The maximum number of results; `nil` (or 0) means no limit.
    public var limit: Int?

    /// The limit to apply: `nil` for none (a `limit` of `nil` or 0).
    @inlinable
    public var effectiveLimit: Int? { limit == 0 ? nil : limit }

    /// Creates a window query.
    ///
    /// - Parameters:
    ///   - kind: Whether to select by start date or by overlap.
    ///   - lowerBound: The inclusive start of the window.
    ///   - upperBound: The inclusive end of the window.
    ///   - types: The types to keep, or `nil` for all.
    ///   - sortOrder: The result order.
    ///   - limit: The maximum result count, or `nil` for all.
    /// - Complexity: O(1)
    public init(
        _ kind: Kind, from lowerBound: Date, to upperBound: Date,
        types: Set<ActivityType>? = nil, sortOrder: ActivitySortOrder = .oldestFirst,
        limit: Int? = nil
    ) {
        self.kind = kind
        self.lowerBound = lowerBound
        self.upperBound = upperBound
        self.types = types
        self.sortOrder = sortOrder
        self.limit = limit
    }

    /// Checks that the window query is well formed.
    ///
    /// - Throws: `ActivityQueryError` if the window ends before it starts or
    ///   the limit is negative.
    /// - Complexity: O(1)
    public func validate() throws(ActivityQueryError) {
        if lowerBound.timeIntervalSinceReferenceDate.isNaN || upperBound.timeIntervalSinceReferenceDate.isNaN {
            throw ActivityQueryError("interval bounds must not be NaN")
        }
        if upperBound < lowerBound {
            throw ActivityQueryError(
                "interval end must not be before its start (start: \(lowerBound), end: \(upperBound))"
            )
        }
        if let limit, limit < 0 {
            throw ActivityQueryError("limit must not be negative (limit: \(limit))")
        }
    }

    /// Whether an activity passes the window and type filter.
    ///
    /// - Parameter model: The activity to test.
    /// - Returns: `true` if the activity would be among the candidates.
    /// - Complexity: O(1) on average.
    public func matches(_ model: ActivityModel) -> Bool {
        if let types, !types.contains(model.type) { return false }
        switch kind {
        case .startingIn:
            return model.startDate >= lowerBound && model.startDate <= upperBound
        case .overlapping:
            guard model.startDate <= upperBound else { return false }
            guard let end = model.endDate else { return true }
            return end >= lowerBound
        }
    }
}
