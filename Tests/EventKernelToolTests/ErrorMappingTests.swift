import Foundation
import Testing
import EventLog
import EventKernel
@testable import EventKernelTool

/// The tool's exit status follows the library's error case: a misuse of the API is the tool's
/// bug (4), never "bad input" (1); a value beyond the log's limits is the input's fault (1).
@Suite struct ErrorMappingTests {
    @Test func casesMapToTheirExitStatuses() {
        let misuse = RepositoryError.misuse(Misuse(.noSnapshotDirectory, "the store was opened without a directory for snapshots"))
        #expect(ToolError.from(misuse).exit == .io)
        #expect(ToolError.from(misuse).message.contains("noSnapshotDirectory"))
        let limit = RepositoryError.limitExceeded(LimitExceeded(.timestamp, "recordedAt 3000-01-01"))
        #expect(ToolError.from(limit).exit == .badInput)
        #expect(ToolError.from(RepositoryError.validationFailed("end before start")).exit == .badInput)
        let unknown = UndecodableEvent(
            projection: "repository:Note",
            envelope: EventEnvelope(position: 7, recordedAt: Date(), eventType: "Note.renamed", schemaVersion: 1,
                                    stream: StreamID("Note", .string("a")), entityVersion: 1, payload: []),
            cause: EventDecodingError.unknownEventType("Note.renamed", entityType: "Note"))
        let damage = ToolError.from(RepositoryError.undecodableEvent(unknown))
        #expect(damage.exit == .damage)
        #expect(damage.message.contains("position 7") && damage.message.contains("unknown event type \"Note.renamed\""))
    }
}
