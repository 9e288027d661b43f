import Activities
import ArgumentParser
import Foundation

/// Imports JSON Lines. All or nothing for bad input: the whole file is parsed and checked
/// against the store first; only then is it appended, in atomic batches of `batchSize` events.
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Append events or activities from a JSON Lines file (validated in full before anything is written).",
        usage: "eventkernel import [STORE] FILE.jsonl [--dir D] [--batch-size B]",
        discussion: """
            The store may come first (import STORE FILE) or as --dir; a single argument is the file.

            Examples:
              eventkernel import demo history.jsonl
              eventkernel import history.jsonl --dir demo --batch-size 5000
            """)

    /// `import [STORE] FILE.jsonl`: the file is the command's operand (StoreLocation.swift).
    enum Operand: StoreOperandLayout {
        static var operandName: String? { "FILE.jsonl" }
        static var operandHelp: String { "The JSON Lines file (event lines or activity lines, see Docs/CLI.md)." }
    }

    @OptionGroup var store: StoreArguments<Operand>
    var file: String { store.operand ?? "" }
    @Option(help: "Events per atomic batch.") var batchSize = 1_000

    func validate() throws {
        guard batchSize > 0 else { throw ValidationError("--batch-size must be positive") }
    }

    func run() async throws {
        let data: Data
        do { data = try Data(contentsOf: URL(filePath: file)) } catch {
            throw ToolError(.badInput, "cannot read \(file): \((error as NSError).localizedDescription)")
        }
        // Invalid UTF-8 is refused, never replaced by U+FFFD: an import stores exactly what the
        // file says, or nothing.
        guard let text = String(validating: data, as: UTF8.self) else {
            let (line, column, offset) = Self.firstInvalidUTF8(in: data)
            throw ToolError(.badInput, "\(file):\(line): invalid UTF-8 at byte \(column) of the line (byte offset \(offset) in the file)\nnothing was imported")
        }
        let directory = store.url
        let storeExists = FileManager.default.fileExists(atPath: directory.path)
        // Open first when the store exists: a locked store fails before any work.
        var repository = storeExists ? try StoreLocation.openWriter(directory, create: true) : nil

        // 1. Parse and check every line against the store's state plus the lines before it.
        var events: [(line: Int, event: ActivityEvent)] = []
        var validator = ActivityJSON.ImportValidator { [repository] id in repository?.activity(id: id) }
        var lineNumber = 0
        var blank = 0
        do {
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            if text.hasSuffix("\n") { lines.removeLast() }  // the final newline ends the last line
            for line in lines {
                lineNumber += 1
                let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
                if trimmed.isEmpty { blank += 1; continue }
                let event: ActivityEvent
                do { event = try ActivityJSON.parseLine(Substring(trimmed)) } catch {
                    throw ToolError(.badInput, "\(file):\(lineNumber): \(error.message)")
                }
                do { try validator.check(event) } catch {
                    throw ToolError(.badInput, "\(file):\(lineNumber): \(error.message)")
                }
                events.append((lineNumber, event))
            }
        } catch let error as ToolError {
            try? await repository?.close()
            throw ToolError(error.exit, error.message + "\nnothing was imported (the file is checked in full before anything is written)")
        }
        guard !events.isEmpty else {
            try? await repository?.close()
            print("nothing to import: \(file) has no events (\(lineNumber) lines, \(blank) blank)")
            return
        }

        // 2. Append in atomic batches.
        if repository == nil { repository = try StoreLocation.openWriter(directory, create: true) }
        guard let repository else { return }
        var progress = ProgressBar("importing", total: events.count)
        var written = 0
        var lastLine = 0
        do {
            while written < events.count {
                let chunk = events[written..<min(events.count, written + batchSize)]
                try await repository.apply(chunk.map(\.event))
                written += chunk.count
                lastLine = chunk.last!.line
                progress.update(written)
            }
            progress.finish()
            try await repository.close()
        } catch {
            progress.finish()
            try? await repository.close()
            let underlying = ToolError.from(error, store: directory)
            let acknowledged = written == 0 ? "nothing was imported" :
                "\(Output.count(written)) events from lines 1–\(lastLine) were imported and are durable; the last line acknowledged is \(lastLine)"
            throw ToolError(underlying.exit == .badInput ? .io : underlying.exit,
                            "write failed at line \(events[written].line): \(underlying.message)\n\(acknowledged); lines \(events[written].line)–\(lineNumber) were not imported")
        }
        print("imported \(Output.count(written)) events from \(file) (lines 1–\(lastLine), \(blank) blank line\(blank == 1 ? "" : "s") skipped) into \(directory.path); last line imported: \(lastLine)")
    }

    /// Where the first invalid UTF-8 sequence starts: line (from 1), byte within the line (from
    /// 1) and byte offset in the file (from 0).
    static func firstInvalidUTF8(in data: Data) -> (line: Int, column: Int, offset: Int) {
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
}
