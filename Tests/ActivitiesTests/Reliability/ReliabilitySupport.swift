import Activities
import EventKernel
import EventLog
import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Shared pieces of the Activities reliability suites.
enum Reliability {
    /// `EVENTKERNEL_TEST_SCALE=small` (sanitizer runs) shrinks the heavy suites.
    static let isSmall = ProcessInfo.processInfo.environment["EVENTKERNEL_TEST_SCALE"] == "small"
    static func pick<T>(_ full: T, small: T) -> T { isSmall ? small : full }

    /// An integer from the environment, or `defaultValue`.
    static func environmentInt(_ name: String, default defaultValue: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap { Int($0) } ?? defaultValue
    }

    /// The built products directory (where `ActivitiesTestHelper` is).
    static func productsDirectory() -> URL {
        var directory = URL(filePath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appending(path: "ActivitiesTestHelper").path),
              directory.path != "/" {
            directory = directory.deletingLastPathComponent()
        }
        return directory
    }

    static var helper: URL { productsDirectory().appending(path: "ActivitiesTestHelper") }

    /// Every activity, oldest first.
    static func all(_ repository: EventSourcedActivityRepository) throws -> [ActivityModel] {
        try repository.activities(matching: ActivityQuery(sortOrder: .oldestFirst))
    }

    /// The `<store>/snapshots/` files, sorted.
    static func snapshotFiles(_ store: URL, includingHidden: Bool = false) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: store.appending(path: "snapshots").path)) ?? []
        return names.filter { includingHidden || !$0.hasPrefix(".") }.sorted()
    }

    /// Whether this process can bypass file permissions (root, CAP_DAC_OVERRIDE).
    static var bypassesPermissions: Bool { geteuid() == 0 }
}

/// A fresh temporary directory, removed when the value is released.
final class ReliabilityDirectory: Sendable {
    let url: URL
    var path: String { url.path }
    init(_ label: String) {
        url = FileManager.default.temporaryDirectory
            .appending(path: "\(label)-\(UUID().uuidString.prefix(8))", directoryHint: .isDirectory)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit {
        chmod(url.path, 0o755)
        try? FileManager.default.removeItem(at: url)
    }
    func file(_ name: String) -> URL { url.appending(path: name) }
}

/// Activity `i` of the crash tests; the same as in Tests/ActivitiesTestHelper/main.swift.
func crashModel(_ i: Int) -> ActivityModel {
    let id = UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", i))!
    let start = Date(timeIntervalSince1970: 1_700_000_000 + Double(i) * 61.25)
    let end: Date? = i % 3 == 0 ? nil : start.addingTimeInterval(Double(i % 97) * 10.5)
    let types: [ActivityType] = [.sleep, "feeding", "bath", .tummyTime, ActivityType(rawValue: "custom-\(i % 11)")]
    return ActivityModel(id: id, startDate: start, endDate: end, type: types[i % types.count])
}

/// SplitMix64: deterministic, so a failing trial can be replayed from its seed.
struct ReliabilityRNG: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A `LogHandler` that keeps every message (for asserting that ignored snapshots are logged).
final class RecordingLog: Sendable {
    struct Entry: Sendable { var level: Logger.Level; var message: String; var metadata: String }
    private let entries = Mutex<[Entry]>([])

    var logger: Logger {
        Logger(label: "test") { _ in Handler(sink: self) }
    }
    var all: [Entry] { entries.withLock { $0 } }
    func reset() { entries.withLock { $0.removeAll() } }
    func append(_ entry: Entry) { entries.withLock { $0.append(entry) } }

    struct Handler: LogHandler {
        let sink: RecordingLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.MetadataValue? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            sink.append(Entry(level: event.level, message: "\(event.message)", metadata: "\(event.metadata ?? [:])"))
        }
    }
}
