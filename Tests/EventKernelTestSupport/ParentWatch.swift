#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Ends a helper process whose parent, the test process that spawned it, has ended.
///
/// Why: when a test process crashes, the helpers it started run on. Two orphaned helpers (a
/// paced `append` writer and a `follow` consumer) once took most of a core for 1 h 40 min of a
/// CI run, slowing every later stage. An orphan is given another parent (init, or a
/// subreaper), so a change of `getppid()` tells. The helpers check in their loops (before each
/// line they print, on each poll): a watchdog thread tried before did not end them.
public enum ParentWatch {
    /// The parent's pid as recorded by ``start()``; 0 before.
    private static let parent = Atomic<Int32>(0)

    /// The environment variable that names the parent to watch, for a spawner that may end
    /// before the helper's first statement runs (a shell starting it in the background):
    /// `getppid()` read then would already be the new parent.
    public static let parentVariable = "EVENTKERNEL_TEST_PARENT"

    /// Records the parent to watch: ``parentVariable``'s pid when it is set, else the current
    /// parent. Call first thing in a helper's `main`.
    public static func start() {
        let named = getenv(parentVariable).flatMap { Int32(String(cString: $0)) }
        // For this process only: a helper's own children watch the helper.
        unsetenv(parentVariable)
        parent.store(named ?? Int32(getppid()), ordering: .relaxed)
    }

    /// Exits the process (status 3, without running cleanup, saying why on standard error)
    /// when the parent recorded by ``start()`` is no longer its parent.
    public static func exitIfOrphaned() {
        let recorded = parent.load(ordering: .relaxed)
        guard recorded != 0 && Int32(getppid()) != recorded else { return }
        let message = Array("test helper \(getpid()): its parent \(recorded) ended; exiting\n".utf8)
        _ = message.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        _exit(3)
    }
}
