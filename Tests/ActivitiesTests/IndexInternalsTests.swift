@testable import Activities
@_spi(Indexing) import EventKernel
import ActivityWorkload
import Foundation
import Testing
import EventKernelTestSupport

@Suite struct IndexInternalsTests {
    /// Sequential, low-entropy ids stress the id hash table's probing and
    /// backward-shift deletion.
    @Test func idLookupWithStructuredIds() throws {
        func id(_ n: Int) -> UUID {
            var u: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &u) { $0.storeBytes(of: UInt32(n).bigEndian, toByteOffset: 12, as: UInt32.self) }
            return UUID(uuid: u)
        }
        var index = ActivityIndex()
        for n in 0..<5000 { try index.insert(ActivityModel(id: id(n), startDate: date(Double(n % 97)), type: .sleep)) }
        for n in stride(from: 0, to: 5000, by: 2) { #expect(index.remove(id: id(n))?.id == id(n)) }
        for n in 0..<5000 { #expect((index[id: id(n)] != nil) == (n % 2 == 1), "id \(n)") }
        for n in stride(from: 0, to: 5000, by: 2) { try index.insert(ActivityModel(id: id(n), startDate: date(1), type: "x")) }
        #expect(index.count == 5000)
        for n in 0..<5000 { #expect(index[id: id(n)]?.id == id(n)) }
        // Bulk loading the same ids (via a snapshot) finds them all too.
        var bytes: [UInt8] = []
        index.serialize(into: &bytes)
        let loaded = try ActivityIndex(deserializing: bytes)
        for n in 0..<5000 { #expect(loaded[id: id(n)]?.id == id(n)) }
    }

    @Test func snapshotWithDuplicateIdThrowsEvenWithValidChecksum() throws {
        var index = ActivityIndex()
        let a = ActivityModel(id: uuid(1), startDate: date(0), endDate: date(1), type: .sleep)
        let b = ActivityModel(id: uuid(2), startDate: date(5), type: .sleep)
        try index.insert(a)
        try index.insert(b)
        var bytes: [UInt8] = []
        index.serialize(into: &bytes)
        // Locate the id column (16 bytes per row in format 2): header 8, type count 4, one type (4 + 5), count 8.
        let rows = 8 + 4 + 4 + 5 + 8
        #expect(Array(bytes[rows..<rows + 16]) == withUnsafeBytes(of: a.id.uuid) { Array($0) })
        bytes.replaceSubrange(rows + 16..<rows + 32, with: bytes[rows..<rows + 16])
        let checksum = bytes.withUnsafeBytes { ActivityIndex.checksum(UnsafeRawBufferPointer(rebasing: $0[..<(bytes.count - 8)])) }
        withUnsafeBytes(of: checksum.littleEndian) { bytes.replaceSubrange(bytes.count - 8..<bytes.count, with: $0) }
        let error = #expect(throws: ActivityIndexError.self) { try ActivityIndex(deserializing: bytes) }
        #expect(error?.description.contains("duplicate") == true)
        // And an unknown version is rejected before anything else.
        bytes[4] = 99
        #expect(throws: ActivityIndexError.corruptSnapshot("unsupported version 99")) { try ActivityIndex(deserializing: bytes) }
    }

    @Test func nonFiniteDatesAreRejected() throws {
        var index = ActivityIndex()
        let bad = ActivityModel(id: uuid(1), startDate: Date(timeIntervalSinceReferenceDate: .nan), type: .sleep)
        #expect(throws: ActivityIndexError.nonFiniteDate(id: bad.id)) { try index.insert(bad) }
        let good = ActivityModel(id: uuid(2), startDate: date(0), type: .sleep)
        try index.insert(good)
        #expect(throws: ActivityIndexError.nonFiniteDate(id: good.id)) {
            try index.end(id: good.id, at: Date(timeIntervalSinceReferenceDate: .infinity))
        }
        #expect(index.count == 1 && index[id: good.id] == good)
    }

    @Test func chronologicalAppendsPackChunksDensely() throws {
        var index = ActivityIndex()
        for op in ActivityHistoryGenerator(seed: 3, activityCount: 20_000) {
            if case .add(let m) = op { try index.insert(m) }
        }
        let chunks = index.byStart.chunkSizes
        #expect(chunks.count <= index.count / SortedSlotIndex.maxChunk + 2)
        #expect(chunks.allSatisfy { $0 > 0 && $0 <= SortedSlotIndex.maxChunk })
    }

    @Test func overlapScanBoundShrinksWhenOutlierIsRemoved() throws {
        var index = ActivityIndex()
        let short = ActivityModel(id: uuid(1), startDate: date(0), endDate: date(30), type: .sleep)
        let outlier = ActivityModel(id: uuid(2), startDate: date(0), endDate: date(60 * 24 * 30), type: .sleep)
        try index.insert(short)
        try index.insert(outlier)
        #expect(index.maxEndedDurationBound >= 30 * 86_400)
        var corrected = outlier
        corrected.endDate = date(45)
        try index.update(corrected)
        #expect(index.maxEndedDurationBound >= 45 * 60 && index.maxEndedDurationBound <= 2 * 45 * 60)
        index.remove(id: corrected.id)
        #expect(index.maxEndedDurationBound >= 30 * 60 && index.maxEndedDurationBound <= 2 * 30 * 60)
        #expect(try index.fetch(overlappingFrom: date(30), to: date(40)) == [short])
        for d in [0.5, 1, 1.5, 2, 1023, 1024, 1025, 86_400, 1e15] {
            let k = ActivityIndex.durationBucket(d)
            #expect(Double(sign: .plus, exponent: k, significand: 1) >= d && (k == 0 || Double(sign: .plus, exponent: k - 1, significand: 1) < d), "\(d)")
        }
    }
}
