public import Activities
public import Foundation

/// A small, fast, seeded pseudo-random generator (SplitMix64).
///
/// Deterministic across platforms and runs, unlike the system generator, so
/// a seed fully reproduces a workload.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    /// The generator's state; advancing it by a fixed odd constant visits
    /// every 64-bit value once.
    public private(set) var state: UInt64

    /// Creates a generator from a seed.
    ///
    /// - Parameter seed: Any value; equal seeds give equal sequences.
    public init(seed: UInt64) { self.state = seed }

    /// Returns the next 64 random bits.
    ///
    /// - Complexity: O(1)
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One change to an activity history, as an app would record it.
public enum ActivityOperation: Sendable, Equatable {
    /// A new activity (possibly still active, with a `nil` end date).
    case add(ActivityModel)
    /// A corrected activity, replacing the one with the same id.
    case update(ActivityModel)
    /// An active activity ends.
    case end(id: UUID, at: Date)
    /// An activity is deleted.
    case delete(id: UUID)
}

/// Generates a deterministic, realistic history of baby-care activities.
///
/// Each simulated day of each simulated child has a night sleep (8-11 h,
/// starting 19:00-22:00), 2-3 naps (30 min-2 h), 3-5 tummy-time sessions
/// (5-20 min), about 8 feedings (10-40 min), about 7 diaper changes
/// (2-5 min) and a bath every other day (10-30 min). To fit `activityCount`
/// activities into `span`, the generator simulates as many children in
/// parallel as needed, and thins out activities at random when even one
/// child would produce too many. Operations come in chronological order of
/// the activities' start dates (corrections, ends and deletes follow their
/// `add` some operations later):
/// - about 2% of activities are added active and ended by a later `.end`;
/// - about 3% are corrected by a later `.update` (end date or type);
/// - about 1% are deleted by a later `.delete`;
/// - the last few activities stay active.
///
/// The sequence is lazy: iterating 1M activities does not build an array.
public struct ActivityHistoryGenerator: Sequence, Sendable {
    /// The six activity types the generator uses.
    public static let allTypes: [ActivityType] = [
        .sleep, .tummyTime, "feeding", "diaper", "bath", "nap",
    ]

    /// A fixed reference date (2026-01-01T00:00:00Z), so default histories
    /// do not depend on the clock.
    public static let referenceEnd = Date(timeIntervalSince1970: 1_767_225_600)

    /// Two years, in seconds.
    public static let twoYears: TimeInterval = 2 * 365 * 86_400

    /// The seed of the random generator.
    public var seed: UInt64
    /// The number of activities to add (the result has slightly fewer when
    /// `span` cannot hold them; deletes remove about 1% again).
    public var activityCount: Int
    /// The start of the history.
    public var start: Date
    /// The length of the history in seconds.
    public var span: TimeInterval

    /// Creates a generator.
    ///
    /// - Parameters:
    ///   - seed: Equal seeds produce equal operations.
    ///   - activityCount: How many activities to add.
    ///   - start: The start of the history; two years before 2026-01-01 UTC
    ///     by default.
    ///   - span: The length of the history; two years by default.
    public init(
        seed: UInt64 = 42, activityCount: Int = 1_000_000,
        start: Date = ActivityHistoryGenerator.referenceEnd.addingTimeInterval(-ActivityHistoryGenerator.twoYears),
        span: TimeInterval = ActivityHistoryGenerator.twoYears
    ) {
        self.seed = seed
        self.activityCount = activityCount
        self.start = start
        self.span = span
    }

    /// Returns an iterator over the operations.
    ///
    /// - Complexity: O(1); each `next()` is O(1) amortized.
    public func makeIterator() -> Iterator { Iterator(self) }

    /// The expected number of activities one child produces per day.
    static let perChildPerDay = 1.0 + 2.5 + 4.0 + 8.0 + 7.0 + 0.5

    /// Produces the operations of an `ActivityHistoryGenerator` lazily.
    public struct Iterator: IteratorProtocol, Sendable {
        var rng: SeededRandom
        let config: ActivityHistoryGenerator
        let days: Int
        let children: Int
        let keepProbability: Double
        var day = 0
        var added = 0
        var opIndex = 0
        var today: [ActivityModel] = []
        var todayIndex = 0
        var pending: [(due: Int, op: ActivityOperation)] = []
        var finished = false

        init(_ config: ActivityHistoryGenerator) {
            self.config = config
            self.rng = SeededRandom(seed: config.seed)
            self.days = Swift.max(1, Int((config.span / 86_400).rounded(.up)))
            let perDay = Double(Swift.max(0, config.activityCount)) / Double(days)
            self.children = Swift.max(1, Int((perDay / ActivityHistoryGenerator.perChildPerDay).rounded(.up)))
            self.keepProbability = Swift.min(1, perDay / (Double(children) * ActivityHistoryGenerator.perChildPerDay))
        }

        /// Returns the next operation, or `nil` at the end of the history.
        ///
        /// - Complexity: O(1) amortized.
        public mutating func next() -> ActivityOperation? {
            opIndex += 1
            if let i = pending.firstIndex(where: { $0.due <= opIndex }) {
                return pending.remove(at: i).op
            }
            while todayIndex == today.count {
                guard !finished, added < config.activityCount, day < days else {
                    finished = true
                    if pending.isEmpty { return nil }
                    return pending.removeFirst().op
                }
                generateDay()
            }
            var model = today[todayIndex]
            todayIndex += 1
            added += 1
            let remaining = config.activityCount - added
            let isLast = remaining < 3 || (day >= days && todayIndex + 3 > today.count && added > 3)
            if isLast {
                model.endDate = nil
                return .add(model)
            }
            let fate = Double.random(in: 0..<1, using: &rng)
            let delay = Int.random(in: 1...40, using: &rng)
            if fate < 0.01 {
                pending.append((opIndex + delay, .delete(id: model.id)))
            } else if fate < 0.04 {
                var corrected = model
                if Bool.random(using: &rng) {
                    corrected.type = ActivityHistoryGenerator.allTypes.randomElement(using: &rng)!
                } else if let end = model.endDate {
                    corrected.endDate = Swift.max(model.startDate, end.addingTimeInterval(Double.random(in: -300...300, using: &rng)))
                }
                pending.append((opIndex + delay, .update(corrected)))
            } else if fate < 0.06, let end = model.endDate {
                model.endDate = nil
                pending.append((opIndex + delay, .end(id: model.id, at: end)))
            }
            return .add(model)
        }

        private mutating func uuid() -> UUID {
            var a = rng.next()
            var b = rng.next()
            // Mark as a version-4, RFC 4122 UUID, like UUID().
            a = (a & ~0xF000) | 0x4000
            b = (b & ~(0xC0 << 56)) | (0x80 << 56)
            let ab = a.bigEndian
            let bb = b.bigEndian
            var u: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &u) { raw in
                raw.storeBytes(of: ab, toByteOffset: 0, as: UInt64.self)
                raw.storeBytes(of: bb, toByteOffset: 8, as: UInt64.self)
            }
            return UUID(uuid: u)
        }

        private mutating func add(_ type: ActivityType, at hours: ClosedRange<Double>, minutes: ClosedRange<Double>, dayStart: Double) {
            guard Double.random(in: 0..<1, using: &rng) < keepProbability else { return }
            // Whole seconds, as an app's timestamps mostly are.
            let start = (dayStart + Double.random(in: hours, using: &rng) * 3600).rounded()
            let duration = (Double.random(in: minutes, using: &rng) * 60).rounded()
            today.append(ActivityModel(
                id: uuid(),
                startDate: Date(timeIntervalSinceReferenceDate: start),
                endDate: Date(timeIntervalSinceReferenceDate: start + duration),
                type: type))
        }

        private mutating func generateDay() {
            today.removeAll(keepingCapacity: true)
            todayIndex = 0
            let dayStart = config.start.timeIntervalSinceReferenceDate + Double(day) * 86_400
            day += 1
            for _ in 0..<children {
                add(.sleep, at: 19...22, minutes: 480...660, dayStart: dayStart)
                for _ in 0..<Int.random(in: 2...3, using: &rng) {
                    add("nap", at: 9...17, minutes: 30...120, dayStart: dayStart)
                }
                for _ in 0..<Int.random(in: 3...5, using: &rng) {
                    add(.tummyTime, at: 8...18, minutes: 5...20, dayStart: dayStart)
                }
                for _ in 0..<Int.random(in: 7...9, using: &rng) {
                    add("feeding", at: 0...23.5, minutes: 10...40, dayStart: dayStart)
                }
                for _ in 0..<Int.random(in: 6...8, using: &rng) {
                    add("diaper", at: 0...23.9, minutes: 2...5, dayStart: dayStart)
                }
                if Bool.random(using: &rng) {
                    add("bath", at: 17...19.5, minutes: 10...30, dayStart: dayStart)
                }
            }
            today.sort { $0.startDate < $1.startDate }
        }
    }
}
