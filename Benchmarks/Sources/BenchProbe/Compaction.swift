// Issue 27's compaction bars, measured in one run: a store of `count` activities with every
// other one purged compacts, while a synced writer appends, to a share of its segment bytes;
// compaction throughput (segment bytes read per second) against `cp -r` of the same store; the
// writer's p99 beside the compaction against a quiet run's. Not a benchmark (one process, a few
// rounds, medians): PASS/MISS per bar is printed, and a miss does not fail anything.
import Activities
import BenchFixtures
import EventKernel
import EventLog
import Foundation

enum CompactionProbe {
    /// Rounds (fresh copies of the purged store), medians (EVENTKERNEL_PROBE_ROUNDS, default 3).
    static let rounds = max(1, Int(ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_ROUNDS"] ?? "") ?? 3)

    static func run(count: Int) async throws {
        let root = BenchEnv.scratch("compaction")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let keep = ProcessInfo.processInfo.environment["EVENTKERNEL_PROBE_KEEP"] == "1"
        defer { if keep { print("kept: \(root.path)") } else { try? FileManager.default.removeItem(at: root) } }

        // The purged store: the cached fixture, every other live activity purged (in batches
        // of 10,000, buffered), closed with its snapshots.
        let purgedStore = root.appending(path: "purged")
        try copyTree(try await EventKernelFixtures.store(n: count), to: purgedStore)
        var purgedCount = 0
        do {
            let repository = try EventKernelFixtures.open(purgedStore, durability: .buffered, snapshots: SnapshotPolicy(everyEvents: nil, onClose: true))
            let live = try repository.activities(matching: ActivityQuery(sortOrder: .oldestFirst))
            let doomed = live.enumerated().filter { $0.offset % 2 == 0 }.map(\.element.id)
            var start = 0
            while start < doomed.count {
                let slice = Array(doomed[start..<min(start + 10_000, doomed.count)])
                _ = try await repository.purgeAll(ids: slice)
                start += slice.count
            }
            purgedCount = doomed.count
            try await repository.close()
        }
        let segmentsBefore = BackupProbe.segmentBytes(purgedStore)

        var cpTimes: [Duration] = [], compactTimes: [Duration] = [], ratios: [Double] = []
        var quiet: [Duration] = [], loud: [Duration] = []
        var last: CompactionReport?
        for round in 1...rounds {
            let cpDestination = root.appending(path: "cp-\(round)")
            var started = ContinuousClock.now
            try BackupProbe.copyWithCp(purgedStore, to: cpDestination)
            cpTimes.append(ContinuousClock.now - started)
            try flushToDisk(cpDestination)
            try FileManager.default.removeItem(at: cpDestination)

            let store = root.appending(path: "store-\(round)")
            try copyTree(purgedStore, to: store)
            try flushToDisk(store)
            let repository = try EventKernelFixtures.open(store, durability: .synced, snapshots: .default)
            let stream = AddStream(seed: UInt64(round))
            for model in stream.next(100) { try await repository.add(model) }
            quiet += try await BackupProbe.appendLatencies(repository, stream.next(500))
            // The writer appends, synced, for as long as the compaction runs.
            let running = BackupProbe.BackupWindow()
            running.set(true)
            let writer = Task {
                var latencies: [Duration] = []
                while running.get() {
                    latencies += try await BackupProbe.appendLatencies(repository, stream.next(1))
                }
                return latencies
            }
            started = ContinuousClock.now
            let report = try await repository.store.compact()
            compactTimes.append(ContinuousClock.now - started)
            running.set(false)
            loud += try await writer.value
            ratios.append(Double(BackupProbe.segmentBytes(store)) / Double(segmentsBefore))
            last = report
            try await repository.close()
            try FileManager.default.removeItem(at: store)
        }
        let report = last!
        let cp = BackupProbe.median(cpTimes), compact = BackupProbe.median(compactTimes)
        let cpThroughput = Double(diskBytes(purgedStore)) / BackupProbe.seconds(cp)
        let compactThroughput = Double(report.bytesBefore) / BackupProbe.seconds(compact)
        let throughputRatio = compactThroughput / cpThroughput
        let bytesRatio = ratios.sorted()[ratios.count / 2]
        let quietP99 = BackupProbe.percentile(quiet, 0.99), loudP99 = BackupProbe.percentile(loud, 0.99)
        let latencyRatio = BackupProbe.seconds(loudP99) / BackupProbe.seconds(quietP99)
        let bars: [(String, Bool)] = [
            ("segments after <= 0.55x before", bytesRatio <= 0.55),
            ("compaction throughput >= 0.5x cp -r", throughputRatio >= 0.5),
            ("writer's synced p99 beside compaction <= 2x quiet", latencyRatio <= 2),
        ]
        func row(_ label: String, _ value: String) { print(label.padding(toLength: 52, withPad: " ", startingAt: 0) + value) }
        print("compaction probe: \(count) activities, \(purgedCount) purged, \(rounds) rounds, medians")
        row("segments before", BackupProbe.mb(segmentsBefore))
        row("segments after / before (writer appending)", String(format: "%.3fx", bytesRatio))
        row("cp -r of the store", "\(BackupProbe.ms(cp)), \(BackupProbe.mbps(cpThroughput))")
        row("compact()", "\(BackupProbe.ms(compact)), \(BackupProbe.mbps(compactThroughput)) of segments read")
        row("compaction / cp -r throughput", String(format: "%.2fx", throughputRatio))
        row("last report", "\(report.streamsForgotten) forgotten, \(report.eventsRemoved) removed, \(report.segmentsRewritten)/\(report.segmentsRead) segments rewritten")
        row("writer, synced, quiet: p50 / p99", "\(BackupProbe.ms(BackupProbe.percentile(quiet, 0.5))) / \(BackupProbe.ms(quietP99)) (\(quiet.count) appends)")
        row("writer, synced, beside compaction: p50 / p99", "\(BackupProbe.ms(BackupProbe.percentile(loud, 0.5))) / \(BackupProbe.ms(loudP99)) (\(loud.count) appends)")
        row("p99 beside compaction / quiet", String(format: "%.2fx", latencyRatio))
        for (bar, met) in bars { row(bar, met ? "PASS" : "MISS") }
    }
}
