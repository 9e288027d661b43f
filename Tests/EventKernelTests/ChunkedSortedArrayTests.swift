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
}
