public import Foundation

/// Something that happened to an activity: the events of the Activities domain.
///
/// Every mutation of an ``EventSourcedActivityRepository`` appends one of these; the current
/// state, the state at any past moment and an activity's history are all folded from them.
public enum ActivityEvent: Hashable, Sendable {
    /// A new activity was recorded.
    case added(ActivityModel)
    /// An activity's fields were replaced.
    case updated(ActivityModel)
    /// A running activity was given its end date.
    case ended(id: UUID, at: Date)
    /// An activity was removed.
    case deleted(id: UUID)

    /// The activity the event is about.
    public var activityID: UUID {
        switch self {
        case .added(let model), .updated(let model): model.id
        case .ended(let id, _), .deleted(let id): id
        }
    }
}
