// The finance ledger (Examples/Finance's domain): N transactions (EVENTKERNEL_BENCH_LEDGER_N,
// default N: 1,000,000 in `make bench`, 10,000 in the smoke run) over 50 accounts and 6
// categories, random dates over two years, seeded. EventKernel's EventSourcedRepository against
// SQLite through GRDB (see GRDBLedgerStore for the schema), in the same run.
//
// Operations per iteration (scripts/bench_table.py mirrors them to print per-operation figures):
//   AddBatch1000     1,000 new transactions in one batch (addAll / one write transaction)
//   SyncedSave       1,000 single saves, each durable before the next (fdatasync / FULL)
//   SyncedSave.Interleaved  8 rounds of 100 saves on each store and 100 bare pwrite+fdatasync
//   AccountNewest50  1,000 queries (EventKernel and GRDB): one account's 50 newest, cycling accounts
//   Range7d          16 queries: every transaction in a 7-day window, oldest first (16 windows)
//   PageOffset10k    EventKernel 1,000 queries, GRDB 1: 40 transactions at offset 10,000 in date order
//   CategoryCount    EventKernel 1,000 counts, GRDB 6 (one per category, cycling)
//   Reopen           one open with its repository and a first query
// Writes go to private copies of the ledger, so every store holds N transactions and grows.
import Benchmark
import BenchFixtures
import EventKernel
import EventLog
import Foundation
import GRDB

nonisolated(unsafe) private var scratchDirectories: [URL] = []

private func track(_ url: URL) -> URL {
    scratchDirectories.append(url)
    return url
}

private typealias Query = EntityQuery<LedgerTransaction>

private let stream = LedgerAddStream()
private let n = BenchEnv.ledgerN
private let pageOffset = Ledger.pageOffset(n)

/// The cached fixtures, opened for queries (nothing is written to them).
private let ekLedger = Once { try EventKernelLedger(try await LedgerFixtures.store()) }
private let grdbLedger = Once { try GRDBLedgerStore(path: try LedgerFixtures.database(), synchronous: .normal) }

/// Private copies for the writing benchmarks: buffered/NORMAL for batches, synced/FULL for single saves.
private let ekBuffered = Once {
    try EventKernelLedger(track(try await LedgerFixtures.storeCopy("ledger-ek-batch")), durability: .buffered, preallocate: true)
}
private let ekSynced = Once {
    try EventKernelLedger(track(try await LedgerFixtures.storeCopy("ledger-ek-synced")), durability: .synced, preallocate: true)
}
private let grdbNormal = Once {
    let copy = try LedgerFixtures.databaseCopy("ledger-grdb-batch")
    _ = track(copy.directory)
    return try GRDBLedgerStore(path: copy.path, synchronous: .normal)
}
private let grdbFull = Once {
    let copy = try LedgerFixtures.databaseCopy("ledger-grdb-synced")
    _ = track(copy.directory)
    return try GRDBLedgerStore(path: copy.path, synchronous: .full)
}
private let syncFloor = Once {
    try SyncFloor(directory: track(BenchEnv.scratch("ledger-floor")))
}

// The queries, as the finance app writes them.
private func newest(_ account: UUID) -> Query { Query().where(\.accountID, equals: account).orderBy(\.date, ascending: false).limit(50) }
private func week(_ window: ClosedRange<Date>) -> Query { Query().where(\.date, in: window).orderBy(\.date) }
private func page(offset: Int) -> Query { Query().orderBy(\.date).offset(offset).limit(40) }
private func category(_ name: String) -> Query { Query().where(\.category, equals: name) }

/// Checks once per process that both stores answer every benchmark query alike (dates in order,
/// and ids for the full range; equal dates may order differently at a limit), and prints how
/// each side answers them.
private let agreement = Once {
    let ek = try await ekLedger.get().transactions
    let db = try await grdbLedger.get()
    func check(_ same: Bool, _ label: String) {
        if !same { FileHandle.standardError.write("WARNING: ledger \(label): EventKernel and GRDB differ\n".data(using: .utf8)!) }
    }
    for account in Ledger.accounts.prefix(3) {
        let a = try ek.fetch(newest(account)), b = try db.newest(account: account, limit: 50)
        check(a.map(\.date) == b.map(\.date) && a.count == 50, "newest of \(account)")
    }
    for window in Ledger.weekWindows.prefix(3) {
        let a = try ek.fetch(week(window)), b = try db.range(window)
        check(a.map(\.date) == b.map(\.date) && Set(a) == Set(b), "7-day range")
    }
    let pageA = try ek.fetch(page(offset: pageOffset)), pageB = try db.page(offset: pageOffset, limit: 40)
    check(pageA.map(\.date) == pageB.map(\.date) && pageA.count == 40, "page at \(pageOffset)")
    for name in Ledger.categories { check(try ek.count(category(name)) == (try db.count(category: name)), "count of \(name)") }
    let plans = [newest(Ledger.accounts[0]), week(Ledger.weekWindows[0]), page(offset: pageOffset), category("rent")].map { ek.explain($0) }
    FileHandle.standardError.write("EventKernel plans:\n  \(plans.joined(separator: "\n  "))\nSQLite plans:\n  \(try db.plans().joined(separator: "\n  "))\n".data(using: .utf8)!)
    return true
}

private let bytesPerTransaction = BenchmarkMetric.custom("bytesPerTransaction", polarity: .prefersSmaller, useScalingFactor: false)
private let logBytesPerTransaction = BenchmarkMetric.custom("logBytesPerTransaction", polarity: .prefersSmaller, useScalingFactor: false)
private let snapshotBytesPerTransaction = BenchmarkMetric.custom("snapshotBytesPerTransaction", polarity: .prefersSmaller, useScalingFactor: false)

private func metricConfiguration(_ metrics: [BenchmarkMetric]) -> Benchmark.Configuration {
    .init(metrics: BenchConfig.allocationsOnly ? [.mallocCountTotal] : metrics, timeUnits: .microseconds,
          warmupIterations: 0, scalingFactor: .one, maxDuration: .seconds(60), maxIterations: 1)
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.teardown = {
        for url in scratchDirectories { try? FileManager.default.removeItem(at: url) }
    }
    let fast = BenchConfig.configuration(scalingFactor: .kilo)
    let slow = BenchConfig.configuration(scalingFactor: .one, maxDuration: .seconds(5), maxIterations: 500)

    // MARK: Writes

    Benchmark("Ledger.AddBatch1000.EventKernel", configuration: fast) { benchmark in
        let ledger = try await ekBuffered.get()
        let batch = stream.next(1_000)
        benchmark.startMeasurement()
        try await ledger.transactions.addAll(batch)
        benchmark.stopMeasurement()
    }

    Benchmark("Ledger.AddBatch1000.GRDB", configuration: fast) { benchmark in
        let store = try await grdbNormal.get()
        let batch = stream.next(1_000)
        benchmark.startMeasurement()
        try await store.insert(batch)
        benchmark.stopMeasurement()
    }

    Benchmark("Ledger.SyncedSave.EventKernel", configuration: fast) { benchmark in
        let ledger = try await ekSynced.get()
        let transactions = stream.next(1_000)
        benchmark.startMeasurement()
        for transaction in transactions { try await ledger.transactions.save(transaction) }
        benchmark.stopMeasurement()
    }

    Benchmark("Ledger.SyncedSave.GRDB", configuration: fast) { benchmark in
        let store = try await grdbFull.get()
        let transactions = stream.next(1_000)
        benchmark.startMeasurement()
        for transaction in transactions { try await store.insert(transaction) }
        benchmark.stopMeasurement()
    }

    // The two above run minutes apart, while the disk's flush latency drifts by 10x within
    // minutes here: this one alternates slices of 100 saves on each and 100 bare syncs, so the
    // ratio compares the stores at the same moments (BenchFixtures' Interleaved).
    Benchmark("Ledger.SyncedSave.Interleaved", configuration: Interleaved.configuration()) { benchmark in
        let ledger = try await ekSynced.get()
        let store = try await grdbFull.get()
        try await Interleaved.runOneTask(benchmark, floor: try await syncFloor.get(),
            eventKernel: { slice in for transaction in stream.next(slice) { try await ledger.transactions.save(transaction) } },
            peer: { slice in for transaction in stream.next(slice) { try await store.insert(transaction) } })
    }

    // MARK: Queries (the query is built per call, as the app builds it)

    Benchmark("Ledger.AccountNewest50.EventKernel", configuration: fast) { benchmark in
        let repository = try await ekLedger.get().transactions
        _ = try await agreement.get()
        var i = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try repository.fetch(newest(Ledger.accounts[i % Ledger.accountCount])))
            i += 1
        }
    }

    Benchmark("Ledger.AccountNewest50.GRDB", configuration: fast) { benchmark in
        let store = try await grdbLedger.get()
        var i = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try store.newest(account: Ledger.accounts[i % Ledger.accountCount], limit: 50))
            i += 1
        }
    }

    Benchmark("Ledger.Range7d.EventKernel", configuration: slow) { benchmark in
        let repository = try await ekLedger.get().transactions
        _ = try await agreement.get()
        benchmark.startMeasurement()
        for window in Ledger.weekWindows { blackHole(try repository.fetch(week(window))) }
    }

    Benchmark("Ledger.Range7d.GRDB", configuration: slow) { benchmark in
        let store = try await grdbLedger.get()
        benchmark.startMeasurement()
        for window in Ledger.weekWindows { blackHole(try store.range(window)) }
    }

    Benchmark("Ledger.PageOffset10k.EventKernel", configuration: fast) { benchmark in
        let repository = try await ekLedger.get().transactions
        _ = try await agreement.get()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { blackHole(try repository.fetch(page(offset: pageOffset))) }
    }

    Benchmark("Ledger.PageOffset10k.GRDB", configuration: slow) { benchmark in
        let store = try await grdbLedger.get()
        benchmark.startMeasurement()
        blackHole(try store.page(offset: pageOffset, limit: 40))
    }

    Benchmark("Ledger.CategoryCount.EventKernel", configuration: fast) { benchmark in
        let repository = try await ekLedger.get().transactions
        _ = try await agreement.get()
        var i = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try repository.count(category(Ledger.categories[i % Ledger.categories.count])))
            i += 1
        }
    }

    Benchmark("Ledger.CategoryCount.GRDB", configuration: slow) { benchmark in
        let store = try await grdbLedger.get()
        benchmark.startMeasurement()
        for name in Ledger.categories { blackHole(try store.count(category: name)) }
    }

    // MARK: Reopen: the store with its repository and a first query
    // No warm-up iteration: an open takes seconds at 1M, and the fixture's files are in the page
    // cache already (just built or just read by the previous benchmark process).

    func reopen(_ name: String, maxIterations: Int, _ url: @escaping @Sendable () async throws -> URL) {
        Benchmark(name, configuration: BenchConfig.configuration(scalingFactor: .one, maxDuration: .seconds(15), maxIterations: maxIterations,
                                                                 warmupIterations: 0)) { benchmark in
            let directory = try await url()
            benchmark.startMeasurement()
            let ledger = try EventKernelLedger(directory)
            blackHole(try ledger.transactions.fetch(newest(Ledger.accounts[0])))
            benchmark.stopMeasurement()
            try await ledger.close()
        }
    }
    reopen("Ledger.Reopen.Snapshot.EventKernel", maxIterations: 10) { try await LedgerFixtures.store() }
    reopen("Ledger.Reopen.FullReplay.EventKernel", maxIterations: 5) { try await LedgerFixtures.replayOnlyStore() }

    // SQLite opens lazily: open the pool and answer the first query (context, no target).
    Benchmark("Ledger.Reopen.GRDB", configuration: BenchConfig.configuration(scalingFactor: .one, maxDuration: .seconds(10), maxIterations: 10)) { benchmark in
        let path = try LedgerFixtures.database()
        benchmark.startMeasurement()
        let store = try GRDBLedgerStore(path: path, synchronous: .normal)
        blackHole(try store.newest(account: Ledger.accounts[0], limit: 50))
        benchmark.stopMeasurement()
        try store.pool.close()
    }

    // MARK: Bytes on disk per transaction

    Benchmark("Ledger.Disk.EventKernel",
              configuration: metricConfiguration([bytesPerTransaction, logBytesPerTransaction, snapshotBytesPerTransaction])) { benchmark in
        let url = try await LedgerFixtures.store()
        let ledger = try EventKernelLedger(url)
        let live = ledger.transactions.count
        try await ledger.close()
        try? FileManager.default.removeItem(at: url.appending(path: ".lock"))
        let total = diskBytes(url), log = EventKernelFixtures.logBytes(url), snapshots = diskBytes(url.appending(path: "snapshots"))
        benchmark.measurement(bytesPerTransaction, total / max(1, live))
        benchmark.measurement(logBytesPerTransaction, log / max(1, live))
        benchmark.measurement(snapshotBytesPerTransaction, snapshots / max(1, live))
        FileHandle.standardError.write("EventKernel ledger: \(total) bytes (log \(log), snapshots \(snapshots)), \(live) transactions\n".data(using: .utf8)!)
    }

    Benchmark("Ledger.Disk.GRDB", configuration: metricConfiguration([bytesPerTransaction])) { benchmark in
        let path = try LedgerFixtures.database()
        let store = try GRDBLedgerStore(path: path, synchronous: .normal)
        let live = try store.count()
        _ = try store.pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        try store.pool.close()
        let total = diskBytes(URL(filePath: path)) + diskBytes(URL(filePath: path + "-wal"))
        benchmark.measurement(bytesPerTransaction, total / max(1, live))
        FileHandle.standardError.write("SQLite ledger: \(total) bytes, \(live) transactions\n".data(using: .utf8)!)
    }
}
