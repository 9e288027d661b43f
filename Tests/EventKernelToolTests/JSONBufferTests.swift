@testable import EventKernelTool
import EventLog
import Foundation
import Testing
import EventKernelTestSupport

/// The byte writer behind every JSON line the tool prints: each value checked against a reader
/// or formatter it does not share code with.
@Suite("JSON written as bytes")
struct JSONBufferTests {
    private func text(_ write: (inout JSONBuffer) -> Void) -> String {
        var buffer = JSONBuffer()
        write(&buffer)
        return buffer.text
    }

    @Test("strings read back as themselves, control characters, quotes and backslashes escaped")
    func strings() throws {
        #expect(text { $0.appendString("plain") } == "\"plain\"")
        #expect(text { $0.appendString("a\"b\\c\nd\re\tf") } == #""a\"b\\c\nd\re\tf""#)
        #expect(text { $0.appendString("\u{01}\u{1f}\u{7f}") } == "\"\\u0001\\u001f\u{7f}\"")
        #expect(text { $0.appendString("") } == "\"\"")
        var random = SplitMix64(seed: 0x9E37_79B9_7F4A_7C15)
        func next() -> UInt64 { random.next() }
        let alphabet: [Character] = ["a", "\"", "\\", "\n", "\u{0}", "\u{1b}", "é", "€", "😀", " ", "/", "\u{2028}"]
        for _ in 0..<2_000 {
            let s = String((0..<Int(next() % 12)).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] })
            let json = text { $0.appendString(s) }
            let back = try JSONSerialization.jsonObject(with: Data(json.utf8), options: .fragmentsAllowed) as? String
            #expect(back == s, "\(json)")
            #expect(try JSONParser.parse(Array(json.utf8)) == .string(s))
        }
    }

    @Test("integers in decimal, at both ends of their types")
    func integers() {
        for value: UInt64 in [0, 9, 10, 99, 100, 1_060_073, UInt64(Int64.max), .max] {
            #expect(text { $0.appendInteger(value) } == String(value))
        }
        for value: Int64 in [-1, -10, .min, .max, -1_234_567] {
            #expect(text { $0.appendInteger(value) } == String(value))
        }
        #expect(text { $0.appendInteger(UInt16.max) } == "65535")
    }

    @Test("UUIDs as uuidString writes them")
    func uuids() {
        for _ in 0..<1_000 {
            let id = UUID()
            #expect(text { $0.appendString(id) } == "\"\(id.uuidString)\"")
        }
    }

    @Test("dates and log timestamps quoted, as ISODate formats them, years past 9999 and before 0 included")
    func dates() {
        let dates = [Date(timeIntervalSince1970: 0), Date(timeIntervalSinceReferenceDate: 0.25),
                     Date(timeIntervalSince1970: 253_402_300_800), Date(timeIntervalSince1970: -62_198_755_200),
                     Date(timeIntervalSinceReferenceDate: .infinity)]
        let expected = ["1970-01-01T00:00:00Z", "2001-01-01T00:00:00.25Z", "10000-01-01T00:00:00Z", "-1-01-01T00:00:00Z", "invalid"]
        for (date, iso) in zip(dates, expected) {
            #expect(ISODate.format(date) == iso)
            #expect(text { $0.appendString(date) } == "\"\(iso)\"")
        }
        let timestamp = LogTimestamp(nanosecondsSince1970: -1)
        #expect(text { $0.appendString(timestamp) } == "\"1969-12-31T23:59:59.999999999Z\"")
        // The ends of a timestamp's range (the earliest is what `--as-of` clamps a date before 1678 to).
        #expect(ISODate.format(LogTimestamp(nanosecondsSince1970: .min)) == "1677-09-21T00:12:43.145224192Z")
        #expect(ISODate.format(LogTimestamp(nanosecondsSince1970: .max)) == "2262-04-11T23:47:16.854775807Z")
        #expect(ISODate.format(LogTimestamp(nanosecondsSince1970: -1_000_000_000)) == "1969-12-31T23:59:59Z")
    }

    @Test("indented JSON is the same document, laid out")
    func indented() throws {
        let tree = try JSONParser.parse(Array(#"{"a":[1,{"b":null}],"c":{},"d":[],"e":"x"}"#.utf8))
        #expect(tree.indentedText == """
            {
              "a": [
                1,
                {
                  "b": null
                }
              ],
              "c": {},
              "d": [],
              "e": "x"
            }
            """)
        #expect(try JSONParser.parse(Array(tree.indentedText.utf8)) == tree)
    }
}
