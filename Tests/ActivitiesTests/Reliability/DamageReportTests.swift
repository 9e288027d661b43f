import Activities
import EventKernel
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// Damage met above the log keeps its `LogError` (code, file, offset, position) as the cause,
/// whichever way the store is opened.
@Suite struct DamageReportTests {
    @Test func aDamagedSealedSegmentIsReportedWithItsLocation() async throws {
        let directory = TemporaryDirectory("ek-damage")
        var configuration = EventSourcedActivityRepository.Configuration()
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
