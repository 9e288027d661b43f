import EventKernel
import EventKernelTestSupport
import Foundation
import Testing

/// Issue 28, item 5: closing a store twice at the same position writes byte-identical
/// snapshot files. Swift seeds `Dictionary` and `Set` iteration per process, so the snapshots
/// are written by two child processes (`ActivitiesTestHelper snapshot-close`), each opening a
/// copy of the same log; a comparison within one process could pass by luck.
@Suite struct SnapshotDeterminismTests {
    /// Runs the helper's `snapshot-close` on `directory`, with Swift's hashing seeded at random
    /// (the default, said explicitly: a deterministic seed would hide the bug).
    static func closeInChild(_ directory: URL) throws {
        let process = Process()
        process.executableURL = builtExecutable("ActivitiesTestHelper")
        process.arguments = ["snapshot-close", directory.path]
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_DETERMINISTIC_HASHING"] = nil
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        process.waitUntilExit()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(text.hasPrefix("closed "), "\(text)")
    }

    /// The snapshot files of a store, by name.
    static func snapshots(in store: URL) throws -> [String: Data] {
        let directory = store.appending(path: "snapshots")
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where name.hasSuffix(".snap") {
            files[name] = try Data(contentsOf: directory.appending(path: name))
        }
        return files
    }

    @Test func twoProcessesClosingTheSameLogWriteTheSameSnapshotBytes() async throws {
        let scratch = TemporaryDirectory("determinism")
        let source = scratch.file("source")
        let (store, repository) = try SnapshotDeterminism.open(at: source, snapshotPolicy: .never)
        try await SnapshotDeterminism.write(store, repository)
        try await store.close()
        var runs: [[String: Data]] = []
        for run in 0..<3 {
            let copy = scratch.file("copy\(run)")
            try FileManager.default.copyItem(at: source, to: copy)
            try? FileManager.default.removeItem(at: copy.appending(path: "snapshots"))
            try Self.closeInChild(copy)
            runs.append(try Self.snapshots(in: copy))
        }
        // The version table, the repository and the JSON projection each wrote one.
        #expect(runs[0].count == 3, "\(runs[0].keys.sorted())")
        for run in runs.dropFirst() {
            #expect(run.keys.sorted() == runs[0].keys.sorted())
            for (name, bytes) in runs[0] {
                #expect(run[name] == bytes, "snapshot \(name) differs between two processes")
            }
        }
    }

    /// The binary entity coder writes a dictionary and a set in sorted order whatever their
    /// iteration order, and reads them back unchanged.
    @Test func binaryCoderSortsDictionariesAndSets() throws {
        let value = SnapshotDeterminism.Tagged(
            id: "x", counts: Dictionary(uniqueKeysWithValues: (0..<50).map { ("key\($0)", $0) }),
            labels: Set((0..<50).map { "label\($0)" }), byNumber: Dictionary(uniqueKeysWithValues: (0..<50).map { ($0, "v\($0)") }))
        // A dictionary built in another order (another capacity) iterates in another order.
        var reordered = SnapshotDeterminism.Tagged(id: "x", counts: [:], labels: [], byNumber: [:])
        reordered.counts.reserveCapacity(1_000)
        reordered.labels.reserveCapacity(1_000)
        reordered.byNumber.reserveCapacity(1_000)
        for i in (0..<50).reversed() {
            reordered.counts["key\(i)"] = i
            reordered.labels.insert("label\(i)")
            reordered.byNumber[i] = "v\(i)"
        }
        #expect(Array(value.counts.keys) != Array(reordered.counts.keys), "the test needs two iteration orders")
        let bytes = try BinaryEntityEncoder().encode(value)
        #expect(try BinaryEntityEncoder().encode(reordered) == bytes)
        #expect(try BinaryEntityDecoder().decode(SnapshotDeterminism.Tagged.self, from: bytes) == value)
    }
}
