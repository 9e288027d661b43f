// Invariant checks of ChunkedSortedArray, in the manner of swift-collections'
// `_BTree+Invariants.swift`: compiled only with `-DEVENTKERNEL_INTERNAL_CHECKS` (the test build),
// so that a release build carries neither the code nor a call.

extension ChunkedSortedArray {
    #if EVENTKERNEL_INTERNAL_CHECKS
    /// What is wrong with the array's layout, empty when nothing is: the chunk summary has one
    /// entry per chunk, no chunk is empty or holds more than ``maxChunk`` elements, and the
    /// count is the sum of the chunks' sizes. Given the order, also that every element (across
    /// chunk boundaries too) does not sort before the one preceding it and that each summary
    /// entry is its chunk's last element.
    ///
    /// Only in builds with `EVENTKERNEL_INTERNAL_CHECKS`.
    /// - Parameter areInIncreasingOrder: The order the caller keeps (the array does not know
    ///   it: every search takes a predicate); `nil` checks the layout only.
    /// - Complexity: O(number of chunks), O(n) with an order.
    public func invariantViolations(areInIncreasingOrder: ((Element, Element) -> Bool)? = nil) -> [String] {
        var violations: [String] = []
        guard chunks.count == lastEntries.count else {
            return ["\(chunks.count) chunks but \(lastEntries.count) summary entries"]
        }
        var total = 0
        for (c, chunk) in chunks.enumerated() {
            if chunk.isEmpty { violations.append("chunk \(c) of \(chunks.count) is empty") }
            if chunk.count > Self.maxChunk { violations.append("chunk \(c) holds \(chunk.count) elements, more than \(Self.maxChunk)") }
            total += chunk.count
        }
        if total != storedCount { violations.append("count is \(storedCount) but the chunks hold \(total)") }
        if let less = areInIncreasingOrder {
            var previous: Element?
            for (c, chunk) in chunks.enumerated() {
                for (offset, element) in chunk.enumerated() {
                    if let previous, less(element, previous) {
                        violations.append("element \(offset) of chunk \(c) sorts before the one preceding it\(offset == 0 ? " (across a chunk boundary)" : "")")
                    }
                    previous = element
                }
                if let last = chunk.last, less(last, lastEntries[c]) || less(lastEntries[c], last) {
                    violations.append("the summary entry of chunk \(c) is not its last element")
                }
            }
        }
        return violations
    }

    /// Stops the process unless the elements before, at and after `position` are in order:
    /// what an insert or a removal there changed, across a chunk boundary too. The array does
    /// not know its order, so its owner calls this after a mutation, passing the order; O(1).
    /// Only in builds with `EVENTKERNEL_INTERNAL_CHECKS`.
    /// - Parameters:
    ///   - position: A position from ``partitionPoint(_:)`` (or the end).
    ///   - areInIncreasingOrder: The order the owner keeps.
    public func checkOrder(around position: ChunkedPosition, _ areInIncreasingOrder: (Element, Element) -> Bool) {
        guard !isEmpty else { return }
        var window: [(ChunkedPosition, Element)] = []
        var p = position > startPosition ? predecessor(of: position) : position
        while window.count < 3 && p < endPosition {
            window.append((p, self[p]))
            p = successor(of: p)
        }
        for i in window.indices.dropFirst() where areInIncreasingOrder(window[i].1, window[i - 1].1) {
            let (at, before) = (window[i].0, window[i - 1].0)
            preconditionFailure("ChunkedSortedArray: the element at chunk \(at.chunk), offset \(at.offset) sorts before the one at chunk \(before.chunk), offset \(before.offset)")
        }
    }

    /// Layout checks near chunk `c` only (the one a mutation touched, and its neighbours), so
    /// that the check after every mutation stays O(1) in a large array.
    @usableFromInline
    func localInvariantViolations(near c: Int) -> [String] {
        guard chunks.count == lastEntries.count else {
            return ["\(chunks.count) chunks but \(lastEntries.count) summary entries"]
        }
        var violations: [String] = []
        for i in max(0, c - 1)...max(0, c + 1) where i < chunks.count {
            if chunks[i].isEmpty { violations.append("chunk \(i) of \(chunks.count) is empty") }
            if chunks[i].count > Self.maxChunk { violations.append("chunk \(i) holds \(chunks[i].count) elements, more than \(Self.maxChunk)") }
        }
        if chunks.isEmpty && storedCount != 0 { violations.append("count is \(storedCount) but there are no chunks") }
        return violations
    }
    #endif

    /// Stops the process with a description of what is wrong when the array breaks an
    /// invariant (see `invariantViolations(areInIncreasingOrder:)`); does nothing unless built
    /// with `EVENTKERNEL_INTERNAL_CHECKS`.
    /// - Parameter areInIncreasingOrder: The order the caller keeps; `nil` checks the layout only.
    public func checkInvariants(areInIncreasingOrder: ((Element, Element) -> Bool)? = nil) {
        #if EVENTKERNEL_INTERNAL_CHECKS
        let violations = invariantViolations(areInIncreasingOrder: areInIncreasingOrder)
        precondition(violations.isEmpty, "ChunkedSortedArray: \(violations.joined(separator: "; "))")
        #endif
    }

    /// The check at the end of every mutation, `c` being the chunk it touched: the whole layout
    /// while the array is small (up to 64 chunks), the touched chunks beyond. Empty, and so
    /// free, without `EVENTKERNEL_INTERNAL_CHECKS`.
    @inlinable @inline(__always)
    func _invariantCheck(near c: Int) {
        #if EVENTKERNEL_INTERNAL_CHECKS
        let violations = chunks.count <= 64 ? invariantViolations() : localInvariantViolations(near: c)
        precondition(violations.isEmpty, "ChunkedSortedArray: \(violations.joined(separator: "; "))")
        #endif
    }
}
