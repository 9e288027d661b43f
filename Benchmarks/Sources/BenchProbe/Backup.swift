// Issue 28's backup bars, measured in one run: a full backup's throughput against `cp -r` of
// the same directory, a synced writer's p99 with a full backup running beside it against a
// quiet run's, and what an incremental backup after 10,000 more activities writes and takes.
// Not a benchmark (one process, a few rounds, medians): PASS/MISS per bar is printed, and a
// miss does not fail anything. Docs/Benchmarks.md, "Backups", holds the figures of record.
import Activities
import BenchFixtures
import EventKernel
import EventLog
import Foundation

enum BackupProbe {
    /// Rounds of `cp -r` and of the full backup, alternated (EVENTKERNEL_PROBE_ROUNDS, default 3).
    static let rounds = max(1, Int(ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_ROUNDS"] ?? "") ?? 3)
    /// Synced appends per writer phase, quiet and beside backups (EVENTKERNEL_PROBE_WRITES, default 4,000).
    static let writes = max(100, Int(ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_WRITES"] ?? "") ?? 4_000)
    /// Blocks each writer phase is cut into, the quiet ones alternating with the others.
    static let writerBlocks = 8
    /// The activities appended before the incremental backup (the bar's 10,000).
    static let increment = 10_000

    /// The whole probe on a store of `count` activities; `json`: a last line of JSON too.
    static func run(count: Int, json: Bool) async throws {
        let root = BenchEnv.scratch("backup")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        // EVENTKERNEL_PROBE_KEEP=1 keeps the store and the last backup (to verify or profile them).
        let keep = ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_KEEP"] == "1"
        defer { if keep { print("kept: \(root.path)") } else { try? FileManager.default.removeItem(at: root) } }

        // The store: the cached fixture of `count` activities (closed, with its snapshot),
        // copied and flushed, so that the writer phases never change the cache.
        let store = root.appending(path: "store")
        try copyTree(try await EventKernelFixtures.store(n: count), to: store)
        let storeBytes = diskBytes(store), storeSegmentBytes = segmentBytes(store)

        // Full copies, alternated so that a drift of the machine (other builds) falls on both.
        // Neither drops anything from the page cache: both read the store from a warm cache.
        var cpTimes: [Duration] = [], cpSyncTimes: [Duration] = [], cpBytes = 0
        var backupTimes: [Duration] = [], backupBytes = 0
        var lastBackup = root
        for round in 1...rounds {
            let cpDestination = root.appending(path: "cp-\(round)")
            var started = ContinuousClock.now
            try copyWithCp(store, to: cpDestination)
            cpTimes.append(ContinuousClock.now - started)
            // Not part of the cp figure: what a durable cp would add (the backup syncs every
            // file and directory it writes), and so that cp's dirty pages are not written back
            // while the next backup runs.
            try flushToDisk(cpDestination)
            cpSyncTimes.append(ContinuousClock.now - started)
            cpBytes = diskBytes(cpDestination)
            try FileManager.default.removeItem(at: cpDestination)

            let destination = root.appending(path: "backup-\(round)")
            started = ContinuousClock.now
            let report = try await EventStore.backup(storeAt: store, to: destination)
            backupTimes.append(ContinuousClock.now - started)
            backupBytes = Int(report.copiedBytes) + manifestBytes(destination)
            if round < rounds { try FileManager.default.removeItem(at: destination) } else { lastBackup = destination }
        }
        let cp = median(cpTimes), cpSync = median(cpSyncTimes), full = median(backupTimes)
        let cpThroughput = Double(cpBytes) / seconds(cp), backupThroughput = Double(backupBytes) / seconds(full)
        let throughputRatio = backupThroughput / cpThroughput

        // The writer: the store's normal durable path, one activity per synced append, with the
        // store's default snapshot policy.
        let repository = try EventKernelFixtures.open(store, durability: .synced, snapshots: .default)
        let log = repository.store.log as! SegmentedLog
        let stream = AddStream(seed: 11)
        // The first synced appends of a freshly opened store pay one-time costs (the file's
        // first extension, the checkpoint): not a quiet run's.
        for model in stream.next(200) { try await repository.add(model) }
        // Quiet blocks alternate with blocks beside full backups run back to back (each into a
        // fresh directory, through the API `eventkernel backup` uses; only appends that began
        // while a backup ran count), so that a drift of the shared disk falls on both.
        var quiet: [Duration] = [], loud: (latencies: [Duration], backups: Int) = ([], 0)
        for _ in 0..<writerBlocks {
            quiet += try await appendLatencies(repository, stream.next(writes / writerBlocks))
            let block = try await appendLatenciesBesideBackups(repository, stream.next(writes / writerBlocks), store: store, root: root)
            loud = (loud.latencies + block.latencies, loud.backups + block.backups)
        }
        let quietP99 = percentile(quiet, 0.99), loudP99 = percentile(loud.latencies, 0.99)
        let latencyRatio = seconds(loudP99) / seconds(quietP99)

        // The incremental backup: the last full backup brought up to date first (not measured:
        // the writer phases appended since), then 10,000 activities, then the measured one.
        let catchUpStarted = ContinuousClock.now
        let catchUp = try await EventStore.backup(storeAt: store, to: lastBackup)
        let catchUpTime = ContinuousClock.now - catchUpStarted
        precondition(catchUp.incremental, "the catch-up backup did not build on the last full backup")
        // Rounds of 10,000 activities then an incremental backup (as many as of the full
        // backup); the median time, and the round whose bytes were the most above the log's.
        var incrementalTimes: [Duration] = []
        var logAdded = 0, incrementalBytes = 0, directoryGrowth = 0, positionBefore: LogPosition = 0, positionAfter: LogPosition = 0
        var incremental: BackupReport?
        for _ in 1...rounds {
            let logBefore = segmentBytes(store), roundStart = log.bounds.nextPosition
            for model in stream.next(increment) { try await repository.add(model) }
            let added = segmentBytes(store) - logBefore
            let directoryBefore = diskBytes(lastBackup)
            let started = ContinuousClock.now
            let report = try await EventStore.backup(storeAt: store, to: lastBackup)
            incrementalTimes.append(ContinuousClock.now - started)
            let written = Int(report.copiedBytes) + manifestBytes(lastBackup)
            let end = log.bounds.nextPosition
            // The backup must be what it claims, or its figures mean nothing: incremental, at
            // the writer's position, and every file as its manifest lists it.
            precondition(report.incremental, "the incremental backup did not build on the earlier one")
            precondition(report.manifest.nextPosition == end, "the incremental backup ends at \(report.manifest.nextPosition), the store at \(end)")
            try checkAgainstManifest(lastBackup)
            if incremental == nil || Double(written) / Double(max(1, added)) > Double(incrementalBytes) / Double(max(1, logAdded)) {
                (logAdded, incrementalBytes, incremental) = (added, written, report)
                (directoryGrowth, positionBefore, positionAfter) = (diskBytes(lastBackup) - directoryBefore, roundStart, end)
            }
        }
        let incrementalTime = median(incrementalTimes)
        try await repository.close()
        let incrementalReport = incremental!
        let bytesRatio = Double(incrementalBytes) / Double(max(1, logAdded))
        let timeRatio = seconds(incrementalTime) / seconds(full)

        let bars: [(String, Bool)] = [
            ("full backup throughput >= 0.7x cp -r", throughputRatio >= 0.7),
            ("writer's synced p99 beside a backup <= 2x quiet", latencyRatio <= 2),
            ("incremental writes <= 1.2x the log bytes added", bytesRatio <= 1.2),
            ("incremental time < 0.1x the full backup's", timeRatio < 0.1),
        ]
        func row(_ label: String, _ value: String) { print(label.padding(toLength: 52, withPad: " ", startingAt: 0) + value) }
        print("backup probe: \(count) activities, store \(mb(storeBytes)) (\(mb(storeSegmentBytes)) of segments), \(rounds) rounds, medians")
        print("(cp -r and the backup both read the store from a warm page cache: nothing is dropped from it)")
        row("cp -r", "\(ms(cp)), \(mb(cpBytes)), \(mbps(cpThroughput))")
        row("cp -r, then fsync of every file (not the bar)", "\(ms(cpSync))")
        row("full backup (EventStore.backup(storeAt:to:))", "\(ms(full)), \(mb(backupBytes)), \(mbps(backupThroughput))")
        row("backup / cp -r throughput", String(format: "%.2fx", throughputRatio))
        row("writer, synced, quiet: p50 / p99", "\(ms(percentile(quiet, 0.5))) / \(ms(quietP99)) (\(quiet.count) appends, \(writerBlocks) blocks)")
        row("writer, synced, beside backups: p50 / p99", "\(ms(percentile(loud.latencies, 0.5))) / \(ms(loudP99)) (\(loud.latencies.count) appends during \(loud.backups) backups)")
        row("p99 beside backups / quiet", String(format: "%.2fx", latencyRatio))
        row("catch-up incremental (not a bar)", "\(ms(catchUpTime)), \(mb(Int(catchUp.copiedBytes)))")
        row("log bytes added by \(increment) activities", "\(kb(logAdded)) (positions \(positionBefore)..<\(positionAfter); the round of the highest ratio of \(rounds))")
        row("incremental backup: written (files + manifest)", "\(kb(incrementalBytes)) (\(incrementalReport.copiedFiles.count) files; directory grew \(kb(directoryGrowth)))")
        row("  of which", incrementalReport.copiedFiles.joined(separator: ", ") + " + \(BackupManifest.fileName)")
        row("incremental written / log bytes added", String(format: "%.2fx", bytesRatio))
        row("incremental backup time (median) / full backup's", "\(ms(incrementalTime)) / \(ms(full)) = \(String(format: "%.3fx", timeRatio))")
        for (label, passed) in bars { print("\(passed ? "PASS" : "MISS")  \(label)") }
        if json {
            let object: [String: Any] = [
                "activities": count, "rounds": rounds, "writesPerPhase": writes, "storeBytes": storeBytes,
                "cpMilliseconds": milliseconds(cp), "cpBytes": cpBytes, "cpFsyncMilliseconds": milliseconds(cpSync),
                "backupMilliseconds": milliseconds(full), "backupBytes": backupBytes, "throughputRatio": throughputRatio,
                "quietP50Milliseconds": milliseconds(percentile(quiet, 0.5)), "quietP99Milliseconds": milliseconds(quietP99),
                "besideBackupP50Milliseconds": milliseconds(percentile(loud.latencies, 0.5)), "besideBackupP99Milliseconds": milliseconds(loudP99),
                "besideBackupAppends": loud.latencies.count, "besideBackups": loud.backups, "p99Ratio": latencyRatio,
                "logBytesAdded": logAdded, "incrementalBytes": incrementalBytes, "incrementalMilliseconds": milliseconds(incrementalTime),
                "incrementalBytesRatio": bytesRatio, "incrementalTimeRatio": timeRatio,
                "bars": Dictionary(uniqueKeysWithValues: zip(["throughput", "writerP99", "incrementalBytes", "incrementalTime"], bars.map(\.1))),
            ]
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        }
    }

    /// Full backups of `store`, each into a fresh directory (removed after it), one after the
    /// other: the full backup alone, for `perf record`.
    static func repeatFull(_ store: URL, repeats: Int) async throws {
        var times: [Duration] = []
        for round in 0..<repeats {
            let destination = BenchEnv.scratch("backup-full-\(round)")
            let started = ContinuousClock.now
            let report = try await EventStore.backup(storeAt: store, to: destination)
            times.append(ContinuousClock.now - started)
            print("backup-full: \(ms(times.last!)), \(mb(Int(report.copiedBytes)))")
            try FileManager.default.removeItem(at: destination)
        }
        print("backup-full: median \(ms(median(times))) of \(repeats)")
    }

    /// Backups of `store` into `destination`, one after the other: after the first, each is an
    /// incremental backup with nothing new, its fixed cost (for `perf record`).
    static func repeatInto(_ store: URL, _ destination: URL, repeats: Int) async throws {
        var times: [Duration] = []
        for _ in 0..<repeats {
            let started = ContinuousClock.now
            let report = try await EventStore.backup(storeAt: store, to: destination)
            times.append(ContinuousClock.now - started)
            print("backup-into: \(ms(times.last!)), \(report.incremental ? "incremental" : "full"), \(kb(Int(report.copiedBytes)))")
        }
        print("backup-into: median \(ms(median(times))) of \(repeats)")
    }

    /// `cp -r SOURCE DESTINATION`, the tool itself (not a reimplementation of it).
    static func copyWithCp(_ source: URL, to destination: URL) throws {
        let process = Process()
        process.executableURL = URL(filePath: "/bin/cp")
        process.arguments = ["-r", source.path, destination.path]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "cp -r exited with \(process.terminationStatus)"])
        }
    }

    /// Each synced append's wall time, one after the other.
    static func appendLatencies(_ repository: EventSourcedActivityRepository, _ models: [ActivityModel]) async throws -> [Duration] {
        var latencies: [Duration] = []
        latencies.reserveCapacity(models.count)
        for model in models {
            let started = ContinuousClock.now
            try await repository.add(model)
            latencies.append(ContinuousClock.now - started)
        }
        return latencies
    }

    /// ``appendLatencies(_:_:)`` while full backups of `store` run back to back, each into a
    /// fresh directory under `root` (removed after it); only the appends that began while a
    /// backup was running are kept.
    static func appendLatenciesBesideBackups(
        _ repository: EventSourcedActivityRepository, _ models: [ActivityModel], store: URL, root: URL
    ) async throws -> (latencies: [Duration], backups: Int) {
        let running = BackupWindow()
        let backups = Task {
            var completed = 0
            while !Task.isCancelled {
                let destination = root.appending(path: "beside-\(completed)")
                running.set(true)
                _ = try await EventStore.backup(storeAt: store, to: destination)
                running.set(false)
                completed += 1
                try FileManager.default.removeItem(at: destination)
            }
            return completed
        }
        // The writer starts once the first backup has.
        while !running.get() { try await Task.sleep(for: .milliseconds(1)) }
        var latencies: [Duration] = []
        latencies.reserveCapacity(models.count)
        for model in models {
            let during = running.get()
            let started = ContinuousClock.now
            try await repository.add(model)
            if during { latencies.append(ContinuousClock.now - started) }
        }
        backups.cancel()
        let completed = try await backups.value
        return (latencies, completed)
    }

    /// Whether a backup is running now (the writer reads it before each append).
    final class BackupWindow: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        func set(_ running: Bool) { lock.withLock { value = running } }
        func get() -> Bool { lock.withLock { value } }
    }

    /// Every file the backup's manifest lists is there with its size and CRC32C
    /// (`BackupManifest.check(in:)`, what `restore` checks first), so that the probe never
    /// reports the figures of a wrong backup.
    static func checkAgainstManifest(_ backup: URL) throws {
        _ = try BackupManifest.check(in: backup)
    }

    /// The bytes of the store's segment files (`*.log`): what the log holds.
    static func segmentBytes(_ store: URL) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: store.path)) ?? []
        return names.filter { $0.hasSuffix(".log") }.reduce(0) { $0 + diskBytes(store.appending(path: $1)) }
    }

    static func manifestBytes(_ backup: URL) -> Int { diskBytes(backup.appending(path: BackupManifest.fileName)) }

    static func median(_ values: [Duration]) -> Duration { values.sorted()[values.count / 2] }

    /// The nearest-rank percentile.
    static func percentile(_ values: [Duration], _ p: Double) -> Duration {
        guard !values.isEmpty else { return .zero }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))]
    }

    static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
    static func milliseconds(_ d: Duration) -> Double { (seconds(d) * 1e6).rounded() / 1e3 }
    static func ms(_ d: Duration) -> String { String(format: "%.3f ms", seconds(d) * 1e3) }
    static func mb(_ bytes: Int) -> String { String(format: "%.1f MB", Double(bytes) / 1e6) }
    static func kb(_ bytes: Int) -> String { String(format: "%.1f kB", Double(bytes) / 1e3) }
    static func mbps(_ bytesPerSecond: Double) -> String { String(format: "%.0f MB/s", bytesPerSecond / 1e6) }
}
