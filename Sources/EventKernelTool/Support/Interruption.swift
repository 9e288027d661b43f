import Dispatch
import Foundation
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
/// writes only atomic batches leaves nothing torn either way.
final class Interruption: @unchecked Sendable {
    // @unchecked: `sources` is written only in init and `stop()`, by the one task that owns
    // the watch; the signal handlers touch `received` alone, an atomic.
    private let received = Atomic<Int32>(0)
    private var sources: [any DispatchSourceSignal] = []
    private let signals: [Int32]

    /// Starts watching `signals` (their default action is suspended until ``stop()``).
    init(_ signals: [Int32] = [SIGINT, SIGTERM]) {
        self.signals = signals
        for number in signals {
            setAction(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in
                guard let self else { return }
                if !self.received.compareExchange(expected: 0, desired: number, ordering: .sequentiallyConsistent).exchanged {
                    setAction(number, SIG_DFL)
                    raise(number)
                }
            }
            source.resume()
            sources.append(source)
        }
    }

    /// The signal received, if any.
    var caught: Int32? {
        let number = received.load(ordering: .sequentiallyConsistent)
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

    /// Gives the signals their default action back.
    func stop() {
        for source in sources { source.cancel() }
        sources.removeAll()
        for number in signals { setAction(number, SIG_DFL) }
    }
}

/// `signal(2)`, under a name no member shadows.
#if canImport(Glibc)
private func setAction(_ number: Int32, _ action: sighandler_t?) { _ = signal(number, action) }
#else
private func setAction(_ number: Int32, _ action: sig_t?) { _ = signal(number, action) }
#endif
