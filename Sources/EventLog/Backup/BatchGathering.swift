/// Gathers consecutive atomic appends into ranges of at most a given number of records, for a
/// copy or a restore that writes a log elsewhere in batches it must never cut inside an append:
/// the one rule both logs' `batches(endingAtOrBefore:atMost:)` follow.
package struct BatchGathering: Sendable {
    /// The most records a range gathers from several appends (one append may hold more).
    package let maximum: LogPosition
    /// The ranges gathered so far, contiguous.
    package private(set) var ranges: [Range<LogPosition>] = []
    /// Where the range being gathered begins, and the last boundary seen (`start == previous`:
    /// nothing gathered yet).
    private var start: LogPosition
    private var previous: LogPosition

    /// Starts at `first`, the first append's start.
    package init(from first: LogPosition = 0, atMost maximum: Int) {
        precondition(maximum > 0)
        self.maximum = LogPosition(maximum)
        start = first
        previous = first
    }

    /// Adds the append that ends at `boundary` (it begins at the previous boundary).
    package mutating func add(endingAt boundary: LogPosition) {
        precondition(boundary > previous, "boundaries must increase")
        if previous > start, boundary - start > maximum {
            ranges.append(start..<previous)
            start = previous
        }
        previous = boundary
    }

    /// The ranges, the one being gathered included.
    package func finished() -> [Range<LogPosition>] {
        previous > start ? ranges + [start..<previous] : ranges
    }
}
