import EventKernel
import Foundation

extension EntityJSON {
    /// Appends a binary entity payload's JSON rendering (``json(_:)``'s, byte for byte) to
    /// `buffer` as the payload is walked, without building its tree; `false`, with `buffer` as
    /// it was, when the payload does not decode or is not in the encoder's own form (then
    /// ``payload(_:)`` says why).
    ///
    /// Why: a tree per payload and an encode of it to check the form were 57% of a generic
    /// store's export (115,000 events a second, `perf`); the walk checks the form as it reads
    /// (``BinaryEntityValue/walk(_:into:)``).
    /// - Complexity: O(n) for n bytes.
    static func appendBinary(_ bytes: [UInt8], to buffer: inout JSONBuffer) -> Bool {
        let mark = buffer.count
        var writer = BinaryJSONWriter(buffer: buffer)
        // The buffer is moved into the writer and back, so that it is not copied.
        buffer = JSONBuffer()
        let written = (try? BinaryEntityValue.walk(bytes, into: &writer)) ?? false
        buffer = writer.buffer
        if !written { buffer.truncate(to: mark) }
        return written
    }
}

/// Writes a walk of a binary entity payload as ``EntityJSON/json(_:)`` renders its tree: the
/// same tags for the values JSON has no type for, the same number texts, the same `$object`
/// wrapping (the type's documentation).
private struct BinaryJSONWriter: BinaryEntityVisitor {
    var buffer: JSONBuffer
    /// The containers open, innermost last: whether keyed, the values so far, where its `{`
    /// is, and whether its first key starts with `$`.
    private var open: [(keyed: Bool, count: Int, start: Int, dollarKey: Bool)] = []

    init(buffer: JSONBuffer) {
        self.buffer = buffer
        open.reserveCapacity(4)
    }

    /// The separator before a value of an unkeyed container (a keyed one's key wrote it).
    @inline(__always)
    private mutating func beforeValue() {
        guard let last = open.indices.last, !open[last].keyed else { return }
        if open[last].count > 0 { buffer.appendByte(0x2C) }
        open[last].count += 1
    }

    /// Opens `{"tag":` for a tagged value; `close()` ends it.
    private mutating func tagged(_ tag: StaticString) {
        beforeValue()
        buffer.appendRaw(tag)
    }

    private mutating func close() { buffer.appendByte(0x7D) }

    mutating func visitNull() { beforeValue(); buffer.appendRaw("null") }
    mutating func visitBool(_ value: Bool) { beforeValue(); if value { buffer.appendRaw("true") } else { buffer.appendRaw("false") } }
    mutating func visitInt(_ value: Int64) { beforeValue(); buffer.appendInteger(value) }
    mutating func visitUInt(_ value: UInt64) { tagged("{\"$uint\":"); buffer.appendInteger(value); close() }

    mutating func visitDouble(_ value: Double) {
        guard value.isFinite else {
            tagged("{\"$double\":")
            buffer.appendString(EntityJSON.nonFiniteText(value))
            close()
            return
        }
        beforeValue()
        buffer.appendRaw(EntityJSON.doubleText(value))
    }

    mutating func visitFloat(_ value: Float) {
        tagged("{\"$float\":")
        if value.isFinite {
            buffer.appendRaw(EntityJSON.doubleText(Double(value), float: value))
        } else {
            buffer.appendString(EntityJSON.nonFiniteText(value))
        }
        close()
    }

    mutating func visitString(_ value: String) { beforeValue(); buffer.appendString(value) }
    mutating func visitUUID(_ value: UUID) { tagged("{\"$uuid\":"); buffer.appendString(value); close() }

    mutating func visitDate(_ value: Date) {
        tagged("{\"$date\":")
        let quote = buffer.count
        buffer.appendString(value)
        // Exact or not at all (EntityJSON.isExactText, the rule `json(_:)` follows too).
        if !buffer.withBytes(from: quote + 1, upTo: buffer.count - 1, { EntityJSON.isExactText($0, of: value) }) {
            buffer.truncate(to: quote)
            let seconds = value.timeIntervalSinceReferenceDate
            if seconds.isFinite { buffer.appendRaw(EntityJSON.doubleText(seconds)) } else { buffer.appendString(EntityJSON.nonFiniteText(seconds)) }
        }
        close()
    }

    mutating func visitData(_ bytes: UnsafeBufferPointer<UInt8>) {
        tagged("{\"$data\":")
        buffer.appendString(Data(bytes).base64EncodedString())
        close()
    }

    mutating func visitDecimal(_ value: Decimal) {
        tagged("{\"$decimal\":")
        buffer.appendString(value.isNaN ? "NaN" : value.description)
        close()
    }

    mutating func visitURL(_ text: String) { tagged("{\"$url\":"); buffer.appendString(text); close() }

    mutating func beginKeyed() {
        beforeValue()
        open.append((keyed: true, count: 0, start: buffer.count, dollarKey: false))
        buffer.appendByte(0x7B)
    }

    mutating func visitKey(_ key: String) {
        let last = open.count - 1
        if open[last].count > 0 { buffer.appendByte(0x2C) } else { open[last].dollarKey = key.utf8.first == UInt8(ascii: "$") }
        open[last].count += 1
        buffer.appendString(key)
        buffer.appendByte(0x3A)
    }

    mutating func endKeyed(count: Int) {
        let container = open.removeLast()
        buffer.appendByte(0x7D)
        // One key starting with `$` would read back as a typed value: wrapped (rare, so the
        // insertion's move is paid only then).
        if count == 1 && container.dollarKey {
            buffer.insert("{\"$object\":", at: container.start)
            buffer.appendByte(0x7D)
        }
    }

    mutating func beginUnkeyed() {
        beforeValue()
        open.append((keyed: false, count: 0, start: buffer.count, dollarKey: false))
        buffer.appendByte(0x5B)
    }

    mutating func endUnkeyed(count: Int) {
        open.removeLast()
        buffer.appendByte(0x5D)
    }
}
