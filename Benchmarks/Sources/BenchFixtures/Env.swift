// Shared settings and helpers for the benchmark targets.
import CMallocStats
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Benchmark-wide settings, read from the environment once per process.
public enum BenchEnv {
    /// The number of activities in the query, startup and footprint fixtures.
    /// `EVENTKERNEL_BENCH_N` scales it down (CI smoke: 10000). Default: 1,000,000.
    public static let n: Int = {
        if let raw = ProcessInfo.processInfo.environment["EVENTKERNEL_BENCH_N"], let v = Int(raw), v > 0 { return v }
        return 1_000_000
    }()

    /// The JSON-file peer rewrites its whole file on every save, so it runs at a smaller N
    /// (at most 10,000 activities; `EVENTKERNEL_BENCH_JSON_N` overrides).
    public static let jsonN: Int = {
        if let raw = ProcessInfo.processInfo.environment["EVENTKERNEL_BENCH_JSON_N"], let v = Int(raw), v > 0 { return v }
        return min(n, 10_000)
    }()

    /// The number of transactions in the ledger fixtures (LedgerBenchmarks):
    /// `EVENTKERNEL_BENCH_LEDGER_N`, else N (1,000,000 in `make bench`, 10,000 in the smoke run).
    public static let ledgerN: Int = {
        if let raw = ProcessInfo.processInfo.environment["EVENTKERNEL_BENCH_LEDGER_N"], let v = Int(raw), v > 0 { return v }
        return n
    }()

    /// The sizes of the scaling benchmarks: `EVENTKERNEL_BENCH_SCALING_SIZES` (comma-separated),
    /// else N/4 and N in smoke runs, else 1M, 2.5M, 5M and 10M.
    public static let scalingSizes: [Int] = {
        if let raw = ProcessInfo.processInfo.environment["EVENTKERNEL_BENCH_SCALING_SIZES"] {
            let sizes = raw.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.filter { $0 > 0 }
            if !sizes.isEmpty { return sizes }
        }
        if ProcessInfo.processInfo.environment["EVENTKERNEL_BENCH_SMOKE"] != nil { return [max(1, n / 4), n] }
        return [1_000_000, 2_500_000, 5_000_000, 10_000_000]
    }()

    /// The workload seed (ActivityHistoryGenerator).
    public static let seed: UInt64 = 42

    /// Bump when a fixture's content or format changes, so that stale cached fixtures are rebuilt.
    static let fixtureVersion = 5  // 5: envelope format 3 (id last), activity events schema 3, activity snapshot format 2 (columnar)

    /// Where fixtures are cached across benchmark processes (package-benchmark runs every
    /// benchmark in its own process, so an in-process cache alone would rebuild 1M-activity
    /// stores for each benchmark). `EVENTKERNEL_BENCH_CACHE` overrides.
    public static let cacheDirectory: URL = {
        let base: URL
        if let raw = ProcessInfo.processInfo.environment["EVENTKERNEL_BENCH_CACHE"] {
            base = URL(filePath: raw)
        } else {
            base = FileManager.default.temporaryDirectory.appending(path: "eventkernel-bench-fixtures")
        }
        try? FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        return base
    }()

    /// A fresh, empty scratch directory path (not created).
    public static func scratch(_ label: String) -> URL {
        let url = FileManager.default.temporaryDirectory.appending(path: "ek-bench-\(label)-\(UUID().uuidString.prefix(8))")
        try? FileManager.default.removeItem(at: url)
        return url
    }

    /// The end of the generated histories, and the 7-day window before it.
    public static let historyEnd = Date(timeIntervalSince1970: 1_767_225_600)
    public static let weekStart = historyEnd.addingTimeInterval(-7 * 86_400)
    /// One day in the middle of the history (for range and overlap queries).
    public static let midDayStart = historyEnd.addingTimeInterval(-365 * 86_400)
    public static let midDayEnd = midDayStart.addingTimeInterval(86_400)
}

/// Process memory figures.
public enum Memory {
    /// Resident set size in bytes (/proc/self/statm).
    public static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Bytes currently allocated from the malloc heap (glibc mallinfo2).
    public static func heapBytes() -> Int {
        Int(ek_heap_allocated_bytes())
    }

    /// Returns freed heap memory to the system so that RSS deltas are meaningful.
    public static func trim() {
        ek_malloc_trim()
    }
}

/// Bytes of all regular files under `url` (recursively), or of the file itself.
public func diskBytes(_ url: URL) -> Int {
    let fm = FileManager.default
    var isDir: ObjCBool = false
    guard fm.fileExists(atPath: url.path, isDirectory: &isDir) else { return 0 }
    if !isDir.boolValue {
        return (try? fm.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0
    }
    var total = 0
    if let e = fm.enumerator(at: url, includingPropertiesForKeys: [.fileSizeKey, .isRegularFileKey]) {
        for case let file as URL in e {
            let values = try? file.resourceValues(forKeys: [.fileSizeKey, .isRegularFileKey])
            if values?.isRegularFile == true { total += values?.fileSize ?? 0 }
        }
    }
    return total
}

/// Copies a directory tree (optionally skipping top-level entries) and flushes the copy to disk.
///
/// Why flush: a copy leaves its bytes dirty in the page cache, and the first `fdatasync` of a
/// copied file (the log's active segment) then waits for all of them to be written back, so the
/// first writes of a benchmark paid for the copy: `BenchProbe first-write` on a fresh copy of the
/// 1M-activity store measured its second `add` at 12-15 ms, nearly all ext4 writeback, and
/// `Observation.FanOut100` measured that instead of the fan-out. A store closed cleanly has no
/// such debt.
public func copyTree(_ from: URL, to: URL, skipping: Set<String> = []) throws {
    let fm = FileManager.default
    try? fm.removeItem(at: to)
    try fm.createDirectory(at: to, withIntermediateDirectories: true)
    for name in try fm.contentsOfDirectory(atPath: from.path) where !skipping.contains(name) {
        try fm.copyItem(at: from.appending(path: name), to: to.appending(path: name))
    }
    try flushToDisk(to)
}

/// Flushes every file under `url` (or `url` itself) and the directories to disk (`fsync`), so
/// that what a benchmark measures next does not include writing back a copy made before it.
public func flushToDisk(_ url: URL) throws {
    var paths = [url.path]
    if let e = FileManager.default.enumerator(atPath: url.path) {
        for case let relative as String in e { paths.append(url.appending(path: relative).path) }
    }
    for path in paths {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }
}
