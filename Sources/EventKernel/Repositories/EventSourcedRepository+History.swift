public import Foundation
public import EventLog

/// An entity's history, and the entities as they were at a log position or a date.
extension EventSourcedRepository {
    /// The events of one entity, oldest first. - Complexity: O(n) log scan.
    public func history(of id: Entity.ID) throws -> [EventEnvelope] {
        try store.history(of: stream(of: id))
    }

    /// The entities as they were after the event at `position`.
    /// - Complexity: O(events since the newest usable snapshot at or before `position`).
    public func entities(throughPosition position: LogPosition) throws -> [Entity] {
        let past = try store.state(of: { projection.makeFresh() }, throughPosition: position)
        return past.read { $0.entities }
    }

    /// The entities as they were at `date` (empty before the first event).
    public func entities(asOf date: Date) throws -> [Entity] {
        guard let position = try store.lastPosition(recordedAtOrBefore: date) else { return [] }
        return try entities(throughPosition: position)
    }
}
