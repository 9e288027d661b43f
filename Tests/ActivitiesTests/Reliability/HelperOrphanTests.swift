#if os(Linux)
import EventKernelTestSupport
import Foundation
import Testing

/// A test helper whose parent ends exits instead of running on (`ParentWatch`): the paced
/// `append` writer, orphaned by a shell that starts it in the background and exits at once,
/// is gone within seconds. Without the watch it appends until its 100,000,000th event. Linux
/// only: it reads a process's state from /proc.
@Suite struct HelperOrphanTests {
    /// Whether process `pid` has ended: no such process, or a zombie nobody reaped (the new
    /// parent may be a pid 1 that does not reap).
    static func hasEnded(_ pid: Int32) -> Bool {
        // Read to its end: a /proc file reports a size of 0, and a read of that size gives nothing.
        guard kill(pid, 0) == 0 || errno != ESRCH else { return true }
        guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/stat") else { return true }
        defer { try? handle.close() }
        let stat = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        // "pid (comm) state ...": the state follows the last ")".
        guard let close = stat.lastIndex(of: ")") else { return true }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).first == "Z"
    }

    @Test func anOrphanedHelperExits() async throws {
        let dir = TemporaryDirectory("helper-orphan")
        let helper = builtExecutable("ActivitiesTestHelper").path, printed = dir.file("pid"), store = dir.file("store"), said = dir.file("out")
        // The shell names itself as the parent to watch (it exits before the helper's first
        // statement runs). Its output goes beside the store, not into it (a store directory
        // holding other files is refused). Spawned and waited for directly: Foundation's
        // `Process` learns that its child ended when a descriptor the child inherits closes,
        // and the helper inherits it too, so `waitUntilExit` would wait for the helper.
        let command = "\(ParentWatch.parentVariable)=$$ '\(helper)' append '\(store.path)' 100000000 100 2000 > '\(said.path)' 2>&1 < /dev/null & echo $! > '\(printed.path)'"
        var arguments: [UnsafeMutablePointer<CChar>?] = ["/bin/sh", "-c", command].map { (argument: String) in strdup(argument) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var shell: pid_t = 0
        #expect(posix_spawn(&shell, "/bin/sh", nil, nil, &arguments, environ) == 0)
        var status: Int32 = 0
        while waitpid(shell, &status, 0) < 0 && errno == EINTR {}
        let text = try String(contentsOf: printed, encoding: .utf8)
        let pid = try #require(Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), "the shell printed \(text)")
        defer { if !Self.hasEnded(pid) { kill(pid, SIGKILL) } }
        // The orphan runs until its next append notices (a few milliseconds); allow a slow,
        // loaded machine 60 s.
        var checks = 0
        while !Self.hasEnded(pid) && checks < 600 {
            try await Task.sleep(for: .milliseconds(100))
            checks += 1
        }
        #expect(Self.hasEnded(pid), "the orphaned helper \(pid) still runs after \(checks) checks")
        // It ran (it opened the store and said so) and ended by the watch, not by an error.
        let lines = ((try? String(contentsOf: said, encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(lines.first == "start 0" && !lines.contains { $0.hasPrefix("error") }, "the helper said \(lines)")
    }
}
#endif
