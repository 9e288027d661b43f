// @preconcurrency: `stdout` is a C global that Swift 6 cannot prove safe (the C library locks
// the stream itself); kept to this file so the rest of the tool stays fully checked.
@preconcurrency import Foundation
#if canImport(Glibc)
@preconcurrency import Glibc
#elseif canImport(Darwin)
@preconcurrency import Darwin
#endif

extension Output {
    /// Flushes standard output and reports whether everything printed so far reached it
    /// (`fflush` succeeded and the stream has no error): what prints then commits (`tail
    /// --consumer`) commits only on `true`.
    static func flushStandardOutput() -> Bool {
        fflush(stdout) == 0 && ferror(stdout) == 0
    }
}
