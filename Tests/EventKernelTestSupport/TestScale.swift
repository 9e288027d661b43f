import Foundation

/// How big heavy tests should be: `EVENTKERNEL_TEST_SCALE=small` (set by scripts/sanitizers.sh)
/// shrinks them for sanitizer runs, which are 5–20x slower.
public enum TestScale: Sendable {
    case normal, small
    /// Whether a small run was asked for.
    public var isSmall: Bool { self == .small }
    /// `full` normally, `small` under `EVENTKERNEL_TEST_SCALE=small`.
    public func pick<T>(_ full: T, small: T) -> T { isSmall ? small : full }
}

/// The scale of this run.
public let testScale: TestScale = ProcessInfo.processInfo.environment["EVENTKERNEL_TEST_SCALE"] == "small" ? .small : .normal

/// An integer from the environment (trial counts, seeds), or `defaultValue`.
public func environmentInt(_ name: String, default defaultValue: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap { Int($0) } ?? defaultValue
}

/// The CPU time the process has used so far, all threads together.
public func processCPUTime() -> Duration {
    var spec = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &spec)
    return .seconds(spec.tv_sec) + .nanoseconds(spec.tv_nsec)
}
