// libFuzzer target over the CLI's JSON Lines import: parsing (ActivityJSON.parseLine, its byte
// scanner checked against its tree reader) and the
// checks against the state (ActivityJSON.ImportValidator), as `eventkernel import` runs them.
// Built by scripts/fuzz.sh from Sources/EventKernelTool/Support/{ActivityJSON,ActivityJSON+Scan,EventMetadata+JSON,Dates,JSONBuffer,JSONTree}.swift
// plus this file, over the EventLog, EventKernel and Activities modules (and swift-log).
//
// The input is split into lines like the importer does; each is trimmed, parsed and checked
// against an empty in-memory state plus the lines before it. Any bytes must give an event or a
// LineError with a message: never a crash. Valid events round-trip through the exporter's
// formatting (ActivityJSON.event) and parse back equal.
import Activities
import EventKernel
import Foundation

// Dates.swift's `parseDateRange` uses the tool's error type; a stand-in keeps the build small.
enum ToolExit { case badInput }
struct ToolError: Error {
    var message: String
    init(_ exit: ToolExit, _ message: String) { self.message = message }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var validator = ActivityJSON.ImportValidator { _ in nil }
    var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    if text.hasSuffix("\n") { lines.removeLast() }
    for line in lines.prefix(64) {
        let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty { continue }
        let event: ActivityEvent
        // The byte scanner answers only as the tree reader does.
        let scanned = ActivityJSON.scanLine(Substring(trimmed))
        do { event = try ActivityJSON.parseLineByTree(Substring(trimmed)) } catch {
            precondition(!error.message.isEmpty, "a parse error without a message")
            precondition(scanned == nil, "the scanner read \(trimmed) as \(scanned!), the tree reader refused it: \(error.message)")
            continue
        }
        if let scanned { precondition(scanned == event, "the scanner read \(trimmed) as \(scanned), the tree reader as \(event)") }
        // What the exporter writes for a parsed event parses back to the same event.
        let exported = ActivityJSON.event(event)
        do {
            let again = try ActivityJSON.parseLine(Substring(exported))
            precondition(again == event, "export/import round trip changed \(event) into \(again) via \(exported)")
        } catch {
            preconditionFailure("the exporter wrote a line the importer rejects: \(exported): \(error.message)")
        }
        do { try validator.check(event) } catch {
            precondition(!error.message.isEmpty, "a validation error without a message")
        }
    }
    // Date parsing on its own, on the whole input.
    if let date = ISODate.tryParse(text), date.timeIntervalSince1970.isFinite { _ = ISODate.format(date) }
    return 0
}
