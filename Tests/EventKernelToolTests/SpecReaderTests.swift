import Activities
import EventKernel
import EventLog
import EventKernelTestSupport
@testable import EventKernelTool
import Foundation
import Testing

// Keeps Docs/FileFormat.md honest: scripts/spec_reader.py, written from the spec alone (its own
// CRC32C and LZ4), decodes fixture stores built through the public API, and what it prints must
// be what `eventkernel export` prints and what the stores hold (issue 30 item 6).

/// A ledger entry holding every kind of value the binary entity format has a tag for.
struct SpecEntry: Identifiable, Codable, Sendable {
    struct Line: Codable, Sendable { var account: String; var amount: Decimal; var memo: String? }
    var id: UUID
    var booked: Date
    var amount: Decimal
    /// A significand beyond 64 bits: written as text (tag 0D).
    var exact: Decimal
    var counterparty: UUID?
    var receipt: Data?
    var lines: [Line]
    var tags: [String: Int]
    var rate: Float
    var fee: Double
    var count: UInt32
    var flagged: Bool
    var link: URL?
    var settled: Date?
}

/// A small entity with string ids, many of them: a snapshot with more than one part.
struct SpecTick: Identifiable, Codable, Sendable { var id: String; var n: Int }

let specSettled = FieldEvent<SpecEntry, Date?>("settled", sets: \.settled)
let specEntryIDs = (0..<4).map { UUID(uuidString: String(format: "30000000-0000-4000-8000-%012d", $0))! }
/// More than one snapshot part (4,096 entities a part).
let specTickCount = 4_100
/// An activity written in schema 1.
let specOldActivity = UUID(uuidString: "40000000-0000-4000-8000-000000000001")!

/// The memos' type name: long enough that its snapshot's file name spells only its first 56
/// bytes and a hash (Docs/FileFormat.md, "Snapshot file").
let specMemoType = "Memo" + String(repeating: "ö", count: 40)

/// A generic store: entries (binary codec, an index, a field event, an update, a delete), memos
/// (JSON codec), ticks (string ids, two snapshot parts), and an application's own event with
/// metadata and an explicit entity type; snapshots written at close.
func writeSpecLedger(_ directory: URL) async throws {
    let store = try EventStore.open(at: directory, snapshotPolicy: SnapshotPolicy(everyEvents: nil, onClose: true))
    let entries = try EventSourcedRepository<SpecEntry>(store: store, typeName: "Entry", schema: EntitySchema().recording(specSettled),
                                                         indexes: [.on(\SpecEntry.booked)])
    let memos = try EventSourcedRepository<SpecTick>(store: store, typeName: specMemoType, schema: EntitySchema(version: 2, codec: .json))
    let ticks = try EventSourcedRepository<SpecTick>(store: store, typeName: "Tick")
    var first = SpecEntry(
        id: specEntryIDs[0], booked: t0.addingTimeInterval(0.1), amount: Decimal(string: "12.50")!,
        exact: Decimal(string: "123456789012345678901234.5")!, counterparty: specEntryIDs[1], receipt: Data([0, 1, 2, 254, 255]),
        lines: [.init(account: "cash", amount: Decimal(string: "-12.5")!, memo: nil), .init(account: "fees", amount: 0, memo: "ü ✓ \"q\"\n")],
        tags: ["b": 2, "a": -1], rate: 0.1, fee: -0.0, count: 4_000_000_000, flagged: true, link: URL(string: "https://example.org/x?y=1"), settled: nil)
    let second = SpecEntry(
        id: specEntryIDs[1], booked: Date(timeIntervalSinceReferenceDate: -86_400.75), amount: Decimal(string: "0.0001")!,
        exact: 0, counterparty: nil, receipt: nil, lines: [], tags: [:], rate: 1.5e-7, fee: 1e300, count: 0, flagged: false, link: nil,
        settled: t0)
    try await entries.addAll([first, second])
    try await entries.apply(specSettled, t0.addingTimeInterval(3_600.5), to: first.id)
    first.amount = Decimal(string: "-7.25")!
    first.settled = t0.addingTimeInterval(3_600.5)
    first.lines.append(.init(account: "bank", amount: Decimal(string: "1e-5")!, memo: nil))
    try await entries.update(first)
    try await entries.add(SpecEntry(id: specEntryIDs[2], booked: t0, amount: 1, exact: 1, counterparty: nil, receipt: Data(), lines: [],
                                    tags: [:], rate: 0, fee: 0.5, count: 1, flagged: false, link: nil, settled: nil))
    _ = try await entries.delete(id: specEntryIDs[2])
    try await memos.add(SpecTick(id: "memo-1", n: 1))
    try await ticks.addAll((0..<specTickCount).map { SpecTick(id: "tick-\($0)", n: $0 * 7 - 100) })
    try await ticks.update(SpecTick(id: "tick-3", n: 33))
    _ = try await ticks.delete(id: "tick-4")
    // Two records of one batch, recorded at other times than now (the batch's timestamp deltas).
    let audit = StreamID("Audit", .string("a-1"))
    _ = try await store.append([
        PendingEvent(EncodedEvent(eventType: "audit.noted", schemaVersion: 4, stream: audit,
                                  payload: Array(#"{"note":"checked","n":[1,2.5,null]}"#.utf8)),
                     metadata: EventMetadata(correlationID: "corr-1", actor: "auditor"), recordedAt: t0.addingTimeInterval(1.5)),
        PendingEvent(EncodedEvent(eventType: "audit.noted", schemaVersion: 4, stream: audit, payload: Array(#"[]"#.utf8)),
                     metadata: EventMetadata(actor: "auditor"), recordedAt: t0),
    ])
    try await store.close()
}

/// Activities started, ended, updated and deleted, at whole and fractional seconds (before and
/// after 2001), one with metadata; snapshots written at close.
func writeSpecActivities(_ directory: URL) async throws {
    let repository = try EventSourcedActivityRepository.open(at: directory)
    func model(_ i: Int, _ start: Date, _ end: Date?, _ type: String) -> ActivityModel {
        ActivityModel(id: ids[i], startDate: start, endDate: end, type: ActivityType(rawValue: type))
    }
    try await repository.add(model(0, t0, t0.addingTimeInterval(3_600), "sleep"))
    try await repository.add(model(1, t0.addingTimeInterval(0.25), t0.addingTimeInterval(100.5), "feeding"))
    try await repository.add(model(2, t0.addingTimeInterval(7_200), nil, "Tummy time"))
    try await repository.end(id: ids[2], at: t0.addingTimeInterval(9_000))
    try await repository.add(model(3, Date(timeIntervalSinceReferenceDate: -86_400.5), nil, "sleep"))
    try await repository.update(model(3, Date(timeIntervalSinceReferenceDate: -86_400.5), Date(timeIntervalSinceReferenceDate: -3.25), "nap"))
    try await repository.add(model(4, t0, nil, "bath"))
    _ = try await repository.delete(id: ids[4])
    try await repository.apply([.added(model(5, t0.addingTimeInterval(-1), nil, "walk"))],
                               metadata: EventMetadata(correlationID: "c-5", actor: "parent"))
    try await repository.end(id: ids[5], at: t0.addingTimeInterval(12.125))
    // Schema 1, as an old build wrote it: flags, start and end as Doubles of seconds since 1970,
    // then the type; an end as the Double alone.
    func double(_ value: Double) -> [UInt8] { withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) } }
    let start = t0.addingTimeInterval(-3_600.5).timeIntervalSince1970
    let stream = ActivityEventCodec.stream(of: specOldActivity)
    _ = try await repository.store.append([
        PendingEvent(EncodedEvent(eventType: "activity.added", schemaVersion: 1, stream: stream,
                                  payload: [1] + double(start) + double(start + 60) + [3] + Array("old".utf8))),
        PendingEvent(EncodedEvent(eventType: "activity.ended", schemaVersion: 1, stream: stream, payload: double(start + 90))),
    ])
    try await repository.close()
}

/// The package's root, where scripts/ is.
private let packageRoot = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// Runs the spec reader on a store.
private func specReader(_ store: URL, _ options: String...) async throws -> ProcessOutput {
    let result = try await runProcess(URL(filePath: "/usr/bin/env"),
                                      arguments: ["python3", packageRoot.appending(path: "scripts/spec_reader.py").path, store.path] + options)
    // env's status for a program it cannot find: say so, rather than fail on every expectation.
    if result.status == 127 { Issue.record("python3 is not on PATH: SpecReaderTests run scripts/spec_reader.py with it (\(result.stderr))") }
    return result
}

/// Runs `eventkernel`.
private func tool(_ arguments: String...) async throws -> ProcessOutput {
    var environment = ProcessInfo.processInfo.environment
    environment.removeValue(forKey: "EVENTKERNEL_STORE")
    return try await runProcess(builtExecutable("eventkernel"), arguments: arguments, environment: environment)
}

/// JSON Lines as values.
private func jsonLines(_ text: String) throws -> [NSDictionary] {
    try text.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? NSDictionary) }
}

/// JSON text as a value.
private func jsonValue(_ text: String) throws -> NSObject {
    try #require(try JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed) as? NSObject)
}

/// The reader's events equal export's, value for value.
private func expectReaderMatchesExport(_ store: URL) async throws -> [NSDictionary] {
    let reader = try await specReader(store)
    let export = try await tool("export", store.path)
    #expect(reader.status == 0, "\(reader.stderr)")
    #expect(export.status == 0, "\(export.stderr)")
    // The index side files and checkpoint agree with the segments (FileFormat.md's layout).
    #expect(!reader.stderr.contains("fails its checks"), "\(reader.stderr)")
    let read = try jsonLines(reader.stdout), exported = try jsonLines(export.stdout)
    #expect(read.count == exported.count)
    for (mine, theirs) in zip(read, exported) where !mine.isEqual(theirs) {
        Issue.record("the spec reader and export differ at position \(theirs["position"] ?? "?"):\n  reader: \(mine)\n  export: \(theirs)")
    }
    // The comparison compares something: every event, decoded.
    #expect(!exported.isEmpty)
    return exported
}

/// The snapshots the reader decodes, by projection name.
private func readSnapshots(_ store: URL) async throws -> [String: NSDictionary] {
    let reader = try await specReader(store, "--snapshots")
    #expect(reader.status == 0, "\(reader.stderr)")
    var byName: [String: NSDictionary] = [:]
    for snapshot in try jsonLines(reader.stdout) {
        // The anchor is the record at next position - 1 (its timestamp and payload CRC32C).
        #expect(snapshot["anchorMatchesLog"] as? Bool == true, "\(snapshot["file"] ?? "?")")
        byName[try #require(snapshot["projection"] as? String)] = snapshot
    }
    return byName
}

/// The number of events of each stream (`type/id`), from export's lines: each stream's version.
private func streamVersions(_ lines: [NSDictionary]) -> [String: Int] {
    var versions: [String: Int] = [:]
    for line in lines {
        let key: String
        if let stream = line["stream"] as? NSDictionary {
            key = "\(stream["type"]!)/\(stream["id"]!)"
        } else {
            let id = (line["activity"] as? NSDictionary)?["id"] ?? line["id"]!
            key = "activity/\(id)"
        }
        versions[key, default: 0] += 1
    }
    return versions
}

@Suite struct SpecReaderTests {
    /// Tombstones (FileFormat.md, "Tombstone events") and the version table's purged section:
    /// the reader writes them as export does and decodes the section as the store holds it.
    @Test func theSpecReaderReadsTombstonesAndThePurgedSection() async throws {
        let temp = TemporaryDirectory("ek-spec-purge")
        let store = temp.file("purged")
        let repository = try EventSourcedActivityRepository.open(at: store)
        let ids = (0..<3).map { UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", $0 + 300))! }
        for (i, id) in ids.enumerated() {
            try await repository.add(ActivityModel(id: id, startDate: Date(timeIntervalSince1970: 1_735_689_600 + Double(i)), endDate: nil, type: .sleep))
        }
        try await repository.store.delete(stream: ActivityEventCodec.stream(of: ids[0]))
        try await repository.store.purge(stream: ActivityEventCodec.stream(of: ids[0]))
        try await repository.purge(id: ids[2])
        try await repository.store.append(PendingEvent(EncodedEvent(eventType: "Audit.noted", schemaVersion: 1, stream: StreamID("Audit", .string("a")), payload: [])))
        try await repository.store.purge(stream: StreamID("Audit", .string("a")))
        let positions = repository.store.purgedStreams
        try await repository.close()  // writes snapshots
        let exported = try await expectReaderMatchesExport(store)
        #expect(exported.filter { $0["event"] as? String == "$purged" }.count == 3)
        #expect(exported.filter { $0["event"] as? String == "$deleted" }.count == 1)
        let table = try #require(try await readSnapshots(store)["$entity-versions"])
        let purged = try #require(table["purged"] as? [NSDictionary])
        #expect(purged.map { "\($0["type"]!)/\($0["id"]!)" } == ["Audit/a", "activity/\(ids[0].uuidString)", "activity/\(ids[2].uuidString)"])
        for entry in purged {
            let id: EntityID = entry["idType"] as? String == "uuid" ? .uuid(UUID(uuidString: entry["id"] as! String)!) : .string(entry["id"] as! String)
            #expect((entry["position"] as? Int).map(UInt64.init) == positions[StreamID(entry["type"] as! String, id)])
        }
    }

    @Test func theSpecReaderDecodesAnActivitiesStoreAsExportAndTheStateDo() async throws {
        let temp = TemporaryDirectory("ek-spec")
        let store = temp.file("activities")
        try await writeSpecActivities(store)
        let exported = try await expectReaderMatchesExport(store)
        #expect(exported.count == 12)

        let snapshots = try await readSnapshots(store)
        let snapshot = try #require(snapshots["activities"])
        #expect(snapshot["nextPosition"] as? Int == 12)
        #expect(snapshot["schemaVersion"] as? Int == 2)
        // The rows are the current activities (export --format activities), with their versions.
        let current = try jsonLines(try await tool("export", store.path, "--format", "activities").stdout)
        let rows = try #require(snapshot["activities"] as? [NSDictionary])
        let versions = streamVersions(exported)
        #expect(rows.count == current.count)
        for row in rows {
            let id = try #require(row["id"] as? String)
            let state = try #require(current.first { $0["id"] as? String == id })
            let withoutVersion = (row.mutableCopy() as! NSMutableDictionary)
            withoutVersion.removeObject(forKey: "version")
            #expect(withoutVersion.isEqual(state), "\(row) vs \(state)")
            #expect(row["version"] as? Int == versions["activity/\(id)"])
        }
        let deleted = try #require(snapshot["deleted"] as? [NSDictionary])
        #expect(deleted.map { $0["id"] as? String } == [ids[4].uuidString])
        #expect(deleted.first?["version"] as? Int == 2)
        #expect(snapshots["$entity-versions"] != nil)

        // Consumer checkpoints: one at the end of the log, one reset to position 2.
        #expect(try await tool("tail", store.path, "--consumer", "feed").status == 0)
        #expect(try await tool("tail", store.path, "--consumer", "late", "--from", "3").status == 0)
        #expect(try await tool("consumers", "reset", store.path, "late", "--to", "2").status == 0)
        let consumers = try await specReader(store, "--consumers")
        #expect(consumers.status == 0, "\(consumers.stderr)")
        let checkpoints = try jsonLines(consumers.stdout)
        let listed = try #require(try JSONSerialization.jsonObject(with: Data(try await tool("consumers", store.path, "--json").stdout.utf8)) as? [NSDictionary])
        #expect(checkpoints.map { $0["consumer"] as? String } == ["feed", "late"])
        #expect(checkpoints.map { $0["committed"] as? Int } == [12, 2])
        #expect(checkpoints.map { $0["committed"] as? Int } == listed.map { $0["committed"] as? Int })
        #expect(checkpoints.map { $0["committedAt"] as? String } == listed.map { $0["committed_at"] as? String })
        #expect(checkpoints.allSatisfy { $0["anchorMatchesLog"] as? Bool == true })

        // Parked events, as `consumers parked` lists them.
        try ConsumerDirectory(storeDirectory: store).writeParked([
            ParkedEvent(position: 1, stream: "activity/\(ids[1].uuidString)", eventType: "activity.added", errorType: "Mail.Error",
                        error: "smtp down ✉", attempts: 300, parkedAt: .now()),
            ParkedEvent(position: 3, stream: "activity/\(ids[2].uuidString)", eventType: "activity.ended", errorType: "E", error: "",
                        attempts: 1, parkedAt: .now()),
        ], named: "late")
        let parkedFile = try #require(try jsonLines(try await specReader(store, "--consumers").stdout).last)
        #expect(parkedFile["consumer"] as? String == "late")
        let parked = try #require(parkedFile["parked"] as? [NSDictionary])
        let parkedListed = try jsonLines(try await tool("consumers", "parked", store.path, "late", "--format", "jsonl").stdout)
        #expect(parked.count == 2)
        #expect(parked.map { $0["position"] as? Int } == parkedListed.map { $0["position"] as? Int })
        #expect(parked.map { $0["stream"] as? String } == parkedListed.map { $0["stream"] as? String })
        #expect(parked.map { $0["event"] as? String } == parkedListed.map { $0["event_type"] as? String })
        #expect(parked.map { $0["attempts"] as? Int } == parkedListed.map { $0["attempts"] as? Int })
        #expect(parked.map { $0["errorType"] as? String } == parkedListed.map { $0["error_type"] as? String })
        #expect(parked.map { $0["error"] as? String } == parkedListed.map { $0["error"] as? String })
        #expect(parked.map { $0["parkedAt"] as? String } == parkedListed.map { $0["parked_at"] as? String })
    }

    @Test func theSpecReaderDecodesAGenericStoreAsExportAndTheRepositoryDo() async throws {
        let temp = TemporaryDirectory("ek-spec")
        let store = temp.file("ledger")
        try await writeSpecLedger(store)
        let exported = try await expectReaderMatchesExport(store)
        // Entries 6, a memo, the ticks and an update and a delete of them, two audit events.
        #expect(exported.count == 6 + 1 + specTickCount + 2 + 2)
        // Every codec and the metadata were exercised, not only matched.
        #expect(Set(exported.compactMap { $0["codec"] as? String }) == ["binary", "json", "none"])
        #expect(exported.contains { ($0["metadata"] as? NSDictionary)?["actor"] as? String == "auditor" })

        let snapshots = try await readSnapshots(store)
        let versions = streamVersions(exported)
        let reopened = try EventStore.open(at: store, snapshotPolicy: .never)
        let entries = try EventSourcedRepository<SpecEntry>(store: reopened, typeName: "Entry", schema: EntitySchema().recording(specSettled),
                                                             indexes: [.on(\SpecEntry.booked)])
        let memos = try EventSourcedRepository<SpecTick>(store: reopened, typeName: specMemoType, schema: EntitySchema(version: 2, codec: .json))
        let ticks = try EventSourcedRepository<SpecTick>(store: reopened, typeName: "Tick")
        /// The reader's entities of a repository snapshot equal the repository's state, in
        /// insertion order, as export renders an entity (EntityJSON).
        func expectSnapshot<Entity: Identifiable & Codable & Sendable>(
            _ name: String, _ repository: EventSourcedRepository<Entity>, idType: String, json: Bool = false
        ) throws -> NSDictionary where Entity.ID: EntityIDConvertible {
            let snapshot = try #require(snapshots["repository:\(name)"])
            #expect(snapshot["schemaVersion"] as? Int == 5)
            let decoded = try #require(snapshot["entities"] as? [NSDictionary])
            let state = repository.fetchAll()
            #expect(decoded.count == state.count)
            for (entity, row) in zip(state, decoded) {
                let id: String = switch entity.id.entityID { case .uuid(let u): u.uuidString; case .string(let s): s }
                #expect(row["id"] as? String == id)
                #expect(row["idType"] as? String == idType)
                #expect(row["version"] as? Int == Int(repository.version(of: entity.id)))
                #expect(row["version"] as? Int == versions["\(name)/\(id)"])
                var text = ""
                if json {
                    text = String(decoding: try JSONEncoder().encode(entity), as: UTF8.self)
                } else {
                    text = EntityJSON.json(try BinaryEntityValue.decode(try BinaryEntityEncoder().encode(entity))).text
                }
                #expect((row["state"] as? NSObject)?.isEqual(try jsonValue(text)) == true, "\(name)/\(id): \(row["state"] ?? "nil") vs \(text)")
            }
            return snapshot
        }
        let entrySnapshot = try expectSnapshot("Entry", entries, idType: "uuid")
        let deleted = try #require(entrySnapshot["deleted"] as? [NSDictionary])
        #expect(deleted.map { $0["id"] as? String } == [specEntryIDs[2].uuidString])
        #expect(deleted.first?["version"] as? Int == 2)
        let index = try #require((entrySnapshot["indexes"] as? [NSDictionary])?.first)
        #expect(index["name"] as? String == "(\\SpecEntry.booked)")
        // The index's order: by the booking date.
        let byDate = entries.fetchAll().sorted { $0.booked < $1.booked }.map(\.id.uuidString)
        #expect(index["order"] as? [String] == byDate)
        _ = try expectSnapshot(specMemoType, memos, idType: "string", json: true)
        let tickSnapshot = try expectSnapshot("Tick", ticks, idType: "string")
        #expect((tickSnapshot["entities"] as? [NSDictionary])?.count == specTickCount - 1)
        // The kernel's table keeps the streams no repository keeps: the application's event.
        let table = try #require(snapshots["$entity-versions"])
        let streams = try #require(table["streams"] as? [NSDictionary])
        #expect(streams.count == 1)
        #expect(streams.first?["type"] as? String == "Audit")
        #expect(streams.first?["version"] as? Int == 2)
        #expect(Set(table["leftOut"] as? [String] ?? []) == ["Entry", specMemoType, "Tick"])
        try await reopened.close()
    }

    @Test func theSpecReaderReadsAStoreWrittenByFormatOneAsExportDoes() async throws {
        // Envelope format 1 (no streams, the id before the stream version), older activity
        // schemas, no eventkernel.store: the spec's rules for them, checked too.
        let fixture = try copyOfFixture("format1-store")
        #expect(try await expectReaderMatchesExport(fixture.url).count == 114)
        // Its snapshots are of layouts no longer restored: said, file by file, and exit 3.
        let snapshots = try await specReader(fixture.url, "--snapshots")
        #expect(snapshots.status == 3)
        #expect(snapshots.stderr.contains("projection 'activities' at schema 1: not a layout this reader decodes"), "\(snapshots.stderr)")
        #expect(snapshots.stderr.contains("4 snapshot file(s) not decoded"), "\(snapshots.stderr)")
    }

    @Test func theSpecReaderReadsEverySegmentAndRefusesAPositionGap() async throws {
        let temp = TemporaryDirectory("ek-spec")
        let store = temp.file("segments")
        // Small segments: the log rolls several times, one batch per add.
        let events = try EventStore.open(at: store, log: SegmentedLog.Configuration(segmentSize: 4_096), snapshotPolicy: .never)
        let ticks = try EventSourcedRepository<SpecTick>(store: events, typeName: "Tick")
        for n in 0..<150 { try await ticks.add(SpecTick(id: "tick-\(n)-" + String(repeating: "x", count: n % 40), n: n)) }
        try await events.close()
        let segments = try FileManager.default.contentsOfDirectory(atPath: store.path).filter { $0.hasSuffix(".log") }.sorted()
        try #require(segments.count >= 3)
        #expect(try await expectReaderMatchesExport(store).count == 150)
        // The sealed segments' index side files were read and agreed (above); a damaged one is
        // derived data: said, and the segment is read instead.
        let index = store.appending(path: String(segments[0].prefix(20)) + ".idx")
        var indexBytes = try Data(contentsOf: index)
        indexBytes[45] ^= 0x01
        try indexBytes.write(to: index)
        let damagedIndex = try await specReader(store)
        #expect(damagedIndex.status == 0, "\(damagedIndex.stderr)")
        #expect(damagedIndex.stderr.contains("\(segments[0].prefix(20)).idx: fails its checks"), "\(damagedIndex.stderr)")
        // A segment gone from the middle: the positions it held are missing, never skipped.
        let removed = segments[1]
        try FileManager.default.removeItem(at: store.appending(path: removed))
        let gap = try await specReader(store)
        #expect(gap.status == 3)
        #expect(gap.stderr.contains("\(segments[2]): position gap: the segment starts at \(UInt64(segments[2].prefix(20))!), but the previous one ends at \(UInt64(removed.prefix(20))!)"), "\(gap.stderr)")
    }

    /// Segments rewritten as compaction does (records removed from batches of five, one segment
    /// emptied whole): the reader follows the sparse batches' positions as export does.
    @Test func theSpecReaderReadsSparseBatchesAsExportDoes() async throws {
        let temp = TemporaryDirectory("ek-spec")
        let store = temp.file("sparse")
        let events = try EventStore.open(at: store, log: SegmentedLog.Configuration(segmentSize: 4_096), snapshotPolicy: .never)
        let ticks = try EventSourcedRepository<SpecTick>(store: events, typeName: "Tick")
        // Batches of five events: a rewrite keeps records of a batch it changes, at gaps.
        for first in stride(from: 0, to: 600, by: 5) {
            try await ticks.addAll((first..<(first + 5)).map { SpecTick(id: "tick-\($0)-" + String(repeating: "x", count: $0 % 40), n: $0) })
        }
        try await events.close()
        let before = try await expectReaderMatchesExport(store)
        let log = try SegmentedLog.open(at: store, configuration: SegmentedLog.Configuration(segmentSize: 4_096))
        let sealed = log.sealedSegments
        try #require(sealed.count >= 3)
        _ = try log.rewriteSealedSegment(startingAt: sealed[0].lowerBound) { _ in .remove }
        for segment in sealed.dropFirst() {
            _ = try log.rewriteSealedSegment(startingAt: segment.lowerBound) { $0.position % 4 == 1 ? .remove : .keep }
        }
        try await log.close()
        let after = try await expectReaderMatchesExport(store)
        let kept = before.filter { line in
            let position = (line["position"] as? NSNumber)?.uint64Value ?? 0
            return !sealed[0].contains(position) && !(sealed.dropFirst().contains { $0.contains(position) } && position % 4 == 1)
        }
        #expect(after == kept)
        #expect(after.count < before.count - sealed[0].count)
    }

    @Test func theSpecReaderReportsATornTailAndRefusesDamage() async throws {
        let temp = TemporaryDirectory("ek-spec")
        let store = temp.file("activities")
        try await writeSpecActivities(store)
        let clean = try await specReader(store)
        #expect(clean.status == 0)
        let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: store.path).filter { $0.hasSuffix(".log") }.sorted().last)
        let file = store.appending(path: segment)
        let original = try Data(contentsOf: file)
        // A torn tail: half a batch header after the last batch. The history is the same.
        try (original + Data([0x45, 0x4B, 0x42, 0x31, 1, 0, 1])).write(to: file)
        let torn = try await specReader(store)
        #expect(torn.status == 0, "\(torn.stderr)")
        #expect(torn.stdout == clean.stdout)
        #expect(torn.stderr.contains("torn tail at byte \(original.count)"), "\(torn.stderr)")
        // One flipped bit in the first batch's payload: exit 3, naming the segment and offset.
        var flipped = original
        flipped[32 + 64] ^= 0x01
        try flipped.write(to: file)
        let damaged = try await specReader(store)
        #expect(damaged.status == 3)
        #expect(damaged.stdout.isEmpty)
        #expect(damaged.stderr.contains("\(segment): payload checksum mismatch at byte 32"), "\(damaged.stderr)")
        // The last batch cut short, with no checkpoint listing it: torn, unless a snapshot of
        // the same history covers it (then acknowledged events are damaged).
        try FileManager.default.removeItem(at: store.appending(path: String(segment.prefix(20)) + ".ckpt"))
        try original.prefix(original.count - 3).write(to: file)
        let underSnapshot = try await specReader(store)
        #expect(underSnapshot.status == 3)
        #expect(underSnapshot.stderr.contains("covers positions beyond it in the same history epoch"), "\(underSnapshot.stderr)")
        // A damaged snapshot header: exit 3 with the file and offset.
        try original.write(to: file)
        let snapshotFile = try #require(try FileManager.default.contentsOfDirectory(atPath: store.appending(path: "snapshots").path)
            .filter { $0.hasSuffix(".snap") }.sorted().first)
        let snapshotURL = store.appending(path: "snapshots/\(snapshotFile)")
        var snapshotBytes = try Data(contentsOf: snapshotURL)
        snapshotBytes[12] ^= 0x20
        try snapshotBytes.write(to: snapshotURL)
        let badSnapshot = try await specReader(store, "--snapshots")
        #expect(badSnapshot.status == 3)
        #expect(badSnapshot.stderr.contains("snapshots/\(snapshotFile): header checksum mismatch"), "\(badSnapshot.stderr)")
    }
}
