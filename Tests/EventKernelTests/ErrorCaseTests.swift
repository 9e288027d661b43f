import Foundation
import Testing
import EventLog
import EventKernel
import EventKernelTestSupport

/// Each failure path reports the case that says whose fault it is (misuse, a limit, data this
/// code cannot read), with its code, not a `validationFailed` string.
@Suite struct ErrorCaseTests {
    private struct Note: Identifiable, Codable, Sendable, Equatable {
        var id: String
        var text: String
    }

    /// The `Misuse` code of `error`, or `nil` when it is another error.
    private static func misuseCode(_ error: (any Error)?) -> Misuse.Code? {
        guard case .misuse(let misuse)? = error as? RepositoryError else { return nil }
        return misuse.code
    }

    private static func counter() -> ProjectedState<Int> {
        ProjectedState(name: "counter", schemaVersion: 1, initial: 0,
                       encode: { _ in [] }, decode: { _ in 0 }, reducer: { count, _ in count += 1 })
    }

    @Test func aProjectionNameTakenIsMisuse() throws {
        let store = try EventStore(log: InMemoryLog(), projections: [Self.counter()])
        let error = #expect(throws: RepositoryError.self) { try store.register(Self.counter()) }
        #expect(Self.misuseCode(error) == .projectionNameTaken)
        #expect(error?.description.contains("\"counter\"") == true)
        // Twice at open, too.
        let atOpen = #expect(throws: RepositoryError.self) {
            _ = try EventStore(log: InMemoryLog(), projections: [Self.counter(), Self.counter()])
        }
        #expect(Self.misuseCode(atOpen) == .projectionNameTaken)
        // A second repository of one entity type takes its projection's name.
        _ = try EventSourcedRepository<Note>(store: store, typeName: "Note")
        let repository = #expect(throws: RepositoryError.self) { _ = try EventSourcedRepository<Note>(store: store, typeName: "Note") }
        #expect(Self.misuseCode(repository) == .projectionNameTaken)
    }

    @Test func twoKeepersOfOneTypesVersionsIsMisuse() throws {
        func keeper(_ name: String) -> ProjectedState<Int> {
            ProjectedState(name: name, schemaVersion: 1, initial: 0, encode: { _ in [] }, decode: { _ in 0 },
                           prepare: { _ in 1 }, fold: { count, _, one in count += one },
                           versioning: .init(entityType: "Note", version: { _, _ in 0 }, forget: { _, _ in }))
        }
        let store = try EventStore(log: InMemoryLog(), projections: [keeper("a")])
        let error = #expect(throws: RepositoryError.self) { try store.register(keeper("b")) }
        #expect(Self.misuseCode(error) == .streamVersionsKeptTwice)
        #expect(error?.description.contains("\"b\"") == true)
    }

    @Test func snapshotsWithoutADirectoryIsMisuse() async throws {
        let store = try EventStore(log: InMemoryLog())
        let error = await #expect(throws: RepositoryError.self) { try await store.writeSnapshots() }
        #expect(Self.misuseCode(error) == .noSnapshotDirectory)
    }

    @Test func aStreamChangedTwiceInOneCommandIsMisuse() async throws {
        let store = try EventStore(log: InMemoryLog())
        let notes = try EventSourcedRepository<Note>(store: store, typeName: "Note")
        let error = await #expect(throws: RepositoryError.self) {
            try await store.execute { command in
                try notes.add(Note(id: "a", text: "1"), in: &command)
                try notes.save(Note(id: "a", text: "2"), in: &command)
            }
        }
        #expect(Self.misuseCode(error) == .streamChangedTwice)
        #expect(store.nextPosition == 0)
    }

    @Test func aBatchUpdateChangingAnIdIsMisuse() async throws {
        let store = try EventStore(log: InMemoryLog())
        let notes = try EventSourcedRepository<Note>(store: store, typeName: "Note")
        try await notes.add(Note(id: "a", text: "1"))
        let error = await #expect(throws: RepositoryError.self) {
            try await notes.updateAll(matching: EntityQuery()) { $0.id = "b" }
        }
        #expect(Self.misuseCode(error) == .idChanged)
        #expect(store.nextPosition == 1 && notes.fetch(id: "a")?.text == "1")
    }

    @Test func aDateALogTimestampCannotHoldExceedsALimit() async throws {
        let store = try EventStore(log: InMemoryLog())
        let codec = JSONEventCodec<Note>(eventType: "Noted", entityType: "Note", entityID: { .string($0.id) })
        let error = await #expect(throws: RepositoryError.self) {
            try await store.append([PendingEvent(Note(id: "a", text: ""), codec: codec, recordedAt: Date(timeIntervalSince1970: 1e12))])
        }
        guard case .limitExceeded(let limit)? = error else { Issue.record("not limitExceeded: \(String(describing: error))"); return }
        #expect(limit.code == .timestamp)
        #expect((limit.cause as? LogError)?.code == .invalidArgument)
        #expect(store.nextPosition == 0)
    }

    @Test func aStreamAtTheLargestVersionExceedsALimit() async throws {
        let stream = StreamID("Note", .string("a"))
        let largest: UInt64 = (1 << 48) - 1
        let record = EventEnvelope.encodeRecordPayload(
            eventType: "Noted", schemaVersion: 1, stream: stream, entityVersion: largest, metadata: .none, payload: [])
        let log = InMemoryLog(records: [LogEntry(timestamp: LogTimestamp(nanosecondsSince1970: 0), payload: record)])
        let store = try EventStore(log: log)
        #expect(try store.version(of: stream) == largest)
        let codec = JSONEventCodec<Note>(eventType: "Noted", entityType: "Note", entityID: { .string($0.id) })
        let error = await #expect(throws: RepositoryError.self) { try await store.append([PendingEvent(Note(id: "a", text: ""), codec: codec)]) }
        guard case .limitExceeded(let limit)? = error else { Issue.record("not limitExceeded: \(String(describing: error))"); return }
        #expect(limit.code == .streamVersion)
        #expect(store.nextPosition == 1)
    }

    @Test func anUnknownEventTypeIsUndecodableNotInvalid() async throws {
        let log = InMemoryLog()
        do {
            let store = try EventStore(log: log)
            let renamed = JSONEventCodec<Note>(eventType: "Note.renamed", entityType: "Note", entityID: { .string($0.id) })
            try await store.append([PendingEvent(Note(id: "a", text: "x"), codec: renamed)])
        }
        let store = try EventStore(log: log)
        let error = #expect(throws: RepositoryError.self) { _ = try EventSourcedRepository<Note>(store: store, typeName: "Note") }
        guard case .undecodableEvent(let failure)? = error else { Issue.record("not undecodableEvent: \(String(describing: error))"); return }
        #expect(failure.unknownEvent == .unknownEventType("Note.renamed", entityType: "Note"))
        #expect(failure.position == 0 && failure.stream == StreamID("Note", .string("a")))
    }

    @Test func aCodecRefusesTypesAndVersionsItDoesNotKnow() throws {
        let codec = JSONEventCodec<Note>(eventType: "Noted", schemaVersion: 2, entityType: "Note", entityID: { .string($0.id) })
        let payload = try codec.encode(Note(id: "a", text: "")).payload
        #expect(throws: EventDecodingError.unknownEventType("Other", entityType: "Note")) {
            _ = try codec.decode(eventType: "Other", schemaVersion: 2, payload: payload)
        }
        #expect(throws: EventDecodingError.unknownSchemaVersion(1, eventType: "Noted", current: 2)) {
            _ = try codec.decode(eventType: "Noted", schemaVersion: 1, payload: payload)
        }
        #expect(try codec.decode(eventType: "Noted", schemaVersion: 2, payload: payload) == Note(id: "a", text: ""))
    }
}
