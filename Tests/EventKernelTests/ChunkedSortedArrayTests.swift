@_spi(Indexing) @testable import EventKernel
import EventKernelTestSupport
import Testing

/// The ordered structure under every index, against a sorted array: random inserts (at the
/// front, the middle and the end, so that chunks split in every way), removals (so that they
/// merge), positions, distances and scans in both directions.
@Suite struct ChunkedSortedArrayTests {
    /// 256 bytes, so that chunks hold 64 entries and split often.
    struct Wide: Sendable {
        var key: Int
        var payload: (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int,
                      Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int) = (
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    }

    @Test func chunksAreBoundedInBytes() {
        #expect(ChunkedSortedArray<Wide>.maxChunk == 64)
        #expect(ChunkedSortedArray<Int>.maxChunk == 1024)
    }

    @Test func randomInsertsAndRemovalsMatchASortedArray() {
        var rng = SplitMix64(seed: 7)
        for round in 0..<40 {
            var array = ChunkedSortedArray<Wide>()
            var model: [Int] = []
            for step in 0..<1_500 {
                let r = rng.next()
                if r % 5 == 0, !model.isEmpty {
                    let key = model[Int(rng.next() % UInt64(model.count))]
                    let p = array.partitionPoint { $0.key < key }
                    array.remove(at: p)
                    model.remove(at: model.firstIndex(of: key)!)
                } else {
                    // Mostly ascending keys in some rounds (appends at the end), random in others.
                    let key = round % 2 == 0 ? step * 10 + Int(r % 7) : Int(r % 100_000)
                    array.insert(Wide(key: key), at: array.partitionPoint { $0.key <= key })
                    model.insert(key, at: model.firstIndex { $0 > key } ?? model.count)
                }
            }
            array.checkInvariants(areInIncreasingOrder: { $0.key < $1.key })
            #expect(array.count == model.count)
            #expect(array.chunkSizes.allSatisfy { $0 > 0 && $0 <= ChunkedSortedArray<Wide>.maxChunk })
            var forward: [Int] = []
            array.scan(from: array.startPosition, to: array.endPosition, reversed: false) { forward.append($0.key); return true }
            #expect(forward == model)
            var backward: [Int] = []
            array.scan(from: array.startPosition, to: array.endPosition, reversed: true) { backward.append($0.key); return true }
            #expect(backward == model.reversed())
            let skip = model.count / 3
            let p = array.position(skip, from: array.startPosition, to: array.endPosition, reversed: false)
            #expect(array.distance(from: array.startPosition, to: p) == skip)
            if skip < model.count { #expect(array[p].key == model[skip]) }
        }
    }

    @Test func emptyAndSingleElement() {
        var array = ChunkedSortedArray<Int>()
        #expect(array.isEmpty && array.partitionPoint { $0 < 5 } == array.endPosition)
        #expect(array.distance(from: array.startPosition, to: array.endPosition) == 0)
        var visited = 0
        array.scan(from: array.startPosition, to: array.endPosition, reversed: true) { _ in visited += 1; return true }
        #expect(visited == 0)
        array.insert(5, at: array.partitionPoint { $0 < 5 })
        array.checkInvariants(areInIncreasingOrder: <)
        #expect(array.count == 1 && array[array.startPosition] == 5 && array.chunkSizes == [1])
        #expect(array.partitionPoint { $0 < 6 } == array.endPosition)
        array.remove(at: array.partitionPoint { $0 < 5 })
        array.checkInvariants(areInIncreasingOrder: <)
        #expect(array.isEmpty && array.chunkSizes == [] && array.startPosition == array.endPosition)
        var builder = ChunkedSortedArray<Int>.Builder()
        let built = builder.finish()
        built.checkInvariants(areInIncreasingOrder: <)
        #expect(built.isEmpty)
    }

    /// Arrays built in bulk (the builder, `appendSorted`) hold full chunks; removals then merge
    /// underfull chunks into their successors, and inserts split full ones, keeping the order
    /// across every chunk boundary.
    @Test func bulkBuildsThenRemovalsAndInsertsKeepTheLayout() {
        var rng = SplitMix64(seed: 8)
        let n = 64 * 40 + 17
        var builder = ChunkedSortedArray<Wide>.Builder()
        var appended = ChunkedSortedArray<Wide>()
        for key in 0..<n {
            builder.append(Wide(key: key * 2))
            appended.appendSorted(Wide(key: key * 2))
        }
        var built = builder.finish()
        let inOrder: (Wide, Wide) -> Bool = { $0.key < $1.key }
        for array in [built, appended] {
            array.checkInvariants(areInIncreasingOrder: inOrder)
            #expect(array.count == n)
            #expect(array.chunkSizes.dropLast().allSatisfy { $0 == 64 } && array.chunkSizes.last == 17)
        }
        var model = (0..<n).map { $0 * 2 }
        for step in 0..<4_000 {
            if step % 3 == 0 {
                let key = Int(rng.next() % UInt64(2 * n)) | 1
                built.insert(Wide(key: key), at: built.partitionPoint { $0.key <= key })
                model.insert(key, at: model.firstIndex { $0 > key } ?? model.count)
            } else if !model.isEmpty {
                let key = model[Int(rng.next() % UInt64(model.count))]
                built.remove(at: built.partitionPoint { $0.key < key })
                model.remove(at: model.firstIndex(of: key)!)
            }
            if step % 500 == 0 { built.checkInvariants(areInIncreasingOrder: inOrder) }
        }
        built.checkInvariants(areInIncreasingOrder: inOrder)
        var keys: [Int] = []
        built.scan(from: built.startPosition, to: built.endPosition, reversed: false) { keys.append($0.key); return true }
        #expect(keys == model)
    }

    /// An underfull chunk merges into its successor only when the two fit in one chunk.
    @Test func underfullChunksMergeOnlyWhenTheResultFits() {
        var builder = ChunkedSortedArray<Wide>.Builder()
        for key in 0..<(3 * 64) { builder.append(Wide(key: key)) }
        var array = builder.finish()
        #expect(array.chunkSizes == [64, 64, 64])
        func remove(_ key: Int) { array.remove(at: array.partitionPoint { $0.key < key }) }
        for key in 0..<60 { remove(key) }
        array.checkInvariants(areInIncreasingOrder: { $0.key < $1.key })
        #expect(array.chunkSizes == [4, 64, 64], "4 + 64 entries do not fit in one chunk")
        for key in 64..<68 { remove(key) }
        #expect(array.chunkSizes == [4, 60, 64])
        remove(60)
        array.checkInvariants(areInIncreasingOrder: { $0.key < $1.key })
        #expect(array.chunkSizes == [63, 64], "3 + 60 entries do")
        #expect(array[array.startPosition].key == 61)
    }

    #if EVENTKERNEL_INTERNAL_CHECKS
    /// The checks themselves see a broken array: elements out of order across a chunk
    /// boundary, a stale summary entry, an empty chunk, a wrong count.
    @Test func invariantChecksSeeABrokenArray() {
        var array = ChunkedSortedArray<Wide>()
        for key in 0..<200 { array.appendSorted(Wide(key: key)) }
        let inOrder: (Wide, Wide) -> Bool = { $0.key < $1.key }
        #expect(array.invariantViolations(areInIncreasingOrder: inOrder).isEmpty)

        var unordered = array
        unordered.chunks[1][0].key = -5
        #expect(unordered.invariantViolations(areInIncreasingOrder: inOrder).contains { $0.contains("across a chunk boundary") })
        #expect(unordered.invariantViolations(areInIncreasingOrder: inOrder).contains { $0.contains("the summary entry of chunk 1") } == false)

        var stale = array
        stale.lastEntries[0] = Wide(key: -1)
        #expect(stale.invariantViolations(areInIncreasingOrder: inOrder).contains { $0.contains("summary entry of chunk 0") })

        var emptied = array
        emptied.chunks[2] = []
        #expect(emptied.invariantViolations().contains { $0.contains("chunk 2 of 4 is empty") })

        var miscounted = array
        miscounted.storedCount += 1
        #expect(miscounted.invariantViolations().contains { $0.contains("count is 201") })
    }
    #endif
}
