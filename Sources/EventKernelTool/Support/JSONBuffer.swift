import EventLog
import Foundation

/// JSON text written as UTF-8 bytes: the one writer of the tool's JSON (export, tail, history,
/// query and the viewer's payloads all come through it), and of its ISO 8601 dates.
///
/// Bytes, not `String`: `export` formats a million events a second, and building each line
/// as strings (interpolation, `+=`, an escape pass per value, a `String` per date) was most of
/// its time. Every value is appended in place; nothing is allocated per value.
struct JSONBuffer {
    /// The text so far.
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    /// The text as a `String`.
    var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Empties the buffer, keeping its capacity.
    mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    /// The number of bytes so far: a mark to ``truncate(to:)`` back to.
    var count: Int { bytes.count }

    /// Removes the bytes after the first `count` (a value written and then withdrawn).
    mutating func truncate(to count: Int) { bytes.removeSubrange(count...) }

    /// Inserts `text` before the byte at `index` (moving what follows).
    mutating func insert(_ text: StaticString, at index: Int) {
        text.withUTF8Buffer { bytes.insert(contentsOf: $0, at: index) }
    }

    /// Calls `body` with the bytes in `start..<end`.
    func withBytes<R>(from start: Int, upTo end: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        bytes.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[start..<end])) }
    }

    /// Appends `text` as it is (JSON syntax, or text known to need no escaping).
    mutating func appendRaw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends `text` as it is, unquoted and unescaped (a number's text, a JSON document).
    mutating func appendRaw(_ text: String) {
        var text = text
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    /// Appends one byte of JSON syntax.
    mutating func appendByte(_ byte: UInt8) { bytes.append(byte) }

    /// Appends `text` as a JSON string: quoted, with `"`, `\` and the control characters
    /// escaped (`\n`, `\r`, `\t`, else `\u00XX`), every other character as its UTF-8.
    mutating func appendString(_ text: String) {
        var text = text
        text.withUTF8 { appendString(utf8: $0) }
    }

    /// ``appendString(_:)`` of UTF-8 bytes.
    mutating func appendString(utf8: UnsafeBufferPointer<UInt8>) {
        bytes.append(0x22)
        var start = 0
        for i in 0..<utf8.count {
            let b = utf8[i]
            guard b < 0x20 || b == 0x22 || b == 0x5C else { continue }
            // The run before it unchanged, in one copy: most strings have no escape at all.
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i]))
            start = i + 1
            switch b {
            case 0x22: bytes.append(0x5C); bytes.append(0x22)
            case 0x5C: bytes.append(0x5C); bytes.append(0x5C)
            case 0x0A: bytes.append(0x5C); bytes.append(0x6E)
            case 0x0D: bytes.append(0x5C); bytes.append(0x72)
            case 0x09: bytes.append(0x5C); bytes.append(0x74)
            default:
                appendRaw("\\u00")
                bytes.append(0x30 + (b >> 4))  // a control character: < 0x20
                let low = b & 0xF
                bytes.append(low < 10 ? 0x30 + low : 0x57 + low)
            }
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        bytes.append(0x22)
    }

    /// Appends an integer in decimal.
    mutating func appendInteger<I: BinaryInteger>(_ value: I) {
        if let small = UInt64(exactly: value) { appendDecimal(small); return }
        bytes.append(0x2D)  // -
        // The magnitude of a negative integer fits a UInt64 for every type the tool writes.
        appendDecimal(UInt64(value.magnitude))
    }

    private mutating func appendDecimal(_ value: UInt64) {
        guard value >= 10 else { bytes.append(0x30 + UInt8(value)); return }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: UInt64.max has 20 digits
        var count = 0
        var v = value
        withUnsafeMutableBytes(of: &digits) { buffer in
            while v > 0 {
                count += 1
                buffer[24 - count] = 0x30 + UInt8(v % 10)
                v /= 10
            }
            bytes.append(contentsOf: buffer[(24 - count)...])
        }
    }

    /// Appends `id` as a quoted string, as `UUID.uuidString` writes it (upper-case hex, dashes).
    mutating func appendString(_ id: UUID) {
        // Formed in a fixed scratch and appended at once: one capacity check, not 38.
        var scratch: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &scratch) { out in
            withUnsafeBytes(of: id.uuid) { raw in
                out[0] = 0x22
                var j = 1
                for i in 0..<16 {
                    if i == 4 || i == 6 || i == 8 || i == 10 { out[j] = 0x2D; j += 1 }
                    out[j] = Self.upperHex(raw[i] >> 4)
                    out[j + 1] = Self.upperHex(raw[i] & 0xF)
                    j += 2
                }
                out[37] = 0x22
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: out[0..<38]))
        }
    }

    /// Appends `date` as a quoted ISO 8601 string (``ISODate/format(_:)-(Date)``).
    mutating func appendString(_ date: Date) {
        bytes.append(0x22)
        appendISO(date)
        bytes.append(0x22)
    }

    /// Appends a log timestamp as a quoted ISO 8601 string, to the nanosecond
    /// (``ISODate/format(_:)-(LogTimestamp)``).
    mutating func appendString(_ timestamp: LogTimestamp) {
        bytes.append(0x22)
        appendISO(timestamp)
        bytes.append(0x22)
    }

    // MARK: ISO 8601

    /// `date` as ISO 8601, unquoted: `2025-03-01T08:30:15Z`, or with the fewest fractional
    /// digits that read back as the same `Date` (`…15.25Z`); `invalid` for a date no text names.
    mutating func appendISO(_ date: Date) {
        let r = date.timeIntervalSinceReferenceDate
        guard r.isFinite, abs(r) < 1e15 else { appendRaw("invalid"); return }
        // Whole seconds and the fraction, both exact: r - floor(r) loses no bits.
        let wholeSinceReference = r.rounded(.down)
        let fraction = r - wholeSinceReference
        appendISO(wholeSecondsSince1970: Int(wholeSinceReference) + ISODate.referenceEpochSince1970)
        if fraction > 0 { appendFraction(of: r, whole: wholeSinceReference) }
        bytes.append(0x5A)  // Z
    }

    /// Appends `.ddd`, the fewest fraction digits that the parser (``ISODate/tryParse(utf8:)``:
    /// the whole seconds plus the fraction's correctly rounded value) turns back into `r`.
    ///
    /// Why not the fraction's own shortest form: the fraction `r - whole` is exact, and its
    /// shortest digits can be many more than the date needs (15.1 s past a minute in 2025
    /// printed as `15.10000002384185791`, since the date's `Double` holds the whole seconds
    /// too). For k digits the nearest candidates are tried: an integer n below 10^15 and 10^k
    /// are exact `Double`s, so n / 10^k is correctly rounded, the value the parser reads.
    private mutating func appendFraction(of r: Double, whole: Double) {
        let fraction = r - whole
        var scale = 1.0
        for digits in 1...15 {
            scale *= 10
            let nearest = (fraction * scale).rounded()
            for candidate in [nearest, nearest - 1, nearest + 1] where candidate >= 1 && candidate < scale {
                guard whole + candidate / scale == r else { continue }
                bytes.append(0x2E)  // .
                let value = UInt64(candidate)
                var width = 1
                var power: UInt64 = 10
                while width < digits && value >= power { width += 1; power *= 10 }
                for _ in width..<digits { bytes.append(0x30) }
                appendInteger(value)
                while bytes.last == 0x30 { bytes.removeLast() }
                return
            }
        }
        // More than 15 digits (a fraction near the Double's last bits): its own shortest form,
        // exact since whole + fraction is r.
        appendRaw(ISODate.shortestDecimalFraction(fraction))
    }

    /// A log timestamp as ISO 8601, unquoted, exactly as stored: nanoseconds, trailing zeros
    /// trimmed (`2025-03-01T08:30:15.000000123Z`).
    mutating func appendISO(_ timestamp: LogTimestamp) {
        // Floor division without forming whole * 10^9, which overflows near Int64.min (the
        // earliest recording time `--as-of` clamps to).
        var (whole, remainder) = timestamp.nanosecondsSince1970.quotientAndRemainder(dividingBy: 1_000_000_000)
        if remainder < 0 { whole -= 1; remainder += 1_000_000_000 }
        appendISO(wholeSecondsSince1970: Int(whole))
        if remainder > 0 {
            var digits = 9
            while remainder % 10 == 0 { remainder /= 10; digits -= 1 }
            bytes.append(0x2E)
            appendDigits(Int(remainder), digits)
        }
        bytes.append(0x5A)
    }

    /// `YYYY-MM-DDThh:mm:ss` (a year outside 0...9999 as its decimal, sign and all).
    private mutating func appendISO(wholeSecondsSince1970 whole: Int) {
        let days = Int((Double(whole) / 86_400).rounded(.down))
        let secs = whole - days * 86_400
        let (y, m, d) = ISODate.civilFromDays(days)
        guard y >= 0 && y <= 9999 else {
            appendInteger(y)
            for (separator, value) in [(0x2D, m), (0x2D, d), (0x54, secs / 3600), (0x3A, secs / 60 % 60), (0x3A, secs % 60)] as [(UInt8, Int)] {
                bytes.append(separator)
                appendDigits(value, 2)
            }
            return
        }
        var scratch: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &scratch) { out in
            func two(_ value: Int, at i: Int) {
                out[i] = 0x30 + UInt8(value / 10)
                out[i + 1] = 0x30 + UInt8(value % 10)
            }
            two(y / 100, at: 0); two(y % 100, at: 2)
            out[4] = 0x2D; two(m, at: 5); out[7] = 0x2D; two(d, at: 8)
            out[10] = 0x54; two(secs / 3600, at: 11); out[13] = 0x3A
            two(secs / 60 % 60, at: 14); out[16] = 0x3A; two(secs % 60, at: 17)
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: out[0..<19]))
        }
    }

    /// `value` in exactly `count` decimal digits, zero-padded (`value` < 10^count, `count` <= 16).
    private mutating func appendDigits(_ value: Int, _ count: Int) {
        var scratch: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &scratch) { out in
            var value = value
            for i in stride(from: count - 1, through: 0, by: -1) {
                out[i] = 0x30 + UInt8(value % 10)
                value /= 10
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: out[0..<count]))
        }
    }

    @inline(__always) private static func upperHex(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? 0x30 + nibble : 0x37 + nibble
    }

}
