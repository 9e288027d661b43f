import Activities
import EventKernel
@testable import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// Damage met above the log keeps its `LogError` (code, file, offset, position) as the cause,
/// whichever way the store is opened.
@Suite struct DamageReportTests {
    @Test func aDamagedSealedSegmentIsReportedWithItsLocation() async throws {
        let directory = TemporaryDirectory("ek-damage")
        var configuration = EventStore.Configuration()
        configuration.log.segmentSize = 8 << 10
        configuration.snapshots = .never
        let repository = try EventSourcedActivityRepository.open(at: directory.url, configuration: configuration)
        let models = (0..<400).map { model(Double($0)) }
        for chunk in stride(from: 0, to: models.count, by: 50) {
            try await repository.apply(models[chunk..<chunk + 50].map { .added($0) })
        }
        try await repository.close()
        let segments = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".log") }.sorted()
        try #require(segments.count > 1, "the first segment is sealed")
        // One byte in the middle of the first batch's payload of the sealed first segment.
        let first = directory.file(segments[0])
        var bytes = try Data(contentsOf: first)
        bytes[32 + 64 + 40] ^= 0x40
        try bytes.write(to: first)

        func isLocated(_ error: any Error) -> Bool {
            guard case .storage(let failure) = error as? RepositoryError, let log = failure.logError else { return false }
            return log.code == .corruption && log.file?.hasSuffix(segments[0]) == true && log.offset != nil
                && log.position == 0 && failure.cause is LogError && "\(error)".contains(segments[0])
        }
        #expect(performing: { _ = try EventSourcedActivityRepository.open(at: directory.url, configuration: configuration) },
                throws: isLocated)
        // A read-only follower reports it the same way.
        #expect(performing: { _ = try EventSourcedActivityRepository.openReadOnly(at: directory.url) }, throws: isLocated)
    }
}

/// The damage sweep's two writer cases (issue 25): the active segment's checkpoint deleted and
/// one bit flipped in the last batch's payload. The close's snapshot says that batch was
/// acknowledged, so the writer refuses, as the reader does, with the segment, offset and
/// position, and changes no file; it never cuts the batch as a torn write.
@Suite struct AcknowledgedTailTests {
    @Test func aWriterRefusesLikeTheReader() async throws {
        let directory = TemporaryDirectory("ek-ack-activities")
        let repository = try EventSourcedActivityRepository.open(at: directory.url)
        for i in 0..<20 { try await repository.add(model(Double(i))) }
        try await repository.close()   // writes the snapshots
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        for name in names where name.hasSuffix(".ckpt") { try FileManager.default.removeItem(at: directory.file(name)) }
        let segment = directory.file(try #require(names.filter { $0.hasSuffix(".log") }.sorted().last)).path
        let reader = try SegmentedLog.openReadOnly(at: directory.url)
        let last = try #require(reader.core.state.withLock { $0.segments.last?.batches.last })
        try flipBit(in: segment, at: last.offset + Int64(BatchHeader.size) + 3)
        func snapshotOfFiles() throws -> [String: Data] {
            var all: [String: Data] = [:]
            let walker = FileManager.default.enumerator(atPath: directory.path)!
            while let name = walker.nextObject() as? String {
                all[name] = (try? Data(contentsOf: directory.file(name))) ?? Data()
            }
            return all
        }
        let before = try snapshotOfFiles()
        func isLocated(_ error: any Error) -> Bool {
            guard let log = (error as? LogError) ?? (error as? RepositoryError)?.logError else { return false }
            return log.code == .corruption && log.file == segment && log.offset == last.offset && log.position == last.firstPosition
        }
        #expect(performing: { _ = try EventSourcedActivityRepository.openReadOnly(at: directory.url) }, throws: { error in
            guard let log = (error as? RepositoryError)?.logError else { return false }
            return log.code == .corruption
        })
        #expect(performing: { _ = try EventSourcedActivityRepository.open(at: directory.url) }, throws: isLocated)
        #expect(try snapshotOfFiles() == before, "the writer changed nothing")
    }
}
