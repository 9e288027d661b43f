import Foundation

/// RFC 3339 dates (`2025-03-01T07:30:00.250Z`), the service's one date format in bodies, query
/// parameters and feeds: written in UTC with milliseconds, read with or without a fraction, with
/// `Z` or an offset. Foundation's ISO 8601 style does it in well under a microsecond.
enum InternetDate {
    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    private static let withoutFraction = Date.ISO8601FormatStyle()

    /// Formats `date` in UTC with milliseconds.
    static func format(_ date: Date) -> String {
        date.formatted(withFraction)
    }

    /// Parses an RFC 3339 date-time.
    /// - Returns: `nil` for anything else (the caller says which field).
    static func parse(_ text: some StringProtocol) -> Date? {
        let text = String(text)
        return (try? withFraction.parse(text)) ?? (try? withoutFraction.parse(text))
    }
}
