@testable import EventLog
import EventKernelTestSupport
import Testing

@Suite("Gathering atomic appends into batches")
struct BatchGatheringTests {
    /// Ranges are contiguous from the first start, begin and end only at append boundaries,
    /// hold at most the maximum unless one append alone is larger, and are greedy: the next
    /// append would have taken a range past the maximum.
    @Test func rangesNeverCutAnAppendAndAreGreedy() {
        var random = SplitMix64(seed: 0xB47C)
        for trial in 0..<2_000 {
            let maximum = Int(random.next() % 9) + 1
            let first = LogPosition(random.next() % 3)
            var boundaries: [LogPosition] = [first]
            for _ in 0..<Int(random.next() % 40) { boundaries.append(boundaries.last! + 1 + random.next() % 12) }
            var gathering = BatchGathering(from: first, atMost: maximum)
            for boundary in boundaries.dropFirst() { gathering.add(endingAt: boundary) }
            let ranges = gathering.finished()
            let all = Set(boundaries)
            #expect(ranges.first?.lowerBound ?? first == first, "trial \(trial)")
            #expect(ranges.last?.upperBound ?? first == boundaries.last!, "trial \(trial)")
            for (range, next) in zip(ranges, ranges.dropFirst()) { #expect(range.upperBound == next.lowerBound, "trial \(trial)") }
            for (index, range) in ranges.enumerated() {
                #expect(all.contains(range.lowerBound) && all.contains(range.upperBound), "trial \(trial): \(range) cuts an append")
                let appendsInside = boundaries.filter { $0 > range.lowerBound && $0 <= range.upperBound }.count
                #expect(range.count <= maximum || appendsInside == 1, "trial \(trial): \(range) over \(maximum)")
                if index + 1 < ranges.count, let nextEnd = boundaries.first(where: { $0 > range.upperBound }) {
                    #expect(nextEnd - range.lowerBound > LogPosition(maximum), "trial \(trial): \(range) could have taken the next append")
                }
            }
        }
    }
}
