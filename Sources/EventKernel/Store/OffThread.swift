import Foundation

/// Runs blocking work (a fold, a backup's or a restore's file copies) on a thread of its own
/// and returns its result to the awaiting task.
///
/// Not on a dispatch queue nor a detached task: on Linux both run on the cooperative pool
/// (as many threads as cores), and work that blocks in system calls for seconds would hold
/// one of them away from every other task of the process.
/// - Parameters:
///   - name: The thread's name, for debuggers and stack dumps.
///   - body: The work; it runs once.
/// - Returns: What `body` returned.
/// - Throws: What `body` threw, unchanged.
func runOnThreadOfItsOwn<T: Sendable>(named name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.name = name
        thread.start()
    }
}
