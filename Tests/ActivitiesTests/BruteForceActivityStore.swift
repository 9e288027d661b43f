import Activities
import Foundation
import EventKernelTestSupport

/// The obviously correct reference the index is checked against: an array,
/// filtered and sorted from scratch on every query.
struct BruteForceActivityStore {
    var items: [ActivityModel] = []

    struct Invalid: Error {}

    /// The reference order: start date, then the id's bytes compared
    /// lexicographically (deliberately not sharing code with the index).
    static func precedes(_ a: ActivityModel, _ b: ActivityModel) -> Bool {
        precedes(a.startDate, a.id, b.startDate, b.id)
    }

    static func precedes(_ sa: Date, _ ia: UUID, _ sb: Date, _ ib: UUID) -> Bool {
        if sa != sb { return sa < sb }
        let ba = withUnsafeBytes(of: ia.uuid) { Array($0) }
        let bb = withUnsafeBytes(of: ib.uuid) { Array($0) }
        return ba.lexicographicallyPrecedes(bb)
    }

    func sorted(_ models: [ActivityModel], _ order: ActivitySortOrder) -> [ActivityModel] {
        let ascending = models.sorted(by: Self.precedes)
        return order == .oldestFirst ? ascending : ascending.reversed()
    }

    mutating func insert(_ m: ActivityModel) -> Bool {
        if items.contains(where: { $0.id == m.id }) { return false }
        if let e = m.endDate, e < m.startDate { return false }
        items.append(m)
        return true
    }

    mutating func update(_ m: ActivityModel) -> Bool {
        guard let i = items.firstIndex(where: { $0.id == m.id }) else { return false }
        if let e = m.endDate, e < m.startDate { return false }
        items[i] = m
        return true
    }

    mutating func end(_ id: UUID, _ date: Date) -> Bool {
        guard let i = items.firstIndex(where: { $0.id == id }), date >= items[i].startDate else { return false }
        items[i].endDate = date
        return true
    }

    mutating func remove(_ id: UUID) -> ActivityModel? {
        guard let i = items.firstIndex(where: { $0.id == id }) else { return nil }
        return items.remove(at: i)
    }

    func fetch(_ q: ActivityQuery) throws -> [ActivityModel] {
        if let l = q.limit, l < 0 { throw Invalid() }
        if q.offset < 0 { throw Invalid() }
        if let a = q.afterDate, let b = q.beforeDate, a > b { throw Invalid() }
        var r = items.filter { m in
            (q.afterDate.map { m.startDate > $0 } ?? true)
                && (q.beforeDate.map { m.startDate < $0 } ?? true)
                && (q.types.map { $0.contains(m.type) } ?? true)
        }
        r = sorted(r, q.sortOrder)
        if let c = q.cursor {
            r = r.filter { m in
                q.sortOrder == .oldestFirst
                    ? Self.precedes(c.startDate, c.id, m.startDate, m.id)
                    : Self.precedes(m.startDate, m.id, c.startDate, c.id)
            }
        }
        r = Array(r.dropFirst(q.offset))
        if let l = q.limit, l != 0 { r = Array(r.prefix(l)) }  // 0: no limit
        return r
    }

    func fetch(startingIn lower: Date, _ upper: Date, types: Set<ActivityType>?, order: ActivitySortOrder, limit: Int?) -> [ActivityModel] {
        let r = items.filter { $0.startDate >= lower && $0.startDate <= upper && (types?.contains($0.type) ?? true) }
        return Array(sorted(r, order).prefix(limit == 0 ? .max : limit ?? .max))
    }

    func fetch(overlapping lower: Date, _ upper: Date, types: Set<ActivityType>?, order: ActivitySortOrder, limit: Int?) -> [ActivityModel] {
        let r = items.filter {
            $0.startDate <= upper && ($0.endDate.map { $0 >= lower } ?? true) && (types?.contains($0.type) ?? true)
        }
        return Array(sorted(r, order).prefix(limit == 0 ? .max : limit ?? .max))
    }
}
