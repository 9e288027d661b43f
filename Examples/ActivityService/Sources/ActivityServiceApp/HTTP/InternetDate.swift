import Foundation

/// RFC 3339 dates (`2025-03-01T07:30:00.250Z`), the service's one date format in bodies, query
/// parameters and feeds: written in UTC with milliseconds, read with or without a fraction, with
/// `Z` or an offset.
///
/// Reading goes through Foundation's ISO 8601 style (a request has one or two dates). Writing is
/// by hand: a page of 50 activities has up to 100 dates, and Foundation's calendar arithmetic
/// for them was a tenth of a GET's CPU time in the load test's profile.
enum InternetDate {
    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    private static let withoutFraction = Date.ISO8601FormatStyle()

    /// Formats `date` in UTC with milliseconds.
    static func format(_ date: Date) -> String {
        var bytes: [UInt8] = []
        var day = Day()
        write(date, into: &bytes, day: &day)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The last calendar date written, as `YYYY-MM-DD`: the dates of one page mostly fall on a
    /// few days, and the calendar arithmetic is most of a date's cost.
    struct Day {
        var number = Int64.min
        var text: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    }

    /// Appends `date` in UTC with milliseconds (`2025-03-01T07:30:00.250Z`, 24 bytes).
    static func write(_ date: Date, into bytes: inout [UInt8], day: inout Day) {
        let milliseconds = (date.timeIntervalSince1970 * 1_000).rounded(.down)
        guard milliseconds.isFinite, abs(milliseconds) < 2.5e14 else { return bytes.append(contentsOf: "invalid".utf8) }
        let total = Int64(milliseconds)
        let days = total >= 0 ? total / 86_400_000 : (total - 86_399_999) / 86_400_000
        if days != day.number {
            let (year, month, dayOfMonth) = civil(fromDays: days)
            guard (0...9_999).contains(year) else { return bytes.append(contentsOf: "\(year)-invalid".utf8) }
            let (y1, y2) = digitPair(year / 100), (y3, y4) = digitPair(year % 100)
            let (m1, m2) = digitPair(month), (d1, d2) = digitPair(dayOfMonth)
            day = Day(number: days, text: (y1, y2, y3, y4, 45, m1, m2, 45, d1, d2))
        }
        let msOfDay = Int(total - days * 86_400_000)
        let seconds = msOfDay / 1_000, millis = msOfDay % 1_000
        let (h1, h2) = digitPair(seconds / 3_600), (n1, n2) = digitPair(seconds / 60 % 60), (s1, s2) = digitPair(seconds % 60)
        let (f1, f2) = digitPair(millis / 10)
        let f3 = UInt8(truncatingIfNeeded: 48 + millis % 10)
        let t = day.text
        // One append of a fixed-size tuple's bytes: appending byte by byte checked the
        // array's uniqueness 24 times per date.
        let text = (t.0, t.1, t.2, t.3, t.4, t.5, t.6, t.7, t.8, t.9, UInt8(84), h1, h2, UInt8(58), n1, n2, UInt8(58), s1, s2,
                    UInt8(46), f1, f2, f3, UInt8(90))
        withUnsafeBytes(of: text) { bytes.append(contentsOf: $0) }
    }

    /// The two ASCII digits of `value` (0...99).
    @inline(__always)
    private static func digitPair(_ value: Int) -> (UInt8, UInt8) {
        (UInt8(truncatingIfNeeded: 48 + value / 10), UInt8(truncatingIfNeeded: 48 + value % 10))
    }

    /// Parses an RFC 3339 date-time.
    /// - Returns: `nil` for anything else (the caller says which field).
    static func parse(_ text: some StringProtocol) -> Date? {
        let text = String(text)
        return (try? withFraction.parse(text)) ?? (try? withoutFraction.parse(text))
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's civil_from_days).
    private static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * shiftedMonth + 2) / 5 + 1)
        let month = Int(shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9)
        return (Int(yearOfEra + era * 400) + (month <= 2 ? 1 : 0), month, day)
    }
}
