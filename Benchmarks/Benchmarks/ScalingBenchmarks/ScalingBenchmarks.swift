// Scaling: every open path must stay linear in history. At each size (1M, 2.5M, 5M and 10M
// activities by default; `EVENTKERNEL_BENCH_SCALING_SIZES` overrides, the smoke run uses N/4 and
// N): open from snapshot, full replay, snapshot write, verify, and a full scan decoding every
// event (the path of `eventkernel export` without its JSON). bench_table.py prints each figure
// per size with its growth per step against linear (Docs/Benchmarks.md, "Scaling").
import Activities
import Benchmark
import BenchFixtures
import EventKernel
import EventLog
import Foundation

let benchmarks: @Sendable () -> Void = {
    for n in BenchEnv.scalingSizes {
        // Few iterations: one 10M replay takes about 20 s.
        let config = BenchConfig.configuration(scalingFactor: .one, maxDuration: .seconds(20), maxIterations: 3, warmupIterations: 0)

        /// Opening a cached store: from its snapshot, or (the same log without it) by replay.
        func open(_ name: String, _ fixture: @escaping @Sendable () async throws -> URL) {
            Benchmark(name, configuration: config) { benchmark in
                let directory = try await fixture()
                benchmark.startMeasurement()
                let repository = try EventKernelFixtures.open(directory)
                blackHole(repository.count)
                benchmark.stopMeasurement()
                try await repository.close()
            }
        }
        open("Scaling.OpenSnapshot.n\(n)") { try await EventKernelFixtures.store(n: n) }
        open("Scaling.FullReplay.n\(n)") { try await EventKernelFixtures.replayOnlyStore(n: n) }

        // On a copy: the cached fixture's snapshots stay as built.
        Benchmark("Scaling.SnapshotWrite.n\(n)", configuration: config) { benchmark in
            let source = try await EventKernelFixtures.store(n: n)
            let copy = BenchEnv.scratch("scaling-snapshot")
            try copyTree(source, to: copy)
            defer { try? FileManager.default.removeItem(at: copy) }
            let repository = try EventKernelFixtures.open(copy)
            benchmark.startMeasurement()
            try await repository.store.writeSnapshots()
            benchmark.stopMeasurement()
            try await repository.close()
        }

        Benchmark("Scaling.Verify.n\(n)", configuration: config) { benchmark in
            let directory = try await EventKernelFixtures.store(n: n)
            benchmark.startMeasurement()
            blackHole(try SegmentedLog.verify(at: directory).isIntact)
            benchmark.stopMeasurement()
        }

        Benchmark("Scaling.ScanEvents.n\(n)", configuration: config) { benchmark in
            let directory = try await EventKernelFixtures.store(n: n)
            let repository = try EventKernelFixtures.open(directory)
            let codec = ActivityEventCodec()
            benchmark.startMeasurement()
            var events = 0
            try repository.store.forEachEnvelope(from: 0, through: nil) { envelope in
                blackHole(try codec.decode(envelope))
                events += 1
                return true
            }
            blackHole(events)
            benchmark.stopMeasurement()
            try await repository.close()
        }
    }
}
