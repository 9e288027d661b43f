import Activities
import Foundation
import Hummingbird

/// `GET /activities` and the live feed's query string, as an `ActivityQuery`:
///
/// | parameter | meaning |
/// | --- | --- |
/// | `after`, `before` | RFC 3339 dates, exclusive bounds on the start date |
/// | `types` | comma-separated types (repeatable); `types=` (empty) matches nothing |
/// | `limit` | at most this many (0 or absent: all) |
/// | `offset` | skip this many |
/// | `order` | `newest` (default) or `oldest` |
/// | `cursor` | the `nextCursor` of the previous page: continue strictly after it |
///
/// Malformed values are a 400 naming the parameter; the query's own rules (limit not
/// negative, after not later than before) are the repository's, so both backends refuse
/// the same queries with the same message.
enum ActivityQueryParameters {
    static func query(from request: Request) throws -> ActivityQuery {
        let parameters = request.uri.queryParameters
        var query = ActivityQuery()
        if let after = parameters["after"] { query.afterDate = try date(after, "after") }
        if let before = parameters["before"] { query.beforeDate = try date(before, "before") }
        let types = parameters[values: "types"]
        if !types.isEmpty {
            query.types = Set(types.flatMap { $0.split(separator: ",", omittingEmptySubsequences: true) }
                .map { ActivityType(rawValue: String($0)) })
        }
        if let limit = parameters["limit"] { query.limit = try integer(limit, "limit") }
        if let offset = parameters["offset"] { query.offset = try integer(offset, "offset") }
        if let order = parameters["order"] {
            switch order {
            case "newest": query.sortOrder = .newestFirst
            case "oldest": query.sortOrder = .oldestFirst
            default: throw APIError.badRequest("order must be newest or oldest, not \"\(order)\"")
            }
        }
        if let cursor = parameters["cursor"] { query.cursor = try Cursor.decode(cursor) }
        return query
    }

    private static func date(_ text: Substring, _ name: String) throws -> Date {
        guard let date = InternetDate.parse(text) else {
            throw APIError.badRequest("\(name) must be an RFC 3339 date such as 2025-03-01T07:30:00Z, not \"\(text)\"")
        }
        return date
    }

    private static func integer(_ text: Substring, _ name: String) throws -> Int {
        guard let value = Int(text) else { throw APIError.badRequest("\(name) must be an integer, not \"\(text)\"") }
        return value
    }
}

/// The opaque `nextCursor` of a page: the last activity's start date (its exact bits, so a
/// tie at the page boundary is never skipped or repeated) and id.
enum Cursor {
    static func encode(_ cursor: ActivityCursor) -> String {
        String(cursor.startDate.timeIntervalSinceReferenceDate.bitPattern, radix: 16) + "~" + cursor.id.uuidString
    }

    static func decode(_ text: Substring) throws -> ActivityCursor {
        let parts = text.split(separator: "~")
        guard parts.count == 2, let bits = UInt64(parts[0], radix: 16), let id = UUID(uuidString: String(parts[1])) else {
            throw APIError.badRequest("cursor \"\(text)\" is not a nextCursor this service returned")
        }
        return ActivityCursor(startDate: Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits)), id: id)
    }

    /// The cursor after `page` when it may not be the last one (it is full).
    static func next(after page: [ActivityModel], of query: ActivityQuery) -> String? {
        guard let limit = query.effectiveLimit, page.count == limit, let last = page.last else { return nil }
        return encode(ActivityCursor(after: last))
    }
}
