import KernelPrimitives
import Synchronization
import Testing

@Suite("Arrays built in place")
struct ArrayInPlaceTests {
    /// Counts the instances alive, so that a test sees what a failed build left behind.
    final class Tracked: Sendable {
        static let alive = Atomic<Int>(0)
        let value: Int
        init(_ value: Int) {
            self.value = value
            Self.alive.add(1, ordering: .relaxed)
        }
        deinit { Self.alive.subtract(1, ordering: .relaxed) }
    }

    struct Stop: Error {}

    @Test("a count of 0 gives [] without calling the initialiser (the empty storage is never written)")
    func zeroNeverCallsTheInitializer() {
        var called = false
        let empty = [Int](initializingInPlace: 0) { _, _ in called = true }
        #expect(empty.isEmpty && !called)
    }

    @Test("every element is written in order, and the array holds exactly the count")
    func elementsInOrder() {
        for count in [1, 2, 17, 4_096] {
            let array = [Int](initializingInPlace: count) { buffer, initialized in
                for i in 0..<count {
                    (buffer.baseAddress! + i).initialize(to: i * 3)
                    initialized = i + 1
                }
            }
            #expect(array == (0..<count).map { $0 * 3 })
        }
    }

    @Test("an initialiser that throws midway: the error reaches the caller and what it wrote is released")
    func aThrowReleasesWhatWasWritten() {
        let before = Tracked.alive.load(ordering: .relaxed)
        #expect(throws: Stop.self) {
            _ = try [Tracked](initializingInPlace: 8) { buffer, initialized in
                for i in 0..<3 {
                    (buffer.baseAddress! + i).initialize(to: Tracked(i))
                    initialized = i + 1
                }
                throw Stop()
            }
        }
        #expect(Tracked.alive.load(ordering: .relaxed) == before)
    }

    @Test("threads building empty and full arrays at once (run under ThreadSanitizer by make test)")
    func concurrentEmptyAndFullArrays() async {
        await withTaskGroup(of: Bool.self) { group in
            for task in 0..<4 {
                group.addTask {
                    var ok = true
                    for round in 0..<2_000 {
                        let count = (round + task) % 2 == 0 ? 0 : round % 7 + 1
                        let array = [Int](initializingInPlace: count) { buffer, initialized in
                            for i in 0..<count { (buffer.baseAddress! + i).initialize(to: i) }
                            initialized = count
                        }
                        ok = ok && array == Array(0..<count)
                    }
                    return ok
                }
            }
            for await ok in group { #expect(ok) }
        }
    }
}
