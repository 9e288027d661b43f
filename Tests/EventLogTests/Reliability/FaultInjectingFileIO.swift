@testable import EventLog
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
import EventKernelTestSupport

/// A ``LogFileIO`` that forwards to ``PosixFileIO`` and injects scripted faults: short writes,
/// `EIO`/`ENOSPC` on any operation, and a byte budget after which writes fail (a full disk).
///
/// Thread-safe (the script and the counters live in a `Mutex`): the log calls it from its
/// writer thread while the test arms faults from its own task.
final class FaultInjectingFileIO: LogFileIO {
    enum Operation: String, Sendable, CaseIterable {
        case write, dataSync, sync, preallocate, truncate
    }

    enum Fault: Sendable, Equatable {
        /// The write returns at most this many bytes (a short write); later calls are unaffected.
        case shortWrite(Int)
        /// The call fails with this errno and changes nothing.
        case error(Int32)
    }

    struct Rule: Sendable {
        var operation: Operation
        /// Matching calls to let through before the fault fires.
        var after: Int
        var fault: Fault
        /// How many times the fault fires once it started (Int.max: forever).
        var times: Int
        /// Only calls on a path with this suffix match (for example ".idx.tmp"), when set.
        var pathSuffix: String?
        var seen = 0
        var fired = 0
    }

    private struct State {
        var rules: [Rule] = []
        /// Bytes the writes may still put on disk; nil: unlimited. When it runs out, a write is
        /// cut short to what is left and the next one fails with `budgetErrno`.
        var byteBudget: Int?
        var budgetErrno: Int32 = ENOSPC
        var calls: [Operation: Int] = [:]
        var faultsFired = 0
        var log: [String] = []
    }

    private let real = PosixFileIO()
    private let state = Mutex(State())
    /// Armed by ``holdNextDataSync()``: signalled when the held `fdatasync` starts.
    private let hold = Mutex<DispatchSemaphore?>(nil)
    /// Signalled by ``releaseHeldSync()``.
    private let heldRelease = DispatchSemaphore(value: 0)
    private let syncThreads = Mutex<[pthread_t]>([])

    init() {}

    /// Adds a fault: the `after+1`-th next matching call fails (and the following `times - 1`).
    func inject(_ fault: Fault, on operation: Operation, after: Int = 0, times: Int = 1, pathSuffix: String? = nil) {
        state.withLock { $0.rules.append(Rule(operation: operation, after: after, fault: fault, times: times, pathSuffix: pathSuffix)) }
    }

    /// Lets only `bytes` more bytes be written; after that writes fail with `errno`.
    func limitBytes(to bytes: Int, errno: Int32 = ENOSPC) {
        state.withLock { $0.byteBudget = bytes; $0.budgetErrno = errno }
    }

    /// Makes the next `fdatasync` wait until ``releaseHeldSync()``; returns a semaphore
    /// signalled once that call has started (its leader is then mid-sync).
    func holdNextDataSync() -> DispatchSemaphore {
        let entered = DispatchSemaphore(value: 0)
        hold.withLock { $0 = entered }
        return entered
    }

    /// Lets the held `fdatasync` go on.
    func releaseHeldSync() { heldRelease.signal() }

    /// The threads that called `fdatasync`, in order.
    var dataSyncThreads: [pthread_t] { syncThreads.withLock { $0 } }

    /// Removes every fault.
    func disarm() { state.withLock { $0.rules.removeAll(); $0.byteBudget = nil } }

    var faultsFired: Int { state.withLock { $0.faultsFired } }
    func calls(_ operation: Operation) -> Int { state.withLock { $0.calls[operation] ?? 0 } }
    var faultLog: [String] { state.withLock { $0.log } }

    /// Counts the call and returns the fault to apply, if any.
    private func fault(for operation: Operation, path: String) -> Fault? {
        state.withLock { s in
            s.calls[operation, default: 0] += 1
            for i in s.rules.indices where s.rules[i].operation == operation {
                if let suffix = s.rules[i].pathSuffix, !path.hasSuffix(suffix) { continue }
                guard s.rules[i].fired < s.rules[i].times else { continue }
                s.rules[i].seen += 1
                guard s.rules[i].seen > s.rules[i].after else { continue }
                s.rules[i].fired += 1
                s.faultsFired += 1
                s.log.append("\(operation.rawValue) \(s.rules[i].fault) on \(path)")
                return s.rules[i].fault
            }
            return nil
        }
    }

    private func injected(_ call: String, _ number: Int32, _ path: String, offset: Int64? = nil) -> LogError {
        LogError(.io, "\(call) failed (injected)", file: path, offset: offset, systemErrorNumber: number)
    }

    func write(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64, descriptor: Int32, path: String) throws(LogError) -> Int {
        switch fault(for: .write, path: path) {
        case .error(let number)?:
            throw injected("pwrite", number, path, offset: offset)
        case .shortWrite(let limit)?:
            let n = max(0, min(limit, bytes.count))
            guard n > 0 else { return 0 }
            return try real.write(UnsafeRawBufferPointer(rebasing: bytes[0..<n]), toAbsoluteOffset: offset, descriptor: descriptor, path: path)
        case nil:
            break
        }
        // The byte budget (a disk filling up): cut the write short, then fail.
        let allowed: Int = state.withLock { s in
            guard let budget = s.byteBudget else { return bytes.count }
            let n = min(budget, bytes.count)
            s.byteBudget = budget - n
            return n
        }
        if allowed == 0 && bytes.count > 0 {
            let number = state.withLock { s in s.faultsFired += 1; s.log.append("write budget exhausted on \(path)"); return s.budgetErrno }
            throw injected("pwrite", number, path, offset: offset)
        }
        return try real.write(UnsafeRawBufferPointer(rebasing: bytes[0..<allowed]), toAbsoluteOffset: offset, descriptor: descriptor, path: path)
    }

    func synchronizeData(descriptor: Int32, path: String) throws(LogError) {
        syncThreads.withLock { $0.append(pthread_self()) }
        if let entered = hold.withLock({ h -> DispatchSemaphore? in defer { h = nil }; return h }) {
            entered.signal()
            heldRelease.wait()
        }
        if case .error(let number)? = fault(for: .dataSync, path: path) { throw injected("fdatasync", number, path) }
        try real.synchronizeData(descriptor: descriptor, path: path)
    }

    func synchronize(descriptor: Int32, path: String) throws(LogError) {
        if case .error(let number)? = fault(for: .sync, path: path) { throw injected("fsync", number, path) }
        try real.synchronize(descriptor: descriptor, path: path)
    }

    func preallocate(descriptor: Int32, path: String, length: Int64) throws(LogError) {
        if case .error(let number)? = fault(for: .preallocate, path: path) { throw injected("fallocate", number, path) }
        try real.preallocate(descriptor: descriptor, path: path, length: length)
    }

    func truncate(descriptor: Int32, path: String, length: Int64) throws(LogError) {
        if case .error(let number)? = fault(for: .truncate, path: path) { throw injected("ftruncate", number, path) }
        try real.truncate(descriptor: descriptor, path: path, length: length)
    }
}
