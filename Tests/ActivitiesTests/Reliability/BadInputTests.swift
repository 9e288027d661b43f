@testable import Activities
import EventKernel
import EventLog
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
import EventKernelTestSupport

/// Bad input everywhere: each case must get a clear error (or be accepted and round-trip
/// exactly), and everything acknowledged before must be intact after a reopen.
@Suite("Reliability: bad input", .serialized)
struct BadInputTests {
    /// A store with `count` activities; returns the directory and what it holds.
    static func seeded(_ directory: TemporaryDirectory, count: Int = 20) async throws -> (URL, [ActivityModel]) {
        let store = directory.file("store")
        let repository = try EventSourcedActivityRepository.open(at: store)
        for i in 0..<count { try await repository.add(crashModel(i)) }
        let all = try Reliability.all(repository)
        try await repository.close()
        return (store, all)
    }

    /// Reopens and compares with what was acknowledged.
    static func expectIntact(_ store: URL, _ expected: [ActivityModel], _ context: String) async throws {
        let repository = try EventSourcedActivityRepository.open(at: store)
        #expect(try Reliability.all(repository) == expected, "\(context): data changed")
        #expect(repository.projection.integrityIssues.isEmpty, "\(context)")
        try await repository.close()
    }

    static func invalidQueryMessage(_ body: () throws -> Void) -> String? {
        do { try body(); return nil } catch RepositoryError.invalidQuery(let message) { return message } catch { return "unexpected \(error)" }
    }

    @Test func malformedQueries() async throws {
        let directory = TemporaryDirectory("ek-badq")
        let (store, expected) = try await Self.seeded(directory)
        let repository = try EventSourcedActivityRepository.open(at: store)
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let cases: [(String, ActivityQuery, String)] = [
            ("negative limit", ActivityQuery(limit: -1), "limit"),
            ("negative offset", ActivityQuery(offset: -5), "offset"),
            ("after > before", ActivityQuery(afterDate: now, beforeDate: now - 1), "afterDate"),
        ]
        for (what, query, word) in cases {
            let message = Self.invalidQueryMessage { _ = try repository.activities(matching: query) }
            #expect(message?.contains(word) == true, "\(what): \(message ?? "no error")")
            // Through the async protocol too.
            await #expect(throws: RepositoryError.self, "\(what)") { _ = try await repository.fetch(query: query) }
        }
        let range = ActivityRangeQuery(.overlapping, from: now, to: now - 10)
        #expect(Self.invalidQueryMessage { _ = try repository.activities(in: range) }?.contains("before its start") == true)
        #expect(Self.invalidQueryMessage { _ = try repository.activities(in: ActivityRangeQuery(.startingIn, from: now, to: now, limit: -2)) }?.contains("limit") == true)
        // NaN bounds or cursor: rejected (a NaN compares false with everything).
        let nan = Date(timeIntervalSinceReferenceDate: .nan)
        for (n, query) in [ActivityQuery(afterDate: nan), ActivityQuery(beforeDate: nan), ActivityQuery(afterDate: nan, beforeDate: nan),
                           ActivityQuery(cursor: ActivityCursor(startDate: nan, id: UUID()))].enumerated() {
            let message = Self.invalidQueryMessage { _ = try repository.activities(matching: query) }
            #expect(message?.contains("NaN") == true, "NaN query #\(n): \(message ?? "accepted")")
        }
        for (n, range) in [ActivityRangeQuery(.overlapping, from: nan, to: nan), ActivityRangeQuery(.startingIn, from: nan, to: now)].enumerated() {
            let message = Self.invalidQueryMessage { _ = try repository.activities(in: range) }
            #expect(message?.contains("NaN") == true, "NaN range #\(n): \(message ?? "accepted")")
        }
        let infinite = try repository.activities(matching: ActivityQuery(afterDate: .init(timeIntervalSince1970: -.infinity), beforeDate: .init(timeIntervalSince1970: .infinity)))
        #expect(infinite.count == expected.count)
        try await repository.close()
        try await Self.expectIntact(store, expected, "after malformed queries")
    }

    @Test func extremeAndInvalidDates() async throws {
        let directory = TemporaryDirectory("ek-baddates")
        var (store, expected) = try await Self.seeded(directory)
        let repository = try EventSourcedActivityRepository.open(at: store)
        // Not finite: rejected with a message, nothing written.
        for bad in [Double.nan, .infinity, -.infinity] {
            let date = Date(timeIntervalSinceReferenceDate: bad)
            await #expect(throws: RepositoryError.self) { try await repository.add(ActivityModel(startDate: date, type: .sleep)) }
            await #expect(throws: RepositoryError.self) { try await repository.end(id: expected[0].id, at: date) }
            await #expect(throws: RepositoryError.self) {
                try await repository.add(ActivityModel(startDate: .now, endDate: date, type: .sleep))
            }
        }
        // Year 3000, distant past/future, the largest finite values, fractions that the 1970-based
        // conversion would round: accepted and read back exactly (also after a reopen).
        let year3000 = Date(timeIntervalSince1970: 32_503_680_000.123456)
        let starts = [year3000, .distantPast, .distantFuture, Date(timeIntervalSinceReferenceDate: -.greatestFiniteMagnitude),
                      Date(timeIntervalSinceReferenceDate: 781_692_800.98614120483), Date(timeIntervalSinceReferenceDate: .leastNonzeroMagnitude),
                      Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -1e-9)]
        for (n, start) in starts.enumerated() {
            let model = ActivityModel(id: UUID(), startDate: start, type: ActivityType(rawValue: "extreme-\(n)"))
            try await repository.add(model)
            expected.append(model)
        }
        // End far in the future, and exactly at the start.
        let endFar = Date(timeIntervalSinceReferenceDate: .greatestFiniteMagnitude)
        try await repository.end(id: expected[0].id, at: endFar)
        expected[0].endDate = endFar
        let sameInstant = expected[expected.count - 3]
        try await repository.end(id: sameInstant.id, at: sameInstant.startDate)
        expected[expected.count - 3].endDate = sameInstant.startDate
        // An end before the start: rejected.
        await #expect(throws: RepositoryError.self) { try await repository.end(id: expected[1].id, at: .distantPast) }
        expected.sort { ActivityCursor(after: $0) < ActivityCursor(after: $1) }
        #expect(try Reliability.all(repository) == expected)
        // Random fractional dates round-trip exactly through the log (schema 2 events).
        var rng = SplitMix64(seed: 7)
        var random: [ActivityModel] = []
        for _ in 0..<200 {
            let model = ActivityModel(startDate: Date(timeIntervalSinceReferenceDate: Double.random(in: -4e9...4e9, using: &rng)), type: "random")
            try await repository.add(model)
            random.append(model)
        }
        expected = (expected + random).sorted { ActivityCursor(after: $0) < ActivityCursor(after: $1) }
        try await repository.close()
        try await Self.expectIntact(store, expected, "extreme dates")
        // Without snapshots, from the log alone, too.
        try FileManager.default.removeItem(at: store.appending(path: "snapshots"))
        try await Self.expectIntact(store, expected, "extreme dates, replayed from the log")
    }

    @Test func hugeActivityType() async throws {
        let directory = TemporaryDirectory("ek-huge")
        var (store, expected) = try await Self.seeded(directory)
        let repository = try EventSourcedActivityRepository.open(at: store)
        // 16 MiB is accepted too but takes ~28 s in debug builds: EVENTKERNEL_HUGE_TYPE_BYTES=16777216.
        let hugeSize = environmentInt("EVENTKERNEL_HUGE_TYPE_BYTES", default: testScale.pick(2 << 20, small: 1 << 20))
        var huge = ActivityModel(startDate: Date(timeIntervalSince1970: 1_800_000_000), type: ActivityType(rawValue: String(repeating: "x", count: hugeSize)))
        var outcome = ""
        do {
            try await repository.add(huge)
            expected.append(huge)
            outcome = "accepted"
        } catch let error as LogError {
            #expect(error.code == .tooLarge || error.code == .invalidArgument, "\(error)")
            #expect(error.message.contains("large") || error.message.contains("bytes"), "\(error)")
            outcome = "rejected: \(error)"
        } catch let error as RepositoryError {
            outcome = "rejected: \(error)"
            #expect(!error.description.isEmpty)
        }
        // The store keeps working either way.
        let after = crashModel(1_000)
        try await repository.add(after)
        expected.append(after)
        // A huge but incompressible type as well (random letters).
        var rng = SplitMix64(seed: 3)
        huge.id = UUID()
        huge.type = ActivityType(rawValue: String(decoding: (0..<(hugeSize / 4)).map { _ in UInt8.random(in: 97...122, using: &rng) }, as: UTF8.self))
        do { try await repository.add(huge); expected.append(huge) } catch { outcome += "; incompressible rejected: \(error)" }
        expected.sort { ActivityCursor(after: $0) < ActivityCursor(after: $1) }
        #expect(try Reliability.all(repository) == expected)
        try await repository.close()
        try await Self.expectIntact(store, expected, "huge type (\(outcome.prefix(200)))")
        print("huge activity type of \(hugeSize) bytes: \(outcome.prefix(300))")
    }

    @Test func storeDirectoryIsAFile() async throws {
        let directory = TemporaryDirectory("ek-file")
        let file = directory.file("store")
        try Data("not a store".utf8).write(to: file)
        do {
            _ = try EventSourcedActivityRepository.open(at: file)
            Issue.record("opening a regular file as a store succeeded")
        } catch let error as RepositoryError {
            #expect(error.logError != nil, "\(error)")
            #expect(error.description.contains(file.path), "\(error)")
        }
        #expect(throws: (any Error).self) { _ = try EventSourcedActivityRepository.openReadOnly(at: file) }
        #expect(try Data(contentsOf: file) == Data("not a store".utf8), "the file was modified")
        // A store whose snapshots path is a file: snapshots fail, data does not.
        let second = TemporaryDirectory("ek-file2")
        let (store, expected) = try await Self.seeded(second, count: 5)
        try FileManager.default.removeItem(at: store.appending(path: "snapshots"))
        try Data("x".utf8).write(to: store.appending(path: "snapshots"))
        let repository = try EventSourcedActivityRepository.open(at: store)
        await #expect(throws: RepositoryError.self) { try await repository.store.writeSnapshots() }
        try await repository.add(crashModel(99))
        try await repository.close()  // logs the failed snapshot, closes the log
        try await Self.expectIntact(store, expected + [crashModel(99)], "snapshots path is a file")
    }

    @Test(.enabled(if: geteuid() != 0, "runs as root: permission checks are bypassed, so an unwritable directory cannot be simulated with chmod"))
    func unwritableDirectory() async throws {
        let directory = TemporaryDirectory("ek-ro")
        let (store, expected) = try await Self.seeded(directory, count: 5)
        chmod(store.path, 0o500)
        defer { chmod(store.path, 0o755) }
        #expect(throws: (any Error).self) { _ = try EventSourcedActivityRepository.open(at: store) }
        let reader = try EventSourcedActivityRepository.openReadOnly(at: store)
        #expect(try Reliability.all(reader) == expected)
        try await reader.close()
        chmod(store.path, 0o755)
        try await Self.expectIntact(store, expected, "unwritable directory")
    }

    @Test func lockHeldByAnotherProcess() async throws {
        let directory = TemporaryDirectory("ek-lock")
        let (store, expected) = try await Self.seeded(directory, count: 10)
        let holder = Process()
        holder.executableURL = builtExecutable("ActivitiesTestHelper")
        holder.arguments = ["hold", store.path]
        let input = Pipe(), output = Pipe()
        holder.standardInput = input
        holder.standardOutput = output
        try holder.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        #expect(line.hasPrefix("holding"), "helper: \(line)")
        do {
            _ = try EventSourcedActivityRepository.open(at: store)
            Issue.record("a second writer opened a locked store")
        } catch let error as RepositoryError {
            #expect(error.logError?.code == .locked, "\(error)")
            #expect(error.description.contains("lock"), "\(error)")
        }
        // Readers work alongside the writer.
        let reader = try EventSourcedActivityRepository.openReadOnly(at: store)
        #expect(try Reliability.all(reader) == expected)
        try await reader.close()
        try input.fileHandleForWriting.close()
        holder.waitUntilExit()
        #expect(holder.terminationStatus == 0)
        try await Self.expectIntact(store, expected, "after the lock holder exited")
    }
}
