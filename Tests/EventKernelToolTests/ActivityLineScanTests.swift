import Activities
@testable import EventKernelTool
import Foundation
import Testing
import EventKernelTestSupport

/// Import's byte scanner of activity lines (``ActivityJSON/scanLine(_:)``) answers only where
/// the tree reader gives the same event; every other line is the tree reader's. The fuzz target
/// (scripts/fuzz.sh ImportFuzz) checks the same on arbitrary bytes.
@Suite("Activity lines read from their bytes")
struct ActivityLineScanTests {
    private static let id = "6EECD63C-422C-4626-BB4A-3FC0E4A95B86"

    /// Lines export writes, and variations of them the scanner must read or leave alone.
    private static let lines: [String] = [
        #"{"position":0,"recordedAt":"2026-11-28T10:46:22.11795328Z","event":"added","activity":{"id":"\#(id)","startDate":"2024-01-02T00:01:16Z","endDate":"2024-01-02T00:17:28Z","type":"feeding"}}"#,
        #"{"event":"updated","activity":{"id":"\#(id)","startDate":"2024-01-02T00:01:16.25Z","endDate":null,"type":"sleep"}}"#,
        #"{"event":"added","activity":{"id":"\#(id.lowercased())","startDate":"2024-01-02","type":"sleep"}}"#,
        #"{"position":7,"event":"ended","id":"\#(id)","at":"2024-01-02T05:00:00+02:00"}"#,
        #"{"position":8,"version":3,"event":"deleted","id":"\#(id)"}"#,
        #"{"id":"\#(id)","startDate":"2024-01-02T00:01:16Z","endDate":"2024-01-02T00:17:28Z","type":"feeding"}"#,
        #"{"id":"\#(id)","startDate":"2024-01-02T00:01:16Z","type":"tummy time"}"#,
        // The tree reader's: white space, an escape, a repeated, unknown or missing field, another kind of value.
        #"{ "event":"deleted","id":"\#(id)"}"#,
        #"{"event":"added","activity":{"id":"\#(id)","startDate":"2024-01-02T00:01:16Z","type":"fe\u0065ding"}}"#,
        #"{"event":"deleted","id":"\#(id)","id":"\#(id)"}"#,
        #"{"event":"deleted","id":"\#(id)","note":1}"#,
        #"{"event":"deleted"}"#,
        #"{"event":"ended","id":"\#(id)"}"#,
        #"{"event":"added","activity":{"id":"\#(id)","startDate":"2024-01-02T00:01:16Z"}}"#,
        #"{"event":"added","activity":{"id":"\#(id)","startDate":"2024-01-02T00:01:16Z","type":""}}"#,
        #"{"event":"added","activity":{"id":"\#(id)","startDate":"2024-01-02T00:01:16Z","endDate":"2024-01-01T00:00:00Z","type":"x"}}"#,
        #"{"event":"added","activity":{"id":"\#(id)","startDate":1,"type":"x"}}"#,
        #"{"event":"added","activity":{"id":"\#(id)","startDate":"2024-13-02","type":"x"}}"#,
        #"{"event":"added","activity":{"id":"\#(id.dropLast())","startDate":"2024-01-02","type":"x"}}"#,
        #"{"event":"added","activity":{"id":"{\#(id.dropFirst(2))}","startDate":"2024-01-02","type":"x"}}"#,
        #"{"event":"added","activity":{"id":"\#(id)","startDate":"2024-01-02","type":"x","position":1}}"#,
        #"{"event":"added","id":"\#(id)","activity":{"id":"\#(id)","startDate":"2024-01-02","type":"x"}}"#,
        #"{"event":"ended","id":"\#(id)","at":"2024-01-02","metadata":{"actor":"a"}}"#,
        #"{"event":"moved","id":"\#(id)"}"#,
        #"{"event":7,"id":"\#(id)"}"#,
        #"{"position":01,"event":"deleted","id":"\#(id)"}"#,
        #"{"position":-1,"event":"deleted","id":"\#(id)"}"#,
        #"{"position":1.5,"event":"deleted","id":"\#(id)"}"#,
        #"{"event":"deleted","id":"\#(id)"} "#,
        #"{"event":"deleted","id":"\#(id)"}x"#,
        #"{"event":"deleted","id":"\#(id)""#,
        #"["event"]"#,
        #"{}"#,
    ]

    @Test("every line: the scanner's event is the tree reader's, and it reads export's own lines")
    func scannerAgreesWithTheTreeReader() throws {
        var scannedCount = 0
        for line in Self.lines {
            let scanned = ActivityJSON.scanLine(Substring(line))
            let tree = Result { () throws(ActivityJSON.LineError) -> ActivityEvent in try ActivityJSON.parseLineByTree(Substring(line)) }
            switch tree {
            case .success(let event):
                if let scanned { #expect(scanned == event, "\(line)"); scannedCount += 1 }
            case .failure(let error):
                #expect(scanned == nil, "\(line): the tree reader says \(error.message)")
                // parseLine gives the tree reader's message.
                #expect(throws: ActivityJSON.LineError.self) { try ActivityJSON.parseLine(Substring(line)) }
            }
        }
        for line in Self.lines.prefix(7) { #expect(ActivityJSON.scanLine(Substring(line)) != nil, "\(line)") }
        #expect(scannedCount == 7)
    }

    @Test("what export writes, the scanner reads back to the same event")
    func exportedLinesRoundTrip() throws {
        var random = SplitMix64(seed: 0xDEAD_BEEF)
        func next() -> UInt64 { random.next() }
        for i in 0..<2_000 {
            let start = Date(timeIntervalSinceReferenceDate: Double(next() % 1_000_000_000) + (i % 3 == 0 ? Double(next() % 1_000) / 1_000 : 0))
            let model = ActivityModel(id: UUID(), startDate: start, endDate: i % 2 == 0 ? nil : start.addingTimeInterval(Double(next() % 10_000)),
                                      type: ActivityType(rawValue: ["sleep", "feeding", "é \"quoted\"", "tab\there"][i % 4]))
            let events: [ActivityEvent] = [.added(model), .updated(model), .ended(id: model.id, at: start.addingTimeInterval(60)), .deleted(id: model.id)]
            for event in events {
                let line = ActivityJSON.event(event, position: UInt64(i), recordedAt: .init(nanosecondsSince1970: 1_764_000_000_000_000_000 + Int64(i)))
                let scanned = ActivityJSON.scanLine(Substring(line))
                #expect(try ActivityJSON.parseLine(Substring(line)) == event, "\(line)")
                // Types with an escape are the tree reader's; every other line is scanned.
                if case .added(let m) = event, m.type.rawValue.contains(where: { $0 == "\"" || $0 == "\t" }) { #expect(scanned == nil) }
                else if case .updated(let m) = event, m.type.rawValue.contains(where: { $0 == "\"" || $0 == "\t" }) { #expect(scanned == nil) }
                else { #expect(scanned == event, "\(line)") }
            }
        }
    }
}
