@testable import EventKernelTool
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

@Suite("ISO 8601 dates in the CLI's JSON Lines")
struct ISODateTests {
    @Test("format then parse gives back exactly the same Date, before and after 2001")
    func exactRoundTrip() throws {
        var state: UInt64 = 0x1234_5678
        func next() -> UInt64 {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return state
        }
        var dates = [Date(timeIntervalSinceReferenceDate: 0), Date(timeIntervalSinceReferenceDate: -0.5),
                     Date(timeIntervalSince1970: 0), Date(timeIntervalSinceReferenceDate: 1e-7)]
        for _ in 0..<20_000 {
            // Seconds since 2001 anywhere in 1900...2100, at full Double precision.
            let r = Double(Int64(bitPattern: next() % 6_300_000_000) - 3_150_000_000) + Double(next() % 1_000_000_007) / 1_000_000_007
            dates.append(Date(timeIntervalSinceReferenceDate: r))
        }
        for date in dates {
            let text = ISODate.format(date)
            let back = try ISODate.parse(text)
            #expect(back.timeIntervalSinceReferenceDate == date.timeIntervalSinceReferenceDate, "\(text)")
            if back != date { return }
        }
    }

    @Test("formatting is ISO 8601 in UTC")
    func format() throws {
        #expect(ISODate.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
        #expect(ISODate.format(Date(timeIntervalSinceReferenceDate: 0.5)) == "2001-01-01T00:00:00.5Z")
        #expect(try ISODate.parse("2001-01-01T01:00:00+01:00") == Date(timeIntervalSinceReferenceDate: 0))
        #expect(try ISODate.parse("2024-02-29") == Date(timeIntervalSince1970: 1_709_164_800))
    }

    @Test("small fractions print in their shortest form, never as a binary expansion")
    func smallFractions() throws {
        #expect(ISODate.shortestDecimalFraction(5e-05) == ".00005")
        #expect(ISODate.shortestDecimalFraction(1.2345e-07) == ".00000012345")
        #expect(ISODate.shortestDecimalFraction(0.25) == ".25")
        let date = Date(timeIntervalSinceReferenceDate: 1e-7)
        let text = ISODate.format(date)
        #expect(text == "2001-01-01T00:00:00.0000001Z", "\(text)")
        #expect(try ISODate.parse(text) == date)
        // Every formatted fraction is at most as long as the shortest round-trip digits need.
        for value in [3e-05, 7.5e-06, 1e-09, 9.999e-05] {
            let fraction = ISODate.shortestDecimalFraction(value)
            #expect(!fraction.contains("e") && fraction.count <= 20, "\(value): \(fraction)")
            #expect(Double("0" + fraction) == value)
        }
    }

    /// A newcomer's probe: 2025-03-01T08:30:15.1Z was exported as `…15.10000002384185791Z`,
    /// the fraction's own shortest digits, though `.1` reads back as the same date.
    @Test("a date prints with the fewest fraction digits that read back as it")
    func fewestDigits() throws {
        let date = try ISODate.parse("2025-03-01T08:30:15.1Z")
        #expect(ISODate.format(date) == "2025-03-01T08:30:15.1Z")
        var rng = SplitMix64(seed: 0xF4AC)
        for _ in 0..<20_000 {
            // A date in 1900...2100 given with 1 to 9 fraction digits: printed with at most as many.
            let digits = Int(rng.next() % 9) + 1
            var fractionText = String(rng.next() % 1_000_000_000)
            fractionText = String(repeating: "0", count: 9 - fractionText.count) + fractionText
            let whole = Int64(rng.next() % 6_300_000_000) - 3_150_000_000 + Int64(ISODate.referenceEpochSince1970)
            let text = ISODate.format(LogTimestamp(nanosecondsSince1970: whole * 1_000_000_000)).dropLast() + "." + fractionText.prefix(digits) + "Z"
            let parsed = try ISODate.parse(String(text))
            let printed = ISODate.format(parsed)
            #expect(try ISODate.parse(printed) == parsed, "\(text) printed \(printed)")
            let printedDigits = printed.split(separator: ".").dropFirst().first.map { $0.count - 1 } ?? 0
            #expect(printedDigits <= digits, "\(text) printed \(printed)")
            if printedDigits > digits { return }
        }
    }

    /// A newcomer's probe: `--where 'opened<=2024-12-31T23:59:59.999999999Z'` matched an entity
    /// opened at midnight the next day (the text rounded to the same `Date`). An instant is
    /// compared with its text exactly.
    @Test("a date-time argument compares with stored dates exactly as written")
    func exactComparison() throws {
        let midnight = try ISODate.parse("2025-01-01T00:00:00Z")
        let before = try ISODate.parseMoment("2024-12-31T23:59:59.999999999Z")
        #expect(before.start == midnight, "the Double cannot tell them apart")
        #expect(before.order(of: midnight) == .orderedDescending)
        #expect(try ISODate.parseMoment("2025-01-01T00:00:00.000000001Z").order(of: midnight) == .orderedAscending)
        #expect(try ISODate.parseMoment("2025-01-01T00:00:00Z").order(of: midnight) == .orderedSame)
        #expect(try ISODate.parseMoment("2025-01-01T00:00:00.000Z").order(of: midnight) == .orderedSame)
        // Against a reference: dates whose fraction is m / 2^k (k ≤ 20) have at most 20 decimal
        // digits, which Decimal holds exactly; literals of 1 to 24 digits around them.
        var rng = SplitMix64(seed: 0xE4AC7)
        let posix = Locale(identifier: "en_US_POSIX")
        for _ in 0..<5_000 {
            let k = Int(rng.next() % 21)
            let m = rng.next() % (1 << UInt64(k))
            let whole = Int(rng.next() % 2_000_000_000)
            let seconds = Double(whole) + Double(m) / Double(1 << UInt64(k))
            let exact = Decimal(whole) + Decimal(m) / Decimal(sign: .plus, exponent: 0, significand: Decimal(1 << UInt64(k)))
            var digits = (0..<Int(rng.next() % 24 + 1)).map { _ in UInt8(rng.next() % 10) }
            if rng.next() % 3 == 0 {
                // The stored value's own digits, sometimes cut or extended.
                let text = "\(exact)"
                digits = text.split(separator: ".").dropFirst().first.map { $0.compactMap { $0.wholeNumberValue.map(UInt8.init) } } ?? []
                if rng.next() % 2 == 0, !digits.isEmpty { digits.removeLast() }
            }
            let written = Decimal(string: "\(whole)." + digits.map(String.init).joined(), locale: posix) ?? Decimal(whole)
            let expected: ComparisonResult = exact < written ? .orderedAscending : exact > written ? .orderedDescending : .orderedSame
            let got = ISODate.compare(seconds, toWhole: whole, fraction: digits)
            #expect(got == expected, "\(exact) against \(whole).\(digits.map(String.init).joined())")
            if got != expected { return }
        }
    }

    @Test("log timestamps print exactly as stored, to the nanosecond")
    func exactTimestamps() {
        #expect(ISODate.format(LogTimestamp(nanosecondsSince1970: 1_740_818_415_000_000_123)) == "2025-03-01T08:40:15.000000123Z")
        #expect(ISODate.format(LogTimestamp(nanosecondsSince1970: 1_740_818_415_120_000_000)) == "2025-03-01T08:40:15.12Z")
        #expect(ISODate.format(LogTimestamp(nanosecondsSince1970: 1_740_818_415_000_000_000)) == "2025-03-01T08:40:15Z")
        #expect(ISODate.format(LogTimestamp(nanosecondsSince1970: -1)) == "1969-12-31T23:59:59.999999999Z")
    }
}
