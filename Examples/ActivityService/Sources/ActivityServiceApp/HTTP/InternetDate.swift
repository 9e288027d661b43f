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
        write(date, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `date` in UTC with milliseconds (`2025-03-01T07:30:00.250Z`, 24 bytes; years
    /// outside 0...9999 print with more digits or a sign, as they only come from bad input).
    static func write(_ date: Date, into bytes: inout [UInt8]) {
        let milliseconds = (date.timeIntervalSince1970 * 1_000).rounded(.down)
        guard milliseconds.isFinite, abs(milliseconds) < 2.5e14 else { return bytes.append(contentsOf: "invalid".utf8) }
        let total = Int64(milliseconds)
        let days = total >= 0 ? total / 86_400_000 : (total - 86_399_999) / 86_400_000
        let msOfDay = Int(total - days * 86_400_000)
        let (year, month, day) = civil(fromDays: days)
        guard (0...9_999).contains(year) else { return bytes.append(contentsOf: "\(year)-invalid".utf8) }
        let seconds = msOfDay / 1_000
        // Filled in place and appended once: appending byte by byte checked the array's
        // uniqueness 24 times per date.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { out in
            func put(_ value: Int, _ width: Int, at offset: Int) {
                var value = value
                for index in stride(from: offset + width - 1, through: offset, by: -1) {
                    out[index] = UInt8(truncatingIfNeeded: 48 + value % 10)
                    value /= 10
                }
            }
            put(year, 4, at: 0)
            out[4] = 45  // -
            put(month, 2, at: 5)
            out[7] = 45
            put(day, 2, at: 8)
            out[10] = 84  // T
            put(seconds / 3_600, 2, at: 11)
            out[13] = 58  // :
            put(seconds / 60 % 60, 2, at: 14)
            out[16] = 58
            put(seconds % 60, 2, at: 17)
            out[19] = 46  // .
            put(msOfDay % 1_000, 3, at: 20)
            out[23] = 90  // Z
            bytes.append(contentsOf: UnsafeBufferPointer(out))
        }
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
