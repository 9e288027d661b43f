@testable import EventKernelTool
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
}
