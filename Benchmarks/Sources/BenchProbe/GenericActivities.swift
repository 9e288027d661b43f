// Activities declared on the generic engine (`EventSourcedRepository<ActivityModel>`) beside the
// specialised `EventSourcedActivityRepository`, on the same live activities: what moving the
// reference domain onto the kernel (issue 26) costs today, row by row. Not a benchmark (one
// process, a few repeats); the benchmark package's rows stay the figures of record.
import Activities
import BenchFixtures
import EventKernel
import EventLog
import Foundation

extension ActivityType: @retroactive IndexValueConvertible {}

enum GenericActivitiesProbe {
    static let typeName = "ProbeActivity"

    /// EVENTKERNEL_PROBE_CODABLE=1: the entities through `Codable` (the binary entity coder)
    /// instead of the payload codec below.
    static let codable = ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_CODABLE"] == "1"

    /// A hand-written payload: the type (varint length, UTF-8), a flags byte (bit 0: an end),
    /// the start and the end as little-endian `Double`s. No id (the envelope's).
    static let payload = EntityPayloadCodec<ActivityModel>(
        encode: { model, bytes in
            let type = model.type.rawValue.utf8
            bytes.append(UInt8(type.count))
            bytes.append(contentsOf: type)
            bytes.append(model.endDate == nil ? 0 : 1)
            withUnsafeBytes(of: model.startDate.timeIntervalSinceReferenceDate.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
            if let end = model.endDate {
                withUnsafeBytes(of: end.timeIntervalSinceReferenceDate.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
            }
        },
        decode: { payload, id, _ in
            struct Malformed: Error {}
            guard case .uuid(let uuid) = id, payload.count >= 10 else { throw Malformed() }
            let typeLength = Int(payload[0])
            guard payload.count >= typeLength + 10, let type = String(validating: payload[1..<1 + typeLength], as: UTF8.self) else { throw Malformed() }
            var offset = 1 + typeLength
            let hasEnd = payload[offset] == 1
            offset += 1
            let start = Double(bitPattern: UInt64(littleEndian: payload.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
            var end: Date?
            if hasEnd {
                guard payload.count >= offset + 16 else { throw Malformed() }
                end = Date(timeIntervalSinceReferenceDate: Double(bitPattern: UInt64(littleEndian: payload.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))))
            }
            return ActivityModel(id: uuid, startDate: Date(timeIntervalSinceReferenceDate: start), endDate: end, type: ActivityType(rawValue: type))
        })

    static func genericRepository(_ store: EventStore) throws -> EventSourcedRepository<ActivityModel> {
        try EventSourcedRepository<ActivityModel>(
            store: store, typeName: typeName, schema: codable ? EntitySchema() : EntitySchema(payload: payload),
            // No `.on(\.startDate)`: the interval index orders by its start as that index would,
            // and serves the same range and order queries (an index of the same keys beside it
            // cost 33 B per activity and an insert per append: 2026-11-27, Docs/Architecture.md).
            indexes: [.on(\.type, \.startDate), .interval(start: \.startDate, end: \.endDate)])
    }

    /// Builds both stores from the live activities of the seeded history (fresh each run), then
    /// opens each in a child process (`generic-activities-open`) so resident memory is its own.
    static func run(count: Int) async throws {
        let live = Workload.liveActivities(count)
        let root = BenchEnv.scratch("generic-activities")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        // EVENTKERNEL_PROBE_KEEP=1 keeps both stores (for perf of `generic-activities-open`).
        let keep = ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_KEEP"] == "1"
        defer { if keep { print("kept: \(root.path)") } else { try? FileManager.default.removeItem(at: root) } }
        let genericURL = root.appending(path: "generic"), specialisedURL = root.appending(path: "specialised")
        let log = SegmentedLog.Configuration(durability: .buffered, preallocate: false)

        let store = try EventStore.open(at: genericURL, log: log, snapshotPolicy: .never)
        let generic = try genericRepository(store)
        var started = ContinuousClock.now
        for start in stride(from: 0, to: live.count, by: 1_000) {
            try await generic.addAll(Array(live[start..<min(start + 1_000, live.count)]))
        }
        let genericAppend = (ContinuousClock.now - started) / live.count
        try await store.writeSnapshots()
        try await store.close()

        let specialised = try EventKernelFixtures.open(specialisedURL, durability: .buffered)
        started = ContinuousClock.now
        for start in stride(from: 0, to: live.count, by: 1_000) {
            try await specialised.apply(live[start..<min(start + 1_000, live.count)].map(ActivityEvent.added))
        }
        let specialisedAppend = (ContinuousClock.now - started) / live.count
        try await specialised.store.writeSnapshots()
        try await specialised.close()

        print("activities: \(live.count) live of a history of \(count)")
        print(row("append, batches of 1,000 (per activity)", specialisedAppend, genericAppend))
        print("bytes on disk per activity: specialised \(diskBytes(specialisedURL) / live.count) B, generic \(diskBytes(genericURL) / live.count) B")
        let me = URL(filePath: CommandLine.arguments[0])
        for (label, url, flag) in [("specialised", specialisedURL, "specialised"), ("generic", genericURL, "generic")] {
            let process = Process()
            process.executableURL = me
            process.arguments = ["generic-activities-open", url.path, flag]
            try process.run()
            process.waitUntilExit()
            if process.terminationStatus != 0 { print("\(label): open failed (\(process.terminationStatus))") }
        }
    }

    /// The generic repository's appends alone: `addAll` in batches of 1,000, buffered.
    static func append(count: Int) async throws {
        let models = AddStream().next(count)
        let url = BenchEnv.scratch("generic-append")
        defer { try? FileManager.default.removeItem(at: url) }
        let store = try EventStore.open(at: url, log: SegmentedLog.Configuration(durability: .buffered, preallocate: false), snapshotPolicy: .never)
        let repository = try genericRepository(store)
        let started = ContinuousClock.now
        for start in stride(from: 0, to: models.count, by: 1_000) {
            try await repository.addAll(Array(models[start..<min(start + 1_000, models.count)]))
        }
        print("generic-append: \((ContinuousClock.now - started) / count) per activity")
        try await store.close()
    }

    /// One query of the generic repository repeated (for perf): `window` (7 days, newest 50),
    /// with EVENTKERNEL_PROBE_TYPES=1 of two types.
    static func query(_ url: URL, repeats: Int) async throws {
        let store = try EventStore.open(at: url, snapshotPolicy: .never)
        let repository = try genericRepository(store)
        var query = EntityQuery<ActivityModel>().where(\.startDate, greaterThan: BenchEnv.weekStart)
            .where(\.startDate, lessThan: BenchEnv.historyEnd).orderBy(\.startDate, ascending: false).limit(50)
        if ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_TYPES"] == "1" {
            query = query.where(\.type, isIn: [ActivityType.sleep, .tummyTime])
        }
        let started = ContinuousClock.now
        var results = 0
        for _ in 0..<repeats { results += try repository.fetch(query).count }
        print("generic-query window: \((ContinuousClock.now - started) / repeats) per query, \(results / repeats) results")
        try await store.close()
    }

    static func row(_ label: String, _ specialised: Duration, _ generic: Duration) -> String {
        let ratio = Double(generic.components.attoseconds / 1_000 + generic.components.seconds * 1_000_000_000_000_000)
            / Double(max(1, specialised.components.attoseconds / 1_000 + specialised.components.seconds * 1_000_000_000_000_000))
        return "\(label): specialised \(specialised), generic \(generic), generic/specialised \(String(format: "%.2f", ratio))x"
    }

    /// Opens one store (three times; the median), then times each query of QueryBenchmarks.
    static func open(_ url: URL, generic: Bool) async throws {
        Memory.trim()
        let before = Memory.residentBytes(), heapBefore = Memory.heapBytes()
        var opens: [Duration] = []
        var resident = 0
        // Beside resident memory: the bytes malloc has handed out and not taken back (live),
        // and resident memory again after `malloc_trim` (what freed memory the allocator kept).
        var heap = 0, trimmed = 0, trimDuration = Duration.zero
        func measure() {
            resident = Memory.residentBytes() - before
            heap = Memory.heapBytes() - heapBefore
            let trimStarted = ContinuousClock.now
            Memory.trim()
            trimDuration = ContinuousClock.now - trimStarted
            trimmed = Memory.residentBytes() - before
            // EVENTKERNEL_PROBE_EXIT_AFTER_OPEN=1: exit with the store open, so that a heap
            // profiler's "leaked" allocations are exactly what the open keeps (heaptrack).
            if ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_EXIT_AFTER_OPEN"] == "1" { exit(0) }
        }
        let twoTypes: Set<ActivityType> = [.sleep, .tummyTime]
        typealias Query = EntityQuery<ActivityModel>
        let repeats = Int(ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_REPEATS"] ?? "") ?? 2_000
        // CPU time per query beside wall time: on a busy machine (other builds on both
        // cores) wall time counts the waits for a core; CPU time far less so.
        var cpu: [Duration] = []
        func time(_ body: () throws -> Int) rethrows -> (Duration, Int) {
            var results = 0
            let started = ContinuousClock.now, startedCPU = cpuTime()
            for _ in 0..<repeats { results += try body() }
            cpu.append((cpuTime() - startedCPU) / repeats)
            return ((ContinuousClock.now - started) / repeats, results / repeats)
        }
        if generic {
            var store: EventStore?, repository: EventSourcedRepository<ActivityModel>?
            for _ in 0..<3 {
                if let store { try await store.close() }
                let started = ContinuousClock.now
                store = try EventStore.open(at: url, snapshotPolicy: .never)
                repository = try genericRepository(store!)
                opens.append(ContinuousClock.now - started)
                if opens.count == 1 { measure() }
            }
            let r = repository!
            let window = try time { try r.fetch(Query().where(\.startDate, greaterThan: BenchEnv.weekStart).where(\.startDate, lessThan: BenchEnv.historyEnd).orderBy(\.startDate, ascending: false).limit(50)).count }
            let types = try time { try r.fetch(Query().where(\.type, isIn: twoTypes).where(\.startDate, greaterThan: BenchEnv.weekStart).where(\.startDate, lessThan: BenchEnv.historyEnd).orderBy(\.startDate, ascending: false).limit(50)).count }
            let range = try time { try r.fetch(Query().where(\.startDate, from: BenchEnv.midDayStart, through: BenchEnv.midDayEnd).orderBy(\.startDate)).count }
            let overlap = try time { try r.fetch(Query().where(\.startDate, \.endDate, overlapping: BenchEnv.midDayStart...BenchEnv.midDayEnd).orderBy(\.startDate)).count }
            report("generic", r.count, opens, resident, window, types, range, overlap)
            print("generic: after the first open: heap \(heap / max(1, r.count)) B per activity, resident after malloc_trim \(trimmed / max(1, r.count)) B (the trim took \(trimDuration)); the first open \(opens[0])")
            print("generic: CPU per query: window \(cpu[0]), two types \(cpu[1]), range \(cpu[2]), overlap \(cpu[3])")
            try await store!.close()
        } else {
            var repository: EventSourcedActivityRepository?
            for _ in 0..<3 {
                if let repository { try await repository.close() }
                let started = ContinuousClock.now
                repository = try EventKernelFixtures.open(url)
                opens.append(ContinuousClock.now - started)
                if opens.count == 1 { measure() }
            }
            let r = repository!
            let window = try time { try r.activities(matching: ActivityQuery(afterDate: BenchEnv.weekStart, beforeDate: BenchEnv.historyEnd, limit: 50, sortOrder: .newestFirst)).count }
            let types = try time { try r.activities(matching: ActivityQuery(afterDate: BenchEnv.weekStart, beforeDate: BenchEnv.historyEnd, types: twoTypes, limit: 50, sortOrder: .newestFirst)).count }
            let range = try time { try r.activities(in: ActivityRangeQuery(.startingIn, from: BenchEnv.midDayStart, to: BenchEnv.midDayEnd, sortOrder: .oldestFirst)).count }
            let overlap = try time { try r.activities(in: ActivityRangeQuery(.overlapping, from: BenchEnv.midDayStart, to: BenchEnv.midDayEnd, sortOrder: .oldestFirst)).count }
            report("specialised", r.count, opens, resident, window, types, range, overlap)
            print("specialised: after the first open: heap \(heap / max(1, r.count)) B per activity, resident after malloc_trim \(trimmed / max(1, r.count)) B (the trim took \(trimDuration)); the first open \(opens[0])")
            print("specialised: CPU per query: window \(cpu[0]), two types \(cpu[1]), range \(cpu[2]), overlap \(cpu[3])")
            try await r.close()
        }
    }

    static func report(_ label: String, _ count: Int, _ opens: [Duration], _ resident: Int,
                       _ window: (Duration, Int), _ types: (Duration, Int), _ range: (Duration, Int), _ overlap: (Duration, Int)) {
        print("\(label): \(count) activities; open from snapshot \(opens.sorted()[1]) (median of 3); resident \(resident / max(1, count)) B per activity (after the first open)")
        print("\(label): window 7d newest 50: \(window.0) (\(window.1) results); two types: \(types.0) (\(types.1)); range 1d: \(range.0) (\(range.1)); overlap 1d: \(overlap.0) (\(overlap.1))")
    }
}
