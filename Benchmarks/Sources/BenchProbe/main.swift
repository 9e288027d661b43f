// A plain executable for profiling one EventKernel path outside the benchmark harness
// (perf record / valgrind --tool=callgrind). Usage:
//   BenchProbe append-buffered [count]   apply() in batches of 1,000, buffered
//   BenchProbe append-synced [count]     add() one per call, synced, one task
//   BenchProbe append-tasks [count] [tasks]   add() one per call, synced, from several tasks
//   BenchProbe open <directory> [repeats]   open a store (snapshot + tail replay) and close it
//   BenchProbe activity-fixture [count]  build (or find) the cached activity store and its snapshot-less copy
//   BenchProbe first-write <directory>   open a copy of a store and time its first adds
//   BenchProbe fanout <directory>       100 observers of the 7-day window, then 10 writes into it
//   BenchProbe ledger-open <directory>   open a ledger (EventStore + transaction repository), first query
//   BenchProbe ledger-add <directory> [count]    a copy of a ledger: addAll in batches of 1,000, buffered
//   BenchProbe ledger-save <directory> [count]   a copy of a ledger: save() one per call, synced
//   BenchProbe ledger-query <directory> newest|range|page|count [repeats]   one benchmark query, repeated
//   BenchProbe log-tasks [tasks] [perTask]   the bare log: tasks appending synced single records
//   BenchProbe ledger-fixture [count]    build (or find) the cached ledger fixture of count transactions, print its path
//   BenchProbe generic-activities [count]   activities declared on EventSourcedRepository beside the specialised
//                                        repository, same live activities: appends, open, queries, resident bytes
//   BenchProbe generic-append [count]    only the generic repository's appends (for perf)
//   BenchProbe generic-query <directory> [repeats]   the generic repository's 7-day window query, repeated
//   BenchProbe backup [count] [--json]   issue 28's backup bars on a store of count activities (default
//                                        1,000,000): full backup vs cp -r, writer p99 beside it, incremental
//   BenchProbe backup-full <store> [repeats]   full backups of a store into fresh directories (for perf)
//   BenchProbe backup-into <store> <backup> [repeats]   backups into one directory: incremental ones after the first
//   BenchProbe compaction [count]         issue 27's compaction bars on a store of count activities (default
//                                        1,000,000) with every other one purged: bytes after, throughput vs cp -r,
//                                        a synced writer's p99 beside it
import Activities
import BenchFixtures
import EventKernel
import EventLog
import Foundation
import GRDB

let arguments = CommandLine.arguments
let mode = arguments.count > 1 ? arguments[1] : "append-buffered"
let count = arguments.count > 2 ? Int(arguments[2]) ?? 100_000 : 100_000
/// CPU time of the whole process (every thread): what an operation costs the machine, which a
/// busy machine disturbs far less than wall time (the probes print both).
func cpuTime() -> Duration {
    var spec = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &spec)
    return .seconds(spec.tv_sec) + .nanoseconds(spec.tv_nsec)
}

/// EVENTKERNEL_PROBE_PREALLOCATE=0 turns segment preallocation off (default on, as the library).
let preallocate = ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_PREALLOCATE"] != "0"

func run() async throws {
    switch mode {
    case "append-buffered", "append-synced":
        let synced = mode == "append-synced"
        let url = BenchEnv.scratch("probe")
        defer { try? FileManager.default.removeItem(at: url) }
        let repository = try EventKernelFixtures.open(url, durability: synced ? .synced : .buffered, preallocate: preallocate)
        let models = AddStream().next(count)
        let started = ContinuousClock.now, startedCPU = cpuTime()
        if synced {
            for m in models { try await repository.add(m) }
        } else {
            for start in stride(from: 0, to: models.count, by: 1_000) {
                try await repository.apply(models[start..<min(start + 1_000, models.count)].map(ActivityEvent.added))
            }
        }
        let elapsed = ContinuousClock.now - started, cpu = cpuTime() - startedCPU
        print("\(mode): \(count) activities in \(elapsed), \(Double(elapsed.components.attoseconds / 1_000_000_000 + elapsed.components.seconds * 1_000_000_000) / Double(count)) ns per activity, CPU \(cpu / count) per activity")
        try await repository.close()
    case "append-tasks":
        let tasks = arguments.count > 3 ? Int(arguments[3]) ?? 64 : 64
        let url = BenchEnv.scratch("probe")
        defer { try? FileManager.default.removeItem(at: url) }
        let repository = try EventKernelFixtures.open(url, durability: .synced, preallocate: preallocate)
        let models = AddStream().next(count)
        let started = ContinuousClock.now, startedCPU = cpuTime()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<tasks {
                group.addTask {
                    for i in stride(from: t, to: models.count, by: tasks) { try await repository.add(models[i]) }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = ContinuousClock.now - started
        print("append-tasks: \(count) activities from \(tasks) tasks, \(elapsed / count) per activity, CPU \((cpuTime() - startedCPU) / count) per activity, \(repository.store.log is SegmentedLog ? "\((repository.store.log as! SegmentedLog).statistics)" : "")")
        try await repository.close()
    case "log-tasks":
        let tasks = arguments.count > 2 ? Int(arguments[2]) ?? 64 : 64
        let perTask = arguments.count > 3 ? Int(arguments[3]) ?? 100 : 100
        let url = BenchEnv.scratch("probe-log")
        defer { try? FileManager.default.removeItem(at: url) }
        let log = try SegmentedLog.open(at: url)
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<tasks {
                group.addTask {
                    let entry = LogEntry(timestamp: .now(), payload: Array(repeating: UInt8(t & 0xff), count: 64))
                    for _ in 0..<perTask { _ = try await log.append(entry) }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = ContinuousClock.now - started
        print("log-tasks \(tasks)x\(perTask): \(elapsed / (tasks * perTask)) per record, \(log.statistics)")
        try await log.close()
    case "open":
        let url = URL(filePath: arguments[2])
        let repeats = arguments.count > 3 ? Int(arguments[3]) ?? 1 : 1
        for _ in 0..<repeats {
            let started = ContinuousClock.now, startedCPU = cpuTime()
            let repository = try EventKernelFixtures.open(url)
            print("open: \(repository.count) activities in \(ContinuousClock.now - started), CPU \(cpuTime() - startedCPU)")
            try await repository.close()
        }
    case "grdb-synced":
        // GRDB FULL, one row per transaction from one task: what the Append.Synced GRDB peer does.
        let url = BenchEnv.scratch("probe-grdb")
        defer { try? FileManager.default.removeItem(at: url) }
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        let store = try GRDBActivityStore(path: url.appending(path: "db.sqlite").path, synchronous: .full)
        let mode = try await store.pool.write { db in try String.fetchOne(db, sql: "PRAGMA synchronous") ?? "?" }
        let journal = try await store.pool.write { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?" }
        let models = AddStream().next(count)
        let started = ContinuousClock.now
        for model in models { try await store.insert(model) }
        print("grdb-synced: synchronous=\(mode) journal_mode=\(journal), \((ContinuousClock.now - started) / count) per insert")
    case "activity-fixture":
        // The benchmark's cached activity store of `count` activities, and its copy without
        // snapshots (what a full replay opens).
        print(try await EventKernelFixtures.store(n: count).path)
        print(try await EventKernelFixtures.replayOnlyStore(n: count).path)
    case "first-write":
        // Copies the store, opens it, and times the first few single adds (buffered).
        let copy = BenchEnv.scratch("probe-first-write")
        defer { try? FileManager.default.removeItem(at: copy) }
        try copyTree(URL(filePath: arguments[2]), to: copy)
        let repository = try EventKernelFixtures.open(copy)
        for model in AddStream(seed: 5).next(4) {
            let started = ContinuousClock.now
            var t0 = timespec(), t1 = timespec()
            clock_gettime(CLOCK_MONOTONIC, &t0)
            try await repository.add(model)
            clock_gettime(CLOCK_MONOTONIC, &t1)
            // Monotonic timestamps, for `perf record -k CLOCK_MONOTONIC` + `perf script --time`.
            print("add: \(ContinuousClock.now - started) (monotonic \(t0.tv_sec).\(String(format: "%09ld", t0.tv_nsec)) to \(t1.tv_sec).\(String(format: "%09ld", t1.tv_nsec)))")
        }
        try await repository.close()
    case "fanout":
        // Observation.FanOut100 outside the harness: 100 observers of the window, then writes
        // into it; prints each write's add() latency and the time until every observer had it.
        let copy = BenchEnv.scratch("probe-fanout")
        defer { try? FileManager.default.removeItem(at: copy) }
        try copyTree(URL(filePath: arguments[2]), to: copy)
        let repository = try EventKernelFixtures.open(copy)
        let query = ActivityQuery(afterDate: BenchEnv.weekStart, beforeDate: BenchEnv.historyEnd.addingTimeInterval(86_400 * 365), limit: 50)
        let (arrivals, arrived) = AsyncStream<Void>.makeStream()
        var consumers: [Task<Void, Never>] = []
        for _ in 0..<100 {
            let stream = repository.observe(query: query)
            consumers.append(Task { for await _ in stream { arrived.yield() } })
        }
        var iterator = arrivals.makeAsyncIterator()
        for _ in 0..<100 { _ = await iterator.next() }
        for (i, var m) in AddStream(seed: 99).next(10).enumerated() {
            m.startDate = BenchEnv.historyEnd.addingTimeInterval(Double(i + 1) * 3_600)
            m.endDate = m.startDate.addingTimeInterval(60)
            let started = ContinuousClock.now
            try await repository.add(m)
            let added = ContinuousClock.now - started
            for _ in 0..<100 { _ = await iterator.next() }
            print("fanout: add \(added), all 100 observers \(ContinuousClock.now - started)")
        }
        for c in consumers { c.cancel() }
        try await repository.close()
    case "ledger-open":
        let started = ContinuousClock.now
        let ledger = try EventKernelLedger(URL(filePath: arguments[2]))
        let first = try ledger.transactions.fetch(EntityQuery<LedgerTransaction>().where(\.accountID, equals: Ledger.accounts[0]).orderBy(\.date, ascending: false).limit(50))
        print("ledger-open: \(ledger.transactions.count) transactions, \(first.count) in the first query, in \(ContinuousClock.now - started)")
        try await ledger.close()
    case "ledger-add", "ledger-save":
        let synced = mode == "ledger-save"
        let total = arguments.count > 3 ? Int(arguments[3]) ?? 20_000 : 20_000
        let copy = BenchEnv.scratch("probe-ledger")
        defer { try? FileManager.default.removeItem(at: copy) }
        try copyTree(URL(filePath: arguments[2]), to: copy)
        let ledger = try EventKernelLedger(copy, durability: synced ? .synced : .buffered, preallocate: preallocate)
        let transactions = LedgerAddStream().next(total)
        let started = ContinuousClock.now, startedCPU = cpuTime()
        if synced {
            for t in transactions { try await ledger.transactions.save(t) }
        } else {
            var batchTimes: [Duration] = []
            for start in stride(from: 0, to: total, by: 1_000) {
                let batch = Array(transactions[start..<min(start + 1_000, total)])
                let batchStarted = ContinuousClock.now
                try await ledger.transactions.addAll(batch)
                batchTimes.append(ContinuousClock.now - batchStarted)
            }
            // The first batch pays the one-time growth of the restored tables; the median is
            // what the benchmark's median reports.
            batchTimes.sort()
            print("\(mode): median batch of 1,000 \(batchTimes[batchTimes.count / 2] / 1_000) per transaction, first-to-last max \(batchTimes.last! / 1_000)")
        }
        let elapsed = ContinuousClock.now - started
        print("\(mode): \(total) transactions in \(elapsed), \(elapsed / total) per transaction, CPU \((cpuTime() - startedCPU) / total) per transaction")
        try await ledger.close()
    case "ledger-fixture":
        print(try await LedgerFixtures.store(n: count).path)
    case "ledger-query":
        let ledger = try EventKernelLedger(URL(filePath: arguments[2]))
        let kind = arguments.count > 3 ? arguments[3] : "newest"
        let repeats = arguments.count > 4 ? Int(arguments[4]) ?? 1_000 : 1_000
        let repository = ledger.transactions
        typealias Query = EntityQuery<LedgerTransaction>
        let offset = Ledger.pageOffset(repository.count)
        let started = ContinuousClock.now, startedCPU = cpuTime()
        var results = 0
        for i in 0..<repeats {
            switch kind {
            case "range": results += try repository.fetch(Query().where(\.date, in: Ledger.weekWindows[i % 16]).orderBy(\.date)).count
            case "page": results += try repository.fetch(Query().orderBy(\.date).offset(offset).limit(40)).count
            case "count": results += try repository.count(Query().where(\.category, equals: Ledger.categories[i % 6]))
            default: results += try repository.fetch(Query().where(\.accountID, equals: Ledger.accounts[i % 50]).orderBy(\.date, ascending: false).limit(50)).count
            }
        }
        let elapsed = ContinuousClock.now - started
        print("ledger-query \(kind): \(repeats) queries, \(results) results, \(elapsed / repeats) per query, CPU \((cpuTime() - startedCPU) / repeats) per query")
        try await ledger.close()
    case "generic-activities":
        try await GenericActivitiesProbe.run(count: count)
    case "generic-append":
        try await GenericActivitiesProbe.append(count: count)
    case "generic-query":
        try await GenericActivitiesProbe.query(URL(filePath: arguments[2]), repeats: arguments.count > 3 ? Int(arguments[3]) ?? 100_000 : 100_000)
    case "backup":
        // Its own default (the bar's 1,000,000), not the other modes' 100,000.
        let count = arguments.dropFirst(2).lazy.compactMap { Int($0) }.first ?? 1_000_000
        try await BackupProbe.run(count: count, json: arguments.contains("--json"))
    case "backup-full":
        try await BackupProbe.repeatFull(URL(filePath: arguments[2]), repeats: arguments.count > 3 ? Int(arguments[3]) ?? 10 : 10)
    case "backup-into":
        try await BackupProbe.repeatInto(URL(filePath: arguments[2]), URL(filePath: arguments[3]), repeats: arguments.count > 4 ? Int(arguments[4]) ?? 10 : 10)
    case "compaction":
        let count = arguments.dropFirst(2).lazy.compactMap { Int($0) }.first ?? 1_000_000
        try await CompactionProbe.run(count: count)
    case "generic-activities-open":
        try await GenericActivitiesProbe.open(URL(filePath: arguments[2]), generic: arguments.count > 3 && arguments[3] == "generic")
    default:
        print("unknown mode \(mode)")
    }
}

try await run()
