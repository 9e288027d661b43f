// Invariant checks of StreamVersionMap, in the manner of swift-collections'
// `_BTree+Invariants.swift`: compiled only with `-DEVENTKERNEL_INTERNAL_CHECKS` (the test build),
// so that a release build carries neither the code nor a call.

extension StreamVersionMap {
    #if EVENTKERNEL_INTERNAL_CHECKS
    /// What is wrong with the map, empty when nothing is: the UUID table's load factor is at most
    /// ``maxLoad``, its count is the number of occupied slots, every occupied slot holds a
    /// version in 1...``maxVersion`` and an interned type code, and every entry is found from
    /// its home slot (the probe sequence reaches it with no empty slot between and no other
    /// entry of the same stream before it); the string streams' versions are in range and their
    /// types interned; the type codes and names agree.
    ///
    /// Only in builds with `EVENTKERNEL_INTERNAL_CHECKS`.
    /// - Complexity: O(capacity × average probe length + string streams).
    func invariantViolations() -> [String] {
        var violations = layoutViolations()
        guard violations.isEmpty else { return violations }
        var occupied = 0
        for i in slots.indices where slots[i].tagged != 0 {
            occupied += 1
            if let violation = entryViolation(at: i) { violations.append(violation) }
        }
        if occupied != uuidCount { violations.append("count of UUID streams is \(uuidCount) but \(occupied) slots are occupied") }
        for (stream, version) in strings {
            if case .uuid = stream.entityID { violations.append("UUID stream \(stream) is among the string streams") }
            if version == 0 || version > Self.maxVersion { violations.append("stream \(stream) has version \(version)") }
            if code(of: stream.entityType) == nil { violations.append("the entity type of stream \(stream) is not interned") }
        }
        return violations
    }

    /// The load factor and the type codes (O(entity types)).
    private func layoutViolations() -> [String] {
        var violations: [String] = []
        if Double(uuidCount) > Double(slots.count) * Self.maxLoad {
            violations.append("load \(uuidCount)/\(slots.count) is above \(Self.maxLoad)")
        }
        if typeCodes.count != typeNames.count {
            violations.append("\(typeCodes.count) type codes for \(typeNames.count) type names")
        }
        for (code, name) in typeNames.enumerated() where typeCodes[ExactString(name)] != UInt64(code) {
            violations.append("type \(name) has code \(code) but maps to \(typeCodes[ExactString(name)].map(String.init) ?? "nothing")")
        }
        if let lastType, typeCodes[ExactString(lastType.name)] != lastType.code {
            violations.append("the last type looked up, \(lastType.name), is cached with code \(lastType.code), not its own")
        }
        return violations
    }

    /// Whether the entry in slot `j` is valid and found from its home slot.
    private func entryViolation(at j: Int) -> String? {
        let slot = slots[j]
        let code = slot.tagged >> 48
        let version = slot.tagged & Self.maxVersion
        if version == 0 { return "slot \(j) is occupied with version 0" }
        if code >= UInt64(typeNames.count) { return "slot \(j) has type code \(code) of \(typeNames.count) types" }
        let home = Self.home(slot.high, slot.low, code, slots.count)
        var i = home
        var steps = 0
        while i != j {
            let other = slots[i]
            if other.tagged == 0 { return "slot \(j) is not reachable from its home slot \(home): slot \(i) on the way is empty" }
            if other.high == slot.high && other.low == slot.low && other.tagged >> 48 == code { return "a stream is in slots \(i) and \(j)" }
            i += 1
            if i == slots.count { i = 0 }
            steps += 1
            if steps > slots.count { return "slot \(j) is not on its probe sequence" }
        }
        return nil
    }

    /// The entries of the run of occupied slots holding (or starting after) slot `k`: what an
    /// insert with home slot `k` changed.
    private func localViolations(around k: Int) -> [String] {
        var violations = layoutViolations()
        guard violations.isEmpty, !slots.isEmpty else { return violations }
        let capacity = slots.count
        var start = k
        var steps = 0
        while slots[(start + capacity - 1) % capacity].tagged != 0 && steps < capacity { start = (start + capacity - 1) % capacity; steps += 1 }
        var i = start
        steps = 0
        while steps < capacity && (slots[i].tagged != 0 || i == k) {
            if slots[i].tagged != 0, let violation = entryViolation(at: i) { violations.append(violation) }
            i = (i + 1) % capacity
            steps += 1
        }
        return violations
    }
    #endif

    /// Stops the process with a description of what is wrong when the map breaks an invariant
    /// (see `invariantViolations()`); does nothing unless built with `EVENTKERNEL_INTERNAL_CHECKS`.
    func checkInvariants() {
        #if EVENTKERNEL_INTERNAL_CHECKS
        let violations = invariantViolations()
        precondition(violations.isEmpty, "StreamVersionMap: \(violations.joined(separator: "; "))")
        #endif
    }

    /// The check at the end of every mutation: the whole map while it is small (up to 4,096
    /// slots) or `stream` is `nil` (after a rehash or a removal, themselves O(n)), else the run
    /// of slots around `stream`'s home slot, where the mutation wrote. Empty, and so free,
    /// without `EVENTKERNEL_INTERNAL_CHECKS`.
    @inline(__always)
    func _invariantCheck(after stream: StreamID?) {
        #if EVENTKERNEL_INTERNAL_CHECKS
        let violations: [String]
        if let stream, slots.count > 4096 {
            if case .uuid(let uuid) = stream.entityID, let code = code(of: stream.entityType) {
                let (high, low) = Self.words(uuid)
                violations = localViolations(around: Self.home(high, low, code, slots.count))
            } else {
                violations = layoutViolations()
            }
        } else {
            violations = invariantViolations()
        }
        precondition(violations.isEmpty, "StreamVersionMap: \(violations.joined(separator: "; "))")
        #endif
    }
}
