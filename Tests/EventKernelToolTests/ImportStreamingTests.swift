import Activities
@testable import EventKernelTool
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
import EventKernelTestSupport

// Issue 31: import reads its input a chunk at a time, twice (a checking pass, then an
// appending pass). The lines, their numbers, the input's identity (the import markers of stores
// written before) and the invalid-UTF-8 report must be those of the whole-file code it
// replaced, wherever the chunks end. The references below are that code.

/// The lines as the import read them before: the whole input as a `String` split at `"\n"`
/// (CR LF is one `Character`, not a line break), the final line feed ending the last line.
private func referenceLines(_ data: Data) -> [String]? {
    guard let text = String(validating: data, as: UTF8.self) else { return nil }
    var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    if text.hasSuffix("\n") { lines.removeLast() }
    return lines.map(String.init)
}

/// The identity the import markers of earlier stores hold.
private func referenceIdentity(_ data: Data) -> String {
    let crc = CRC32CReference.checksum([UInt8](data))
    var fnv: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in data { fnv = (fnv ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
    return "\(data.count)-\(String(format: "%08x", crc))\(String(format: "%016llx", fnv))"
}

/// CRC32C bit by bit (the check value of "123456789" is 0xE3069283).
private enum CRC32CReference {
    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            c ^= UInt32(byte)
            for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
        }
        return ~c
    }
}

/// The whole-file report of the first invalid UTF-8: line, byte of the line, offset.
private func referenceInvalidUTF8(_ data: Data) -> (line: Int, column: Int, offset: Int) {
    let bytes = [UInt8](data)
    var line = 1, lineStart = 0, index = 0
    while index < bytes.count {
        let byte = bytes[index]
        let length = byte < 0x80 ? 1 : byte >> 5 == 0b110 ? 2 : byte >> 4 == 0b1110 ? 3 : byte >> 3 == 0b11110 ? 4 : 0
        if length == 0 || index + length > bytes.count
            || String(validating: bytes[index..<(index + length)], as: UTF8.self) == nil {
            return (line, index - lineStart + 1, index)
        }
        if byte == 0x0A { line += 1; lineStart = index + 1 }
        index += length
    }
    return (line, index - lineStart + 1, index)
}

/// Opens `data` as an import input read `chunkSize` bytes at a time, and reads its lines.
private func streamedLines(_ data: Data, chunkSize: Int, in temp: TemporaryDirectory) throws -> (input: ImportInput, lines: [String]) {
    let file = temp.file("input-\(UUID().uuidString.prefix(8)).jsonl")
    try data.write(to: file)
    let input = try ImportInput.open(file.path, chunkSize: chunkSize)
    var reader = input.lines()
    var lines: [String] = []
    while let line = try reader.next() { lines.append(line) }
    #expect(reader.number == lines.count)
    #expect(reader.checksum == input.checksum)
    return (input, lines)
}

/// Inputs whose chunk boundaries fall inside lines, inside two-, three- and four-byte
/// characters, between CR and LF, on blank lines; with and without a final line feed.
private let edgeInputs: [String] = [
    "", "\n", "\n\n", "\r\n", "a", "a\n", "a\nb", "a\nb\n", "a\r\nb\n", "a\n\r\nb", "a\r\n", "\r", "a\rb\n",
    "{\"type\":\"café\"}\n{\"type\":\"日本語\"}\n{\"type\":\"😀😀\"}",
    "é\nü\n€\n😀\n\n  \n\t😀 \n",
    "\u{2028}x\u{2028}\n\u{85}\n",
]

@Suite("import reads its input in chunks")
struct ImportStreamingTests {
    /// Every chunk size from 1 byte up: the same lines as the whole-file split, the same
    /// identity, and the checksum through the last line is the input's.
    @Test(arguments: [1, 2, 3, 4, 5, 7, 16, ImportInput.defaultChunkSize])
    func linesAndIdentityMatchTheWholeFileAtEveryChunkSize(chunkSize: Int) throws {
        let temp = TemporaryDirectory()
        var random = SplitMix64(seed: UInt64(chunkSize))
        let pieces = ["a", "{}", " ", "\n", "\r", "\r\n", "é", "€", "😀", "\t", "\n\n", "\u{2028}"]
        var inputs = edgeInputs
        for _ in 0..<200 {
            let count = Int(random.next() % 40)
            inputs.append((0..<count).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined())
        }
        for text in inputs {
            let data = Data(text.utf8)
            let (input, lines) = try streamedLines(data, chunkSize: chunkSize, in: temp)
            #expect(lines == referenceLines(data), "\(text.debugDescription)")
            #expect(input.identity == referenceIdentity(data), "\(text.debugDescription)")
            #expect(input.count == data.count)
        }
    }

    @Test func crlfDoesNotEndALineAsBefore() throws {
        // Pinned because line numbers are in every message and in the import markers of
        // stores: a CR LF file is read as the Swift String split read it.
        let temp = TemporaryDirectory()
        let (_, lines) = try streamedLines(Data("{\"a\":1}\r\n{\"b\":2}\r\n".utf8), chunkSize: 8, in: temp)
        #expect(lines == ["{\"a\":1}\r\n{\"b\":2}\r\n"])
    }

    /// Invalid UTF-8 anywhere, the chunks cutting sequences anywhere: the same line, byte of
    /// the line and offset as the whole-file check, before any line is read.
    @Test(arguments: [1, 2, 3, 5, 64])
    func invalidUTF8IsReportedWhereTheWholeFileCheckReportedIt(chunkSize: Int) throws {
        let temp = TemporaryDirectory()
        var random = SplitMix64(seed: 31 &+ UInt64(chunkSize))
        let valid: [[UInt8]] = [[0x61], [0x0A], [0x0D, 0x0A], Array("é".utf8), Array("€".utf8), Array("😀".utf8), Array("\u{10FFFF}".utf8)]
        let invalid: [[UInt8]] = [[0xFF], [0xC0, 0x80], [0xC3], [0xE2, 0x82], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
                                  [0xF0, 0x9F, 0x98], [0x80], [0xE0, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xE2, 0x28, 0xA1]]
        var checked = 0
        for trial in 0..<300 {
            var bytes: [UInt8] = []
            for _ in 0..<Int(random.next() % 30) { bytes += valid[Int(random.next() % UInt64(valid.count))] }
            if trial % 10 != 0 {
                bytes.insert(contentsOf: invalid[Int(random.next() % UInt64(invalid.count))], at: Int(random.next() % UInt64(bytes.count + 1)))
            }
            for _ in 0..<Int(random.next() % 5) { bytes += valid[Int(random.next() % UInt64(valid.count))] }
            let data = Data(bytes)
            let file = temp.file("trial-\(trial).jsonl")
            try data.write(to: file)
            if String(validating: data, as: UTF8.self) != nil {
                #expect(throws: Never.self) { _ = try ImportInput.open(file.path, chunkSize: chunkSize) }
                continue
            }
            let at = referenceInvalidUTF8(data)
            let expected = "\(file.path):\(at.line): invalid UTF-8 at byte \(at.column) of the line (byte offset \(at.offset) in the file)\nnothing was imported"
            #expect {
                _ = try ImportInput.open(file.path, chunkSize: chunkSize)
            } throws: { error in
                (error as? ToolError)?.message == expected && (error as? ToolError)?.exit == .badInput
            }
            checked += 1
        }
        #expect(checked > 200)
    }

    /// The checking and appending passes read the input again: a file changed meanwhile is
    /// refused, never imported as the bytes its identity does not name.
    @Test func aFileChangedAfterOpeningIsRefusedWhenReadAgain() throws {
        let temp = TemporaryDirectory()
        let file = temp.file("changing.jsonl")
        let original = "first\nsecond\nthird\n"
        /// Writes `text` over the file in place (the same inode, as an editor saving in place).
        func overwrite(_ text: String) throws {
            let handle = try FileHandle(forWritingTo: file)
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: Data(text.utf8))
            try handle.close()
        }
        #expect(FileManager.default.createFile(atPath: file.path, contents: Data(original.utf8)))
        for change in ["first\nSECOND\nthird\n", "first\nsec", ""] {
            let input = try ImportInput.open(file.path, chunkSize: 4)
            try overwrite(change)
            var lines = input.lines()
            #expect {
                while try lines.next() != nil {}
            } throws: { error in
                (error as? ToolError)?.message == "\(file.path) changed while it was being imported (it no longer holds the 19 bytes it held when the import began)"
            }
            try overwrite(original)
        }
        // Bytes added after those read are not the input's: it still holds what it held.
        let input = try ImportInput.open(file.path, chunkSize: 4)
        try overwrite(original + "fourth\n")
        var lines = input.lines()
        var read: [String] = []
        while let line = try lines.next() { read.append(line) }
        #expect(read == ["first", "second", "third"])
    }

    /// The activity check keeps each activity's start only: an end is checked against the
    /// start the last add or update gave, the store's when no line touched it.
    @Test func theActivityCheckKeepsTheStartAnUpdateGave() throws {
        let t = Date(timeIntervalSince1970: 1_735_732_800)  // 2025-01-01T12:00:00Z
        let stored = ActivityModel(id: ids[5], startDate: t, endDate: nil, type: ActivityType(rawValue: "nap"))
        var validator = ActivityJSON.ImportValidator { $0 == ids[5] ? stored : nil }
        func refusal(_ event: ActivityEvent) -> String? {
            do { try validator.check(event); return nil } catch { return error.message }
        }
        #expect(refusal(.ended(id: ids[5], at: t - 60)) == "end before start: 2025-01-01T11:59:00Z is before the start 2025-01-01T12:00:00Z of activity \(ids[5].uuidString)")
        #expect(refusal(.added(ActivityModel(id: ids[5], startDate: t, endDate: nil, type: ActivityType(rawValue: "nap"))))?.hasPrefix("duplicate id") == true)
        #expect(refusal(.added(ActivityModel(id: ids[0], startDate: t, endDate: nil, type: ActivityType(rawValue: "nap")))) == nil)
        #expect(refusal(.updated(ActivityModel(id: ids[0], startDate: t + 3600, endDate: nil, type: ActivityType(rawValue: "nap")))) == nil)
        #expect(refusal(.ended(id: ids[0], at: t + 1800)) == "end before start: 2025-01-01T12:30:00Z is before the start 2025-01-01T13:00:00Z of activity \(ids[0].uuidString)")
        #expect(refusal(.ended(id: ids[0], at: t + 7200)) == nil)
        #expect(refusal(.deleted(id: ids[0])) == nil)
        #expect(refusal(.ended(id: ids[0], at: t + 7200)) == "unknown id \(ids[0].uuidString): no such activity to end")
        #expect(refusal(.updated(ActivityModel(id: ids[1], startDate: t, endDate: nil, type: ActivityType(rawValue: "nap"))))?.hasPrefix("unknown id") == true)
        #expect(refusal(.deleted(id: ids[5])) == nil)
        #expect(refusal(.deleted(id: ids[5]))?.hasPrefix("unknown id") == true)
    }

    // MARK: The command end to end

    /// The appending pass compares each batch's bytes with those checked: a line changed in
    /// place after the check is never appended; the batches before it are, and it says so.
    @Test func aFileChangedDuringTheAppendingPassStopsAtTheBatchThatDiffers() throws {
        let temp = TemporaryDirectory()
        let file = temp.file("history.jsonl")
        let count = 3_000, changed = 2_000
        func line(_ i: Int, type: String) -> String {
            "{\"id\":\"\(String(format: "00000000-0000-4000-8000-%012d", i))\",\"startDate\":\"2025-01-01T10:00:00Z\",\"endDate\":null,\"type\":\"\(type)\"}"
        }
        try write((1...count).map { line($0, type: "bath") }, to: file)
        let store = temp.file("store")
        let process = try makeProcess(["import", file.path, "--dir", store.path, "--batch-size", "1"], stdout: temp.file("out"), stderr: temp.file("err"))
        try process.run()
        // The appending pass begins by creating the store (the check wrote nothing). The import
        // is stopped while the file changes, so that it cannot reach line 2000 first however
        // fast its appends are (a file system where fsync costs nothing) or however late this
        // thread runs.
        while process.isRunning, !FileManager.default.fileExists(atPath: store.path) { usleep(200) }
        #expect(kill(process.processIdentifier, SIGSTOP) == 0)
        let handle = try FileHandle(forWritingTo: file)  // in place, the same length
        try handle.seek(toOffset: UInt64((line(1, type: "bath").utf8.count + 1) * (changed - 1)))
        try handle.write(contentsOf: Data(line(changed, type: "baht").utf8))
        try handle.close()
        #expect(kill(process.processIdentifier, SIGCONT) == 0)
        process.waitUntilExit()
        closeOutputFiles(of: process)
        let stderr = try String(contentsOf: temp.file("err"), encoding: .utf8)
        #expect(process.terminationStatus == 1, "\(stderr)")
        #expect(stderr.contains("history.jsonl changed while it was being imported"), "\(stderr)")
        #expect(stderr.contains("1,999 events from lines 1–1999 were imported in this run and are durable; lines 2000–3000 were not imported"), "\(stderr)")
        #expect(try run("export", "--dir", store.path).stdout.split(separator: "\n").count == changed - 1)
    }


    @Test func aBadLastLineWritesNothingEvenAfterManyBatches() throws {
        let temp = TemporaryDirectory()
        let store = try importedStore(temp)  // the five good lines
        let before = try run("export", "--dir", store).stdout
        let file = temp.file("more.jsonl")
        // Six good lines (batches of one), then a duplicate of the first: refused at its line.
        let more = (0..<6).map { i in
            "{\"id\":\"00000000-0000-4000-8000-1000000000\(String(format: "%02d", i))\",\"startDate\":\"2025-02-0\(i + 1)T10:00:00Z\",\"endDate\":null,\"type\":\"bath\"}"
        }
        try write(more + [more[0]], to: file)
        let result = try run("import", file.path, "--dir", store, "--batch-size", "1")
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("more.jsonl:7: duplicate id"), "\(result.stderr)")
        #expect(result.stderr.contains("nothing was imported (the file is checked in full before anything is written)"), "\(result.stderr)")
        #expect(try run("export", "--dir", store).stdout == before)
        // Into a new store: not even the directory is made.
        let fresh = temp.file("fresh")
        #expect(try run("import", file.path, "--dir", fresh.path, "--batch-size", "1").status == 1)
        #expect(!FileManager.default.fileExists(atPath: fresh.path))
    }

    @Test func aMissingFinalNewlineEndsTheLastLine() throws {
        let temp = TemporaryDirectory()
        let file = temp.file("no-newline.jsonl")
        try Data(goodLines.joined(separator: "\n").utf8).write(to: file)
        let store = temp.file("store").path
        let result = try run("import", file.path, "--dir", store, "--batch-size", "2")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("imported 5 events") && result.stdout.contains("last line imported: 5"), "\(result.stdout)")
        let reference = TemporaryDirectory()
        #expect(try eventsOf(store) == eventsOf(try importedStore(reference)))
    }

    @Test func crlfLinesAreOneLineAsBefore() throws {
        let temp = TemporaryDirectory()
        let file = temp.file("crlf.jsonl")
        try Data((goodLines.joined(separator: "\r\n") + "\r\n").utf8).write(to: file)
        let store = temp.file("store").path
        let result = try run("import", file.path, "--dir", store)
        #expect(result.status == 1, "\(result.stdout)")
        #expect(result.stderr.contains("crlf.jsonl:1: bad JSON"), "\(result.stderr)")
        #expect(result.stderr.contains("CR LF line ends") && result.stderr.contains("tr -d"), "\(result.stderr)")
        // CR alone (classic Mac OS): one line too, and the advice turns each CR into a line feed.
        try Data((goodLines.joined(separator: "\r") + "\r").utf8).write(to: file)
        let mac = try run("import", file.path, "--dir", store)
        #expect(mac.status == 1 && mac.stderr.contains("carriage returns where lines end") && mac.stderr.contains("tr '\\r' '\\n'"), "\(mac.stderr)")
        // One line ended by CR LF is a line (the CR is white space around it).
        try Data((goodLines[0] + "\r\n").utf8).write(to: file)
        let one = try run("import", file.path, "--dir", store)
        #expect(one.status == 0 && one.stdout.contains("imported 1 event from"), "\(one.stderr)")
    }

    /// A UTF-8 byte order mark before the first line is not part of it: the file imports as
    /// the same file without it, resumes as itself, and a mark anywhere else is refused.
    @Test func aByteOrderMarkBeforeTheFirstLineIsSkipped() throws {
        let temp = TemporaryDirectory()
        let file = temp.file("bom.jsonl")
        try Data([0xEF, 0xBB, 0xBF] + Array((goodLines.joined(separator: "\n") + "\n").utf8)).write(to: file)
        let store = temp.file("store").path
        let result = try run("import", file.path, "--dir", store, "--batch-size", "2")
        #expect(result.status == 0 && result.stdout.contains("imported 5 events"), "\(result.stderr)")
        let reference = TemporaryDirectory()
        let expected = try eventsOf(try importedStore(reference))
        #expect(try eventsOf(store) == expected)
        // Run again: the markers name this file (its mark included), so nothing is added.
        let again = try run("import", file.path, "--dir", store)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try eventsOf(store) == expected)
        // On a later line, the mark is text before the JSON.
        let second = temp.file("second.jsonl")
        try Data(Array((goodLines[0] + "\n").utf8) + [0xEF, 0xBB, 0xBF] + Array((goodLines[1] + "\n").utf8)).write(to: second)
        let refused = try run("import", second.path, "--dir", temp.file("other").path)
        #expect(refused.status == 1 && refused.stderr.contains("second.jsonl:2: bad JSON"), "\(refused.stderr)")
    }

    /// Standard input is read once, into an unlinked copy in $TMPDIR that both passes read:
    /// the same events as the file, a bad last line still writes nothing, and nothing is left
    /// in $TMPDIR whatever the outcome.
    @Test func standardInputIsCopiedOnceAndReadTwice() throws {
        let temp = TemporaryDirectory()
        let spool = temp.file("tmp")
        try FileManager.default.createDirectory(at: spool, withIntermediateDirectories: true)
        let file = temp.file("good.jsonl")
        let lines = goodLines + [""] + goodLines.map { $0.replacing("00000000-0000-4000-8000-0000", with: "00000000-0000-4000-8000-0001") }
        try write(lines, to: file)
        let viaFile = temp.file("via-file").path
        #expect(try run("import", file.path, "--dir", viaFile, "--batch-size", "3").status == 0)
        let viaStdin = temp.file("via-stdin").path
        let piped = try run(["import", "-", "--dir", viaStdin, "--batch-size", "3"], stdin: file, environment: ["TMPDIR": spool.path])
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(piped.stdout.contains("imported 10 events from <stdin> (lines 1–11, 1 blank line skipped)"), "\(piped.stdout)")
        #expect(try eventsOf(viaStdin) == eventsOf(viaFile))
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool.path).isEmpty)
        // The same bytes again: recognised by content, nothing imported twice.
        let again = try run(["import", "-", "--dir", viaStdin], stdin: file, environment: ["TMPDIR": spool.path])
        #expect(again.stdout.contains("nothing to import: every event of <stdin> (lines 1–11)"), "\(again.stdout)\(again.stderr)")
        // A bad last line: refused, nothing written, the copy gone.
        let bad = temp.file("bad.jsonl")
        try write(goodLines + [goodLines[0]], to: bad)
        let refused = try run(["import", "-", "--dir", temp.file("none").path, "--batch-size", "1"], stdin: bad, environment: ["TMPDIR": spool.path])
        #expect(refused.status == 1 && refused.stderr.contains("<stdin>:6: duplicate id"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: temp.file("none").path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool.path).isEmpty)
        // No place for the copy: said, exit 4, nothing imported.
        let nowhere = try run(["import", "-", "--dir", temp.file("none").path], stdin: file, environment: ["TMPDIR": temp.file("missing").path])
        #expect(nowhere.status == 4, "\(nowhere.stderr)")
        #expect(nowhere.stderr.contains("<stdin> can be read only once, so import copies it to a temporary file in \(temp.file("missing").path) (set TMPDIR to choose the directory)"), "\(nowhere.stderr)")
    }
}

/// The events of a store as export writes them, without the recording times and import markers
/// (each import's own).
private func eventsOf(_ store: String) throws -> [String] {
    let result = try run("export", "--dir", store)
    #expect(result.status == 0, "\(result.stderr)")
    return result.stdout.split(separator: "\n").map {
        String($0).replacing(/"recordedAt":"[^"]*",/, with: "").replacing(/,"metadata":\{"correlationID":"eventkernel-import [^"]*"\}/, with: "")
    }
}

