// EventLog throughput: appends under each durability policy and full reads.
// Figures are records per second (throughput metric, scaled per benchmark).
import Benchmark
import BenchFixtures
import EventLog
import Foundation

private func temporaryStore(_ label: String) -> URL {
    let url = FileManager.default.temporaryDirectory.appending(path: "ek-bench-\(label)-\(UUID().uuidString.prefix(8))")
    try? FileManager.default.removeItem(at: url)
    return url
}

private func payload64(_ i: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: 64)
    var state = UInt64(truncatingIfNeeded: i) &* 0x9E37_79B9_7F4A_7C15 | 1
    // Half structured, half noise: roughly as compressible as a small binary event.
    for k in 0..<32 { bytes[k] = UInt8(truncatingIfNeeded: k &+ i) }
    for k in 32..<64 {
        state ^= state << 13; state ^= state >> 7; state ^= state << 17
        bytes[k] = UInt8(truncatingIfNeeded: state)
    }
    return bytes
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.throughput, .wallClock, .mallocCountTotal],
        timeUnits: .microseconds,
        warmupIterations: 1,
        maxDuration: .seconds(3),
        maxIterations: 1_000
    )

    // 1,000 records of 64 bytes per append call, buffered policy. Throughput counts records.
    Benchmark("Log.Append.Buffered.Batch1000x64B", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let url = temporaryStore("buffered")
        defer { try? FileManager.default.removeItem(at: url) }
        let log = try SegmentedLog.open(at: url, configuration: .init(durability: .buffered))
        let batch = (0..<1_000).map { LogEntry(timestamp: .now(), payload: payload64($0)) }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations.lowerBound..<(benchmark.scaledIterations.upperBound / 1_000) {
            _ = try await log.append(batch)
        }
        benchmark.stopMeasurement()
        try await log.close()
    }

    // One record per call from one task, synced: every call waits for its fdatasync.
    Benchmark("Log.Append.Synced.OneTask", configuration: .init(scalingFactor: .one, maxIterations: 20_000)) { benchmark in
        let url = temporaryStore("synced1")
        defer { try? FileManager.default.removeItem(at: url) }
        let log = try SegmentedLog.open(at: url)
        let entry = LogEntry(timestamp: .now(), payload: payload64(1))
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            _ = try await log.append(entry)
        }
        benchmark.stopMeasurement()
        try await log.close()
    }

    // The floor under every synced row: a bare pwrite + fdatasync loop of 100-byte records into
    // a preallocated file, as the log's active segment is (scripts/fsync_floor.py measures the
    // same with pwritev2(RWF_DSYNC) and O_DSYNC beside it).
    Benchmark("Log.Floor.PwriteFdatasync", configuration: .init(scalingFactor: .one, maxIterations: 20_000)) { benchmark in
        let url = temporaryStore("floor")
        defer { try? FileManager.default.removeItem(at: url) }
        let floor = try SyncFloor(directory: url)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { try floor.append() }
        benchmark.stopMeasurement()
    }

    // 64 tasks, one record per call each, synced: group commit shares the syncs.
    Benchmark("Log.Append.Synced.64Tasks", configuration: .init(scalingFactor: .kilo, maxIterations: 200)) { benchmark in
        let url = temporaryStore("synced64")
        defer { try? FileManager.default.removeItem(at: url) }
        let log = try SegmentedLog.open(at: url)
        let perTask = 1_000 / 64 + 1
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations.lowerBound..<(benchmark.scaledIterations.upperBound / 1_000) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for t in 0..<64 {
                    group.addTask {
                        let entry = LogEntry(timestamp: .now(), payload: payload64(t))
                        for _ in 0..<perTask { _ = try await log.append(entry) }
                    }
                }
                try await group.waitForAll()
            }
        }
        benchmark.stopMeasurement()
        try await log.close()
    }

    // A full scan of 1M 64-byte records (checksums verified, LZ4 decompressed).
    Benchmark("Log.Read.FullScan1M", configuration: .init(scalingFactor: .mega, maxIterations: 20)) { benchmark in
        let url = temporaryStore("scan")
        defer { try? FileManager.default.removeItem(at: url) }
        let log = try SegmentedLog.open(at: url, configuration: .init(durability: .buffered))
        for b in 0..<1_000 {
            _ = try await log.append((0..<1_000).map { LogEntry(timestamp: .now(), payload: payload64(b * 1_000 + $0)) })
        }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations.lowerBound..<(benchmark.scaledIterations.upperBound / 1_000_000) {
            var bytes = 0
            try log.forEachRecord(from: 0, through: nil) { record in
                bytes &+= record.payload.count
                return true
            }
            blackHole(bytes)
        }
        benchmark.stopMeasurement()
        try await log.close()
    }
}
