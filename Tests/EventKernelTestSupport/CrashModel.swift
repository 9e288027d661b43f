public import Activities
import Foundation

/// Activity `i` of the Activities crash tests: the helper process adds them in order and the
/// tests check the reopened store against them.
public func crashModel(_ i: Int) -> ActivityModel {
    let id = UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", i))!
    let start = Date(timeIntervalSince1970: 1_700_000_000 + Double(i) * 61.25)
    let end: Date? = i % 3 == 0 ? nil : start.addingTimeInterval(Double(i % 97) * 10.5)
    let types: [ActivityType] = [.sleep, "feeding", "bath", .tummyTime, ActivityType(rawValue: "custom-\(i % 11)")]
    return ActivityModel(id: id, startDate: start, endDate: end, type: types[i % types.count])
}
