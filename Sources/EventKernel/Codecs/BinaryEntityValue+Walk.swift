package import Foundation
import KernelPrimitives

/// What ``BinaryEntityValue/walk(_:into:)`` reports of a binary entity payload: its values in
/// stored order, containers opened and closed around their contents, a keyed container's key
/// before each of its values.
///
/// Why a walk beside the tree (``BinaryEntityValue/decode(_:)``): `eventkernel export` writes
/// a million events a second, and building a tree per payload (an enum case, an array and a
/// `String` per value) and encoding it again to prove the encoder writes the same bytes were
/// most of a generic store's export. A visitor writes its output as the values come.
package protocol BinaryEntityVisitor {
    mutating func visitNull()
    mutating func visitBool(_ value: Bool)
    /// A signed integer (the `int` tag).
    mutating func visitInt(_ value: Int64)
    /// An unsigned integer (the `uint` tag).
    mutating func visitUInt(_ value: UInt64)
    mutating func visitDouble(_ value: Double)
    mutating func visitFloat(_ value: Float)
    mutating func visitString(_ value: String)
    mutating func visitUUID(_ value: UUID)
    mutating func visitDate(_ value: Date)
    /// Data's bytes, valid during the call only.
    mutating func visitData(_ bytes: UnsafeBufferPointer<UInt8>)
    mutating func visitDecimal(_ value: Decimal)
    /// A URL, as its text.
    mutating func visitURL(_ text: String)
    mutating func beginKeyed()
    /// The key of the entry whose value is reported next.
    mutating func visitKey(_ key: String)
    /// Ends the innermost keyed container, which had `count` entries.
    mutating func endKeyed(count: Int)
    mutating func beginUnkeyed()
    /// Ends the innermost unkeyed container, which had `count` values.
    mutating func endUnkeyed(count: Int)
}

extension BinaryEntityValue {
    /// Reports the values of a binary entity payload to `visitor`, in stored order, and says
    /// whether the bytes are the encoder's own form of what they hold.
    ///
    /// One pass that checks as it goes what the typed decoder's checking pass checks (bounds,
    /// tags, nesting, the key table, nothing after the value), and a key twice in one keyed
    /// container, which the tree refuses (the typed decoder reads the first, a JSON reader the
    /// last: no one answer).
    ///
    /// A payload is in the encoder's form when ``decode(_:)`` and ``encoded()`` would give back
    /// the same bytes: every varint in its shortest form, a float that survives the decoder's
    /// widening to a `Double` (a signalling NaN does not), a decimal in the form and digits the
    /// encoder picks, a URL whose text reads back as itself. A tool that writes a payload as
    /// JSON for import to encode again needs this: other bytes would come back otherwise. What
    /// else could differ (a key defined twice, a reference to an undefined key) is damage.
    /// `BinaryJSONWalkTests` compares this answer with decoding and encoding again over many
    /// payloads, damaged ones included.
    /// - Parameters:
    ///   - bytes: A payload starting with the format's `0xFF`.
    ///   - visitor: Told every value as it is read; when the walk throws, what it was told is
    ///     a part of the payload only. When the answer is `false` the values are what the tree
    ///     reads, but a caller that promises the same bytes back must not use them.
    /// - Returns: Whether the bytes are the encoder's own form.
    /// - Throws: `DecodingError.dataCorrupted` for bytes that are not a whole, well-formed
    ///   payload, with the byte offset.
    /// - Complexity: O(n) for n bytes.
    package static func walk<Visitor: BinaryEntityVisitor>(_ bytes: [UInt8], into visitor: inout Visitor) throws -> Bool {
        let state = try BinaryDecodingState(binary: bytes)
        var walk = BinaryEntityWalk(state: state)
        var offset = 1
        try walk.value(&offset, depth: 0, into: &visitor)
        try state.requireEnd(at: offset)
        return walk.canonical
    }
}

/// One walk of a payload: its position is the caller's, its verdict on the form here.
private struct BinaryEntityWalk {
    let state: BinaryDecodingState
    /// Whether every value so far is in the encoder's form.
    var canonical = true

    init(state: BinaryDecodingState) { self.state = state }

    /// A varint, noting whether it is in its shortest form (the encoder's).
    private mutating func varint(_ offset: inout Int) throws -> UInt64 {
        let start = offset
        let value = try state.varint(&offset)
        if offset - start != Varint.encodedLength(of: value) { canonical = false }
        return value
    }

    /// A length-prefixed run's bounds, moving past it.
    private mutating func run(_ offset: inout Int) throws -> Range<Int> {
        let start = offset
        let n = try state.length(&offset)
        if offset - start != Varint.encodedLength(of: UInt64(n)) { canonical = false }
        defer { offset += n }
        return offset..<offset + n
    }

    private mutating func text(_ offset: inout Int) throws -> String {
        let at = offset
        let range = try run(&offset)
        guard let s = state.bytes.withUnsafeBufferPointer({ String(utf8Validating: UnsafeBufferPointer(rebasing: $0[range])) }) else {
            throw state.corrupted("invalid UTF-8", at: at)
        }
        return s
    }

    /// Reads a fixed-size body of `n` bytes at `offset`, which must be there.
    private func fixed(_ offset: Int, _ n: Int) throws {
        var end = offset
        try state.advance(&end, n)
    }

    mutating func value<Visitor: BinaryEntityVisitor>(_ offset: inout Int, depth: Int, into visitor: inout Visitor) throws {
        guard depth < BinaryEntityValue.maxDepth else { throw state.corrupted("nesting deeper than \(BinaryEntityValue.maxDepth)", at: offset) }
        let start = offset
        let tag = try state.byte(&offset)
        switch tag {
        case BinaryEntityFormat.null: visitor.visitNull()
        case BinaryEntityFormat.false: visitor.visitBool(false)
        case BinaryEntityFormat.true: visitor.visitBool(true)
        case BinaryEntityFormat.int: visitor.visitInt(ZigZag.decode(try varint(&offset)))
        case BinaryEntityFormat.uint: visitor.visitUInt(try varint(&offset))
        case BinaryEntityFormat.double:
            try fixed(offset, 8)
            visitor.visitDouble(Double(bitPattern: state.fixed64(offset)))
            offset += 8
        case BinaryEntityFormat.date:
            try fixed(offset, 8)
            visitor.visitDate(Date(timeIntervalSinceReferenceDate: Double(bitPattern: state.fixed64(offset))))
            offset += 8
        case BinaryEntityFormat.float:
            try fixed(offset, 4)
            // Read as the decoder reads it (widened to a Double, then narrowed).
            let bits = state.bytes.withUnsafeBytes { $0.loadLittleEndian(at: offset, as: UInt32.self) }
            let float = Float(Double(Float(bitPattern: bits)))
            if float.bitPattern != bits { canonical = false }
            visitor.visitFloat(float)
            offset += 4
        case BinaryEntityFormat.uuid:
            try fixed(offset, 16)
            visitor.visitUUID(try state.decodeValue(UUID.self, at: start, codingPath: []))
            offset += 16
        case BinaryEntityFormat.string: visitor.visitString(try text(&offset))
        case BinaryEntityFormat.url:
            let text = try text(&offset)
            // The encoder writes a URL's `absoluteString`, of a URL made from this text.
            if URL(string: text)?.absoluteString != text { canonical = false }
            visitor.visitURL(text)
        case BinaryEntityFormat.data:
            let range = try run(&offset)
            state.bytes.withUnsafeBufferPointer { visitor.visitData(UnsafeBufferPointer(rebasing: $0[range])) }
        case BinaryEntityFormat.decimal, BinaryEntityFormat.decimalParts:
            var end = start
            try state.skip(&end, depth: 0, register: false)
            let decimal = try state.decodeDecimal(at: start, [])
            // Decimals have two forms and many spellings: the encoder's own choice decides.
            let encoder = BinaryEncodingState()
            encoder.writeDecimal(decimal)
            if encoder.bytes[...] != state.bytes[start..<end] { canonical = false }
            offset = end
            visitor.visitDecimal(decimal)
        case BinaryEntityFormat.keyed:
            visitor.beginKeyed()
            // Keys by their number in the payload's key table: the first 64 in a bit set (no
            // allocation per container), any others in a list.
            var seen: UInt64 = 0
            var seenBeyond: [Int] = []
            var count = 0
            while true {
                let at = offset
                let reference = try varint(&offset)
                let key: Int
                switch reference {
                case 0:
                    visitor.endKeyed(count: count)
                    return
                case 1:
                    let defined = offset
                    key = try state.define(try text(&offset), at: defined)
                default: key = try state.key(reference: reference, at: offset)
                }
                let twice: Bool
                if key < 64 {
                    twice = seen & (1 << UInt64(key)) != 0
                    seen |= 1 << UInt64(key)
                } else {
                    twice = seenBeyond.contains(key)
                    seenBeyond.append(key)
                }
                if twice {
                    throw state.corrupted("key \"\(state.keys[key])\" twice in one keyed container (an encode(to:) wrote it twice; the application's decoder reads the first)", at: at)
                }
                count += 1
                visitor.visitKey(state.keys[key])
                try value(&offset, depth: depth + 1, into: &visitor)
            }
        case BinaryEntityFormat.unkeyed:
            visitor.beginUnkeyed()
            var count = 0
            while true {
                guard offset < state.bytes.count else { throw state.corrupted("unterminated list", at: offset) }
                if state.bytes[offset] == BinaryEntityFormat.end { break }
                try value(&offset, depth: depth + 1, into: &visitor)
                count += 1
            }
            offset += 1
            visitor.endUnkeyed(count: count)
        default:
            throw state.corrupted("unknown tag 0x\(String(tag, radix: 16))", at: start)
        }
    }
}
