@testable import EventKernel
import EventKernelTestSupport
import EventLog
import Foundation
import Testing

/// Which logs a store treats as appended to from elsewhere (`EventStore.sharedLog`, the one
/// rule every shared-log path asks).
@Suite struct SharedLogRuleTests {
    /// A segmented log the store writes is not (catching up from its bounds could fold a batch
    /// of its own before that batch's completion does); the same log opened read-only beside
    /// its writer is, and so is a log instances share.
    @Test func onlyALogOthersAppendToIsFollowed() async throws {
        let dir = TemporaryDirectory("ek-shared-rule")
        let writer = try EventStore(log: SegmentedLog.open(at: dir.url), directory: dir.url)
        #expect(writer.sharedLog == nil)
        let reader = try EventStore(log: SegmentedLog.openReadOnly(at: dir.url), directory: nil)
        #expect(reader.sharedLog != nil)
        let instance = try EventStore(log: SharedMemoryLog(SharedMemoryServer()), directory: nil)
        #expect(instance.sharedLog != nil)
        try await reader.close()
        try await instance.close()
        try await writer.close()
    }
}
