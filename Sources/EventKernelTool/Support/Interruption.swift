import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Turns SIGINT and SIGTERM into a request a long command checks between its atomic steps, so
/// that it stops at a clean boundary and says where (an import: after its last batch).
///
/// A second signal stops the process at once, as it would without the watch: a command that
/// writes only atomic batches leaves nothing torn either way. One watch at a time (the signal
/// handler reaches its state through a global).
struct Interruption: @unchecked Sendable {  // the handlers it keeps are C function pointers
    /// Each watched signal and the disposition it had before (given back by ``stop()``).
    private let previous: [(signal: Int32, handler: SignalHandler?)]

    /// Starts watching `signals` (their action is replaced until ``stop()``). A signal the
    /// process ignores (`nohup`, a shell's background job) stays ignored.
    init(_ signals: [Int32] = [SIGINT, SIGTERM]) {
        // Touched here first, so that the handler never runs a global's lazy initialisation.
        caughtSignal.store(0, ordering: .sequentiallyConsistent)
        // signal(3) installs with SA_RESTART (BSD semantics, glibc and Darwin alike): a write
        // or fsync under way is resumed, not failed with EINTR.
        previous = signals.map { number in
            let before: SignalHandler? = signal(number, onSignal)
            if isIgnore(before) { _ = signal(number, SIG_IGN) }
            return (number, before)
        }
    }

    /// The signal received, if any.
    var caught: Int32? {
        let number = caughtSignal.load(ordering: .sequentiallyConsistent)
        return number == 0 ? nil : number
    }

    /// The signal's name and the exit status that reports it (128 + the signal's number, the
    /// shell's convention: 130 for SIGINT).
    var report: (name: String, exit: ToolExit)? {
        switch caught {
        case SIGINT: ("SIGINT", .interrupted)
        case SIGTERM: ("SIGTERM", .terminated)
        default: nil
        }
    }

    /// Gives the signals the actions they had before.
    func stop() {
        for (number, handler) in previous { _ = signal(number, handler ?? SIG_DFL) }
    }
}

/// A signal's disposition as signal(3) takes and returns it (spelt alike on Glibc and Darwin).
private typealias SignalHandler = @convention(c) (Int32) -> Void

/// Whether `handler` is `SIG_IGN` (C function pointers are not Equatable: compared by address).
private func isIgnore(_ handler: SignalHandler?) -> Bool {
    unsafeBitCast(handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
}

/// The first signal an ``Interruption`` caught (0: none).
private let caughtSignal = Atomic<Int32>(0)

/// The handler: records the first signal; a second one gets the default action (the process
/// ends). Only async-signal-safe work: a lock-free atomic, signal(2) and raise(3).
private func onSignal(_ number: Int32) {
    if !caughtSignal.compareExchange(expected: 0, desired: number, ordering: .sequentiallyConsistent).exchanged {
        _ = signal(number, SIG_DFL)
        _ = raise(number)
    }
}
