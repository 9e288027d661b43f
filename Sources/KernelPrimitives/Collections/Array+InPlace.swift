extension Array {
    /// An array of exactly `count` elements, written in place by `initialize` into
    /// uninitialised memory, or `[]` without calling `initialize` when `count` is 0.
    ///
    /// The one way the package builds an array in place. Why not
    /// `Array(unsafeUninitializedCapacity:initializingWith:)` directly: the Swift 6.3 standard
    /// library's typed-throws form of it (`@_alwaysEmitIntoClient`, so compiled into the caller)
    /// sets the new array's count unconditionally, and for a capacity of 0 the buffer is the
    /// process-wide empty-array storage, so two threads asking for an empty array at once write
    /// one global (a benign 0, but a race to ThreadSanitizer: stop 38's CI failure, in the
    /// copy-out of a query that matched nothing). Callers that run on many threads at once (a
    /// query's copy-out, a snapshot restore's join) go through here, so none can forget it.
    ///
    /// - Parameters:
    ///   - count: How many elements `initialize` writes; at least 0.
    ///   - initialize: Writes elements `0..<count` into the buffer in order, advancing the
    ///     `Int` it is given (the count initialised so far) as it goes; it must reach `count`.
    /// - Complexity: O(`count`) plus what `initialize` does.
    @inlinable
    package init(initializingInPlace count: Int, _ initialize: (UnsafeMutableBufferPointer<Element>, inout Int) throws -> Void) rethrows {
        guard count > 0 else {
            self = []
            return
        }
        self = try Array(unsafeUninitializedCapacity: count) { buffer, initialized in
            try initialize(buffer, &initialized)
            #if EVENTKERNEL_INTERNAL_CHECKS
            precondition(initialized == count, "an array built in place holds \(initialized) of its \(count) elements")
            #endif
        }
    }
}
