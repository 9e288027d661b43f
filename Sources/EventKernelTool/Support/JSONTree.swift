import EventKernel
import Foundation

/// A JSON value that keeps what `JSONSerialization` loses and a lossless export needs: the
/// order of an object's keys and the text of a number (so `1` and `1.0` stay an integer and a
/// double).
indirect enum JSONTree: Equatable {
    case null
    case bool(Bool)
    /// A number, as its JSON text.
    case number(String)
    case string(String)
    case array([JSONTree])
    /// An object's members in their order.
    case object([(key: String, value: JSONTree)])

    static func == (lhs: JSONTree, rhs: JSONTree) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    /// The member `key` of an object (`nil`: absent, or not an object).
    subscript(key: String) -> JSONTree? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// Compact JSON text: members in order, no spaces.
    var text: String {
        var buffer = JSONBuffer()
        write(to: &buffer)
        return buffer.text
    }

    /// The same JSON laid out for reading: each member and element on its own line, indented
    /// by two spaces a level (empty objects and arrays stay `{}` and `[]`).
    var indentedText: String {
        var buffer = JSONBuffer()
        write(to: &buffer, indentation: 0)
        return buffer.text
    }

    /// Appends ``text`` to `buffer`.
    func write(to buffer: inout JSONBuffer) { write(to: &buffer, indentation: nil) }

    /// Appends ``text`` (`indentation` nil) or ``indentedText`` at that depth to `buffer`.
    private func write(to buffer: inout JSONBuffer, indentation depth: Int?) {
        func newline(_ level: Int) {
            buffer.appendByte(0x0A)
            for _ in 0..<level { buffer.appendRaw("  ") }
        }
        switch self {
        case .null: buffer.appendRaw("null")
        case .bool(let b): if b { buffer.appendRaw("true") } else { buffer.appendRaw("false") }
        case .number(let n): buffer.appendRaw(n)
        case .string(let s): buffer.appendString(s)
        case .array(let values):
            buffer.appendByte(0x5B)
            for (i, v) in values.enumerated() {
                if i > 0 { buffer.appendByte(0x2C) }
                if let depth { newline(depth + 1) }
                v.write(to: &buffer, indentation: depth.map { $0 + 1 })
            }
            if let depth, !values.isEmpty { newline(depth) }
            buffer.appendByte(0x5D)
        case .object(let members):
            buffer.appendByte(0x7B)
            for (i, m) in members.enumerated() {
                if i > 0 { buffer.appendByte(0x2C) }
                if let depth { newline(depth + 1) }
                buffer.appendString(m.key)
                buffer.appendByte(0x3A)
                if depth != nil { buffer.appendByte(0x20) }
                m.value.write(to: &buffer, indentation: depth.map { $0 + 1 })
            }
            if let depth, !members.isEmpty { newline(depth) }
            buffer.appendByte(0x7D)
        }
    }
}

/// A strict JSON parser (RFC 8259) into ``JSONTree``; errors name the byte offset.
struct JSONParser {
    struct Failure: Error, CustomStringConvertible {
        var message: String
        var offset: Int
        var description: String { "bad JSON: \(message) at byte \(offset + 1)" }
    }

    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Parses a whole document.
    /// - Throws: ``Failure`` for anything but exactly one JSON value (with white space around).
    static func parse(_ bytes: [UInt8]) throws(Failure) -> JSONTree {
        var parser = JSONParser(bytes)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == bytes.count else { throw Failure(message: "text after the value", offset: parser.index) }
        return value
    }

    /// Parses a document that must be an object, with each member's byte range in `bytes` (an
    /// import keeps a JSON payload's text exactly as written).
    /// - Throws: ``Failure`` as ``parse(_:)``, and for a document that is not an object.
    static func members(_ bytes: [UInt8]) throws(Failure) -> [(key: String, value: JSONTree, range: Range<Int>)] {
        var parser = JSONParser(bytes)
        parser.skipSpace()
        guard parser.peek == UInt8(ascii: "{") else { throw Failure(message: "expected an object", offset: parser.index) }
        parser.index += 1
        var out: [(key: String, value: JSONTree, range: Range<Int>)] = []
        parser.skipSpace()
        if parser.peek == UInt8(ascii: "}") { parser.index += 1 } else {
            while true {
                parser.skipSpace()
                let keyAt = parser.index
                let key = try parser.string()
                if out.contains(where: { $0.key == key }) { throw Failure(message: "key \"\(key)\" given twice", offset: keyAt) }
                parser.skipSpace()
                try parser.expect(UInt8(ascii: ":"))
                parser.skipSpace()
                let start = parser.index
                let value = try parser.value(depth: 1)
                out.append((key, value, start..<parser.index))
                parser.skipSpace()
                if parser.peek == UInt8(ascii: ",") { parser.index += 1; continue }
                try parser.expect(UInt8(ascii: "}"))
                break
            }
        }
        parser.skipSpace()
        guard parser.index == bytes.count else { throw Failure(message: "text after the value", offset: parser.index) }
        return out
    }

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipSpace() {
        while let b = peek, b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { index += 1 }
    }

    private mutating func expect(_ byte: UInt8) throws(Failure) {
        guard peek == byte else { throw Failure(message: "expected '\(Character(Unicode.Scalar(byte)))'", offset: index) }
        index += 1
    }

    private mutating func literal(_ word: String, _ value: JSONTree) throws(Failure) -> JSONTree {
        let w = Array(word.utf8)
        guard bytes.count - index >= w.count, Array(bytes[index..<index + w.count]) == w else {
            throw Failure(message: "unexpected character", offset: index)
        }
        index += w.count
        return value
    }

    /// The deepest nesting read. Export renders a binary payload as deep as the binary format
    /// allows (512 levels), each keyed level possibly wrapped as `{"$object":…}` and a leaf
    /// tagged (`{"$date":…}`), inside the line's object: import must read back all of that
    /// (2 × 512 + 3), never refuse what export wrote.
    static let maxDepth = 2 * BinaryEntityValue.maxDepth + 8

    private mutating func value(depth: Int) throws(Failure) -> JSONTree {
        guard depth < Self.maxDepth else { throw Failure(message: "nesting deeper than \(Self.maxDepth)", offset: index) }
        guard let b = peek else { throw Failure(message: "unexpected end", offset: index) }
        switch b {
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "["):
            index += 1
            var values: [JSONTree] = []
            skipSpace()
            if peek == UInt8(ascii: "]") { index += 1; return .array(values) }
            while true {
                skipSpace()
                values.append(try value(depth: depth + 1))
                skipSpace()
                if peek == UInt8(ascii: ",") { index += 1; continue }
                try expect(UInt8(ascii: "]"))
                return .array(values)
            }
        case UInt8(ascii: "{"):
            index += 1
            var members: [(key: String, value: JSONTree)] = []
            skipSpace()
            if peek == UInt8(ascii: "}") { index += 1; return .object(members) }
            while true {
                skipSpace()
                let keyAt = index
                let key = try string()
                // A key twice has no one meaning (and a binary container cannot hold it).
                if members.contains(where: { $0.key == key }) { throw Failure(message: "key \"\(key)\" given twice", offset: keyAt) }
                skipSpace()
                try expect(UInt8(ascii: ":"))
                skipSpace()
                members.append((key, try value(depth: depth + 1)))
                skipSpace()
                if peek == UInt8(ascii: ",") { index += 1; continue }
                try expect(UInt8(ascii: "}"))
                return .object(members)
            }
        default: return .number(try number())
        }
    }

    private mutating func number() throws(Failure) -> String {
        let start = index
        func digits() -> Int {
            let s = index
            while let d = peek, d >= 0x30 && d <= 0x39 { index += 1 }
            return index - s
        }
        if peek == UInt8(ascii: "-") { index += 1 }
        if peek == UInt8(ascii: "0") { index += 1 } else if digits() == 0 { throw Failure(message: "unexpected character", offset: start) }
        if peek == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw Failure(message: "a digit must follow the decimal point", offset: index) }
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            index += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw Failure(message: "a digit must follow the exponent", offset: index) }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard bytes.count - index >= 4 else { throw Failure(message: "truncated \\u escape", offset: index) }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw Failure(message: "bad \\u escape", offset: index)
            }
            v = v * 16 + d
            index += 1
        }
        return v
    }

    private mutating func string() throws(Failure) -> String {
        try expect(UInt8(ascii: "\""))
        var out: [UInt8] = []
        while true {
            guard let b = peek else { throw Failure(message: "unterminated string", offset: index) }
            index += 1
            switch b {
            case UInt8(ascii: "\""):
                guard let s = String(validating: out, as: UTF8.self) else { throw Failure(message: "invalid UTF-8 in a string", offset: index) }
                return s
            case UInt8(ascii: "\\"):
                guard let e = peek else { throw Failure(message: "unterminated string", offset: index) }
                index += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    let at = index - 2
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard peek == UInt8(ascii: "\\") else { throw Failure(message: "unpaired surrogate", offset: at) }
                        index += 1
                        try expect(UInt8(ascii: "u"))
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw Failure(message: "unpaired surrogate", offset: at) }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw Failure(message: "unpaired surrogate", offset: at) }
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                default: throw Failure(message: "bad escape", offset: index - 1)
                }
            case 0x00..<0x20: throw Failure(message: "control character in a string", offset: index - 1)
            default: out.append(b)
            }
        }
    }
}
