import EventLog
import Foundation

/// ISO 8601 dates for the command line and JSON Lines, parsed and formatted without
/// Foundation formatters (fast, thread-safe, and lossless for `Date`'s `Double`).
///
/// Accepted: `2025-03-01` (midnight UTC), `2025-03-01T08:30`, `2025-03-01T08:30:15`,
/// `2025-03-01T08:30:15.123456Z`, with an optional `Z` or `±hh:mm` offset (none means UTC).
/// Formatted: `2025-03-01T08:30:15Z`, or with the fewest fractional digits that reproduce the
/// exact `Date` when parsed back (`2025-03-01T08:30:15.25Z`); log timestamps with their exact
/// nanoseconds.
enum ISODate {
    struct ParseError: Error, CustomStringConvertible {
        var text: String
        var description: String {
            "\"\(text)\" is not an ISO 8601 date or date-time (expected e.g. 2025-03-01 or 2025-03-01T08:30:00Z)"
        }
    }

    static func parse(_ text: String) throws(ParseError) -> Date {
        guard let date = tryParse(text) else { throw ParseError(text: text) }
        return date
    }

    static func tryParse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { tryParse(utf8: $0) }
    }

    /// ``tryParse(_:)`` of UTF-8 bytes (import reads dates from its lines' bytes; export checks
    /// that each date it writes reads back).
    static func tryParse(utf8 text: UnsafeBufferPointer<UInt8>) -> Date? {
        guard let (whole, fraction) = fields(text) else { return nil }
        // Built on the reference date (2001), which is what a Date stores: the whole seconds
        // are an exact integer shift from 1970, and adding the fraction back rounds once, so
        // parse(format(d)) == d exactly.
        let wholeSinceReference = Double(whole - referenceEpochSince1970)
        if fraction.isEmpty { return Date(timeIntervalSinceReferenceDate: wholeSinceReference) }
        // "0." and the digits, read by the standard library's correctly rounded parser; spelled
        // in place (through an array of digits and a `String` per character it was most of a
        // parse).
        let fractionValue = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: fraction.count + 2) { digits in
            digits[0] = 48
            digits[1] = 46
            for (k, i) in fraction.enumerated() { digits[k + 2] = text[i] }
            return Double(String(decoding: UnsafeBufferPointer(digits), as: UTF8.self)) ?? 0
        }
        return Date(timeIntervalSinceReferenceDate: wholeSinceReference + fractionValue)
    }

    /// `text` as a log timestamp, exactly: a recording time as `format(_:)-(LogTimestamp)` prints it
    /// parses back to the same nanosecond (a `Date`, a `Double`, is 100 ns coarse today), so an
    /// event's own time names that event. Digits past the ninth are dropped.
    static func timestamp(_ text: String) throws(ParseError) -> LogTimestamp {
        guard let (whole, fraction) = components(text) else { throw ParseError(text: text) }
        var nanos = 0
        for k in 0..<9 { nanos = nanos * 10 + (k < fraction.count ? Int(fraction[k]) : 0) }
        let (seconds, overflow) = whole.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow, seconds <= Int(Int64.max) - nanos, seconds >= Int(Int64.min) else { throw ParseError(text: text) }
        return LogTimestamp(nanosecondsSince1970: Int64(seconds + nanos))
    }

    /// Whole seconds since 1970 (UTC) and the fraction's decimal digits, or `nil` when `text` is
    /// not ISO 8601.
    private static func components(_ text: String) -> (whole: Int, fraction: [UInt8])? {
        var text = text
        return text.withUTF8 { components($0) }
    }

    /// ``components(_:)-(String)`` of UTF-8 bytes.
    private static func components(_ b: UnsafeBufferPointer<UInt8>) -> (whole: Int, fraction: [UInt8])? {
        fields(b).map { ($0.whole, $0.fraction.map { b[$0] - 48 }) }
    }

    /// Whole seconds since 1970 (UTC) and where the fraction's digits are in `b`, or `nil` when
    /// `b` is not ISO 8601: the one reader of the syntax.
    private static func fields(_ b: UnsafeBufferPointer<UInt8>) -> (whole: Int, fraction: Range<Int>)? {
        // A cursor of its own, not nested functions sharing a captured index: the runtime
        // checked every access of a captured variable for exclusivity (a tenth of an export of
        // dated entities, `perf`).
        struct Cursor {
            let b: UnsafeBufferPointer<UInt8>
            var i = 0
            mutating func number(_ digits: Int) -> Int? {
                guard i + digits <= b.count else { return nil }
                var v = 0
                for k in i..<(i + digits) {
                    guard b[k] >= 48 && b[k] <= 57 else { return nil }
                    v = v * 10 + Int(b[k] - 48)
                }
                i += digits
                return v
            }
            mutating func expect(_ c: UInt8) -> Bool {
                guard i < b.count, b[i] == c else { return false }
                i += 1
                return true
            }
        }
        var c = Cursor(b: b)
        guard let year = c.number(4), c.expect(45), let month = c.number(2), c.expect(45), let day = c.number(2),
              (1...12).contains(month), (1...daysIn(month, year)).contains(day) else { return nil }
        var hour = 0, minute = 0, second = 0
        var fraction = 0..<0
        var offset = 0
        if c.i < b.count {
            guard b[c.i] == 84 || b[c.i] == 116 || b[c.i] == 32 else { return nil }  // T, t or space
            c.i += 1
            guard let h = c.number(2), c.expect(58), let m = c.number(2), h < 24, m < 60 else { return nil }
            hour = h; minute = m
            if c.expect(58) {
                // No leap second: a Date has none, and :60 stored as :59 would be another time.
                guard let s = c.number(2), s < 60 else { return nil }
                second = s
                if c.expect(46) || c.expect(44) {
                    let first = c.i
                    while c.i < b.count, b[c.i] >= 48 && b[c.i] <= 57 { c.i += 1 }
                    guard c.i > first else { return nil }
                    fraction = first..<c.i
                }
            }
            if c.i < b.count {
                if b[c.i] == 90 || b[c.i] == 122 { c.i += 1 }  // Z
                else if b[c.i] == 43 || b[c.i] == 45 {
                    let sign = b[c.i] == 45 ? -1 : 1
                    c.i += 1
                    guard let oh = c.number(2) else { return nil }
                    _ = c.expect(58)
                    guard let om = c.number(2), oh < 24, om < 60 else { return nil }
                    offset = sign * (oh * 3600 + om * 60)
                } else { return nil }
            }
            guard c.i == b.count else { return nil }
        }
        return (daysFromCivil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset, fraction)
    }

    /// 2001-01-01T00:00:00Z in seconds since 1970.
    static let referenceEpochSince1970 = 978_307_200

    static func format(_ date: Date) -> String {
        var buffer = JSONBuffer(capacity: 32)
        buffer.appendISO(date)
        return buffer.text
    }

    /// A log timestamp exactly as stored: nanoseconds, trailing zeros trimmed
    /// (`2025-03-01T08:30:15.000000123Z`).
    static func format(_ timestamp: LogTimestamp) -> String {
        var buffer = JSONBuffer(capacity: 32)
        buffer.appendISO(timestamp)
        return buffer.text
    }

    /// The shortest decimal that reads back as the same `Double` (Swift's own shortest form),
    /// written as `.ddd` without exponent: `5e-05` becomes `.00005`, never a binary expansion.
    /// - Parameter value: A fraction in (0, 1).
    static func shortestDecimalFraction(_ value: Double) -> String {
        let text = "\(value)"   // "0.25", "5e-05" or "1.2345e-07"
        guard let e = text.firstIndex(of: "e") else {
            return text.firstIndex(of: ".").map { String(text[$0...]) } ?? ""
        }
        let mantissa = text[..<e].filter { $0 != "." }
        let exponent = Int(text[text.index(after: e)...]) ?? 0   // negative for a fraction
        return "." + String(repeating: "0", count: max(0, -exponent - 1)) + mantissa
    }

    private static func daysIn(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    // Howard Hinnant's algorithms.
    static func daysFromCivil(_ y0: Int, _ m: Int, _ d: Int) -> Int {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ z0: Int) -> (Int, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }
}

extension ISODate {
    /// Whether `text` is a bare date (`2025-03-01`): a whole day, with no time of day.
    static func isBareDate(_ text: String) -> Bool {
        text.utf8.count == 10 && tryParse(text) != nil
    }

    /// Parses an inclusive upper bound (the end of `A...B`, `replay --as-of`). The one rule for
    /// every such option: a bare date covers its whole day, so it stands for the last instant
    /// before the next midnight (UTC); a date-time stands for itself.
    /// - Throws: ``ParseError`` when `text` is not an ISO 8601 date or date-time.
    static func parseInclusiveUpperBound(_ text: String) throws(ParseError) -> Date {
        let date = try parse(text)
        guard isBareDate(text) else { return date }
        // The largest Date before the next midnight: every instant of the day is at or below it.
        return Date(timeIntervalSinceReferenceDate: (date.timeIntervalSinceReferenceDate + 86_400).nextDown)
    }
}

extension ISODate {
    /// A date argument compared with stored dates: a date-time is that instant; a bare date
    /// (`2025-03-01`) is its whole day, UTC, from its midnight to the next (exclusive). The one
    /// rule for `query`'s `--where` and `--valid-at`, the same as ``parseInclusiveUpperBound(_:)``'s.
    struct Moment {
        /// The instant, or the day's first.
        var start: Date
        /// The next day's midnight for a bare date; `nil` for an instant.
        var dayEnd: Date?
        /// An instant exactly as written: whole seconds since 2001 and the fraction's decimal
        /// digits. A `Date` holds about a tenth of a microsecond today, so `start` alone made
        /// `<= 2024-12-31T23:59:59.999999999Z` true of midnight, the next day.
        var exact: (whole: Int, fraction: [UInt8])?

        /// Where `date` falls: before (`orderedAscending`), within the day or at the instant
        /// (`orderedSame`), after (`orderedDescending`). So `<=` a day is "by its end", `<` "before
        /// it began", `=` "on it". An instant is compared with its text exactly.
        func order(of date: Date) -> ComparisonResult {
            if dayEnd == nil, let exact {
                return ISODate.compare(date.timeIntervalSinceReferenceDate, toWhole: exact.whole, fraction: exact.fraction)
            }
            if date < start { return .orderedAscending }
            if let dayEnd { return date < dayEnd ? .orderedSame : .orderedDescending }
            return date == start ? .orderedSame : .orderedDescending
        }

        /// Whether something true from `from` until `until` (exclusive; `nil`: still true) was
        /// true at the instant, or at some time of the day.
        func overlaps(from: Date, until: Date?) -> Bool {
            guard dayEnd.map({ from < $0 }) ?? (order(of: from) != .orderedDescending) else { return false }
            guard let until else { return true }
            return dayEnd == nil ? order(of: until) == .orderedDescending : until > start
        }
    }

    /// Parses a ``Moment``.
    /// - Throws: ``ParseError`` when `text` is not an ISO 8601 date or date-time.
    static func parseMoment(_ text: String) throws(ParseError) -> Moment {
        let date = try parse(text)
        if isBareDate(text) { return Moment(start: date, dayEnd: date.addingTimeInterval(86_400)) }
        let exact = components(text).map { (whole: $0.whole - referenceEpochSince1970, fraction: $0.fraction) }
        return Moment(start: date, dayEnd: nil, exact: exact)
    }

    /// How `seconds` (since 2001, as a `Date` stores them) compares with `whole` seconds and the
    /// decimal `fraction` digits, exactly: the `Double` is a binary fraction, whose decimal
    /// digits end, and are produced one at a time from its integer significand.
    static func compare(_ seconds: Double, toWhole whole: Int, fraction: [UInt8]) -> ComparisonResult {
        guard seconds.isFinite else { return seconds < 0 ? .orderedAscending : .orderedDescending }
        let floor = seconds.rounded(.down)
        if floor < Double(whole) { return .orderedAscending }
        if floor > Double(whole) { return .orderedDescending }
        let part = seconds - floor  // exact, in [0, 1)
        guard part > 0 else { return fraction.contains { $0 != 0 } ? .orderedAscending : .orderedSame }
        // part = significand * 2^-shift, with the significand an integer.
        let shift = -Int(part.exponent) + Double.significandBitCount
        guard shift <= 120 else {
            // A fraction below 2^-68 s: no date text names one; compare as doubles.
            let written = Double("0." + String(fraction.map { Character(Unicode.Scalar(48 + $0)) })) ?? 0
            return part < written ? .orderedAscending : part > written ? .orderedDescending : .orderedSame
        }
        var remainder = UInt128(part.significandBitPattern | (part.isNormal ? 1 << UInt64(Double.significandBitCount) : 0))
        let mask = (UInt128(1) << UInt128(shift)) - 1
        var i = 0
        while remainder != 0 || i < fraction.count {
            remainder *= 10
            let digit = UInt8(truncatingIfNeeded: remainder >> UInt128(shift))
            remainder &= mask
            let written = i < fraction.count ? fraction[i] : 0
            if digit != written { return digit < written ? .orderedAscending : .orderedDescending }
            i += 1
        }
        return .orderedSame
    }

    /// ``parseMoment(_:)``, `nil` for text that is not ISO 8601.
    static func tryParseMoment(_ text: String) -> Moment? { try? parseMoment(text) }
}

extension ISODate {
    /// Parses an inclusive upper bound on recording time (`replay --as-of`) to the log's exact
    /// nanoseconds, without passing through `Date` (whose `Double` holds only about a tenth of a
    /// microsecond today, so that `--as-of` an event's own `recordedAt` could miss it). Digits
    /// beyond the nanosecond are dropped, which keeps every instant at or before the text; a bare
    /// date covers its whole day, to the last nanosecond before the next midnight (the rule of
    /// ``parseInclusiveUpperBound(_:)``). Years beyond a log timestamp's range clamp to it.
    /// - Throws: ``ParseError`` when `text` is not an ISO 8601 date or date-time.
    static func parseRecordingTimeUpperBound(_ text: String) throws(ParseError) -> LogTimestamp {
        guard let (whole, fraction) = components(text) else { throw ParseError(text: text) }
        var nanos = 0
        for k in 0..<9 { nanos = nanos * 10 + (k < fraction.count ? Int(fraction[k]) : 0) }
        if isBareDate(text) { nanos = 86_400 * 1_000_000_000 - 1 }
        // Int64 nanoseconds hold the years 1678...2262.
        let limit = Int64.max / 1_000_000_000 - 86_400
        guard whole > -limit else { return .min }
        guard whole < limit else { return .max }
        return LogTimestamp(nanosecondsSince1970: Int64(whole) * 1_000_000_000 + Int64(nanos))
    }
}

/// `A...B`: two ISO dates, both ends inclusive; a bare date as `B` covers that whole day
/// (``ISODate/parseInclusiveUpperBound(_:)``), so `2025-03-01...2025-03-01` is March 1.
func parseDateRange(_ text: String, flag: String) throws -> ClosedRange<Date> {
    let parts = text.components(separatedBy: "...")
    guard parts.count == 2 else {
        throw ToolError(.badInput, "\(flag) expects A...B (two ISO 8601 dates), got \"\(text)\"")
    }
    do {
        let a = try ISODate.parse(parts[0]), b = try ISODate.parseInclusiveUpperBound(parts[1])
        guard a <= b else { throw ToolError(.badInput, "\(flag): \(parts[1]) is before \(parts[0])") }
        return a...b
    } catch let error as ISODate.ParseError {
        throw ToolError(.badInput, "\(flag): \(error)")
    }
}

extension ISODate {
    /// A recording time exactly as export writes it (``format(_:)-(LogTimestamp)``): a date-time
    /// with at most nine fraction digits within a log timestamp's range, to the nanosecond;
    /// `nil` for anything else (a bare date, more digits, years beyond 1678...2262), which
    /// would stand for another time.
    static func parseRecordingTime(_ text: String) -> LogTimestamp? {
        guard !isBareDate(text), let (whole, fraction) = components(text), fraction.count <= 9 else { return nil }
        var nanos: Int64 = 0
        for k in 0..<9 { nanos = nanos * 10 + (k < fraction.count ? Int64(fraction[k]) : 0) }
        let (scaled, overflow) = Int64(whole).multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return nil }
        let (total, overflow2) = scaled.addingReportingOverflow(nanos)
        guard !overflow2 else { return nil }
        return LogTimestamp(nanosecondsSince1970: total)
    }
}
