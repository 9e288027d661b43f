import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum Output {
    /// Whether stdout is a terminal (progress bars are drawn only then).
    static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    static func error(_ message: String) {
        FileHandle.standardError.write(Data("eventkernel: error: \(message)\n".utf8))
    }

    /// A warning on stderr (`eventkernel: warning: …`): the answer on stdout stands, but it may
    /// not be the one meant (or the store it came from is damaged: the command then exits 3).
    static func warning(_ message: String) {
        FileHandle.standardError.write(Data("eventkernel: warning: \(message)\n".utf8))
    }

    static func note(_ message: String) {
        FileHandle.standardError.write(Data("eventkernel: \(message)\n".utf8))
    }

    static func flush() { fflush(nil) }

    /// Renders rows as an aligned text table; the first row is the header.
    /// Columns whose header starts with ">" are right-aligned (the ">" is dropped).
    static func table(_ header: [String], _ rows: [[String]]) -> String {
        let right = header.map { $0.hasPrefix(">") }
        let header = header.map { $0.hasPrefix(">") ? String($0.dropFirst()) : $0 }
        let rows = rows.map { $0.map(visible) }
        var widths = header.map(\.count)
        for row in rows {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, cell in
                let pad = String(repeating: " ", count: max(0, widths[i] - cell.count))
                return right[i] ? pad + cell : (i == cells.count - 1 ? cell : cell + pad)
            }.joined(separator: "  ")
        }
        var out = [line(header), widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")]
        out += rows.map(line)
        return out.joined(separator: "\n")
    }

    /// A key/value table.
    static func keyValues(_ pairs: [(String, String)]) -> String {
        let width = pairs.map(\.0.count).max() ?? 0
        return pairs.map { $0.0 + String(repeating: " ", count: width - $0.0.count) + "  " + visible($0.1) }.joined(separator: "\n")
    }

    /// `text` as a table shows it: each control character (C0, DEL, C1) as `\u{XX}`. A type
    /// name or an id is the application's text, and a store may hold any: raw, a NUL or a line
    /// feed would break the table's rows, and an escape sequence would drive the terminal of
    /// whoever audits the store. The machine formats (JSON, CSV) keep the exact text.
    static func visible(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// Pretty, key-sorted JSON of a JSON-compatible value (dictionaries, arrays, strings, numbers, NSNull).
    static func json(_ value: Any) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]) else {
            return "null"
        }
        return String(decoding: data, as: UTF8.self)
    }

    static func bytes(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(n) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func count(_ n: some BinaryInteger) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, c) in digits.reversed().enumerated() {
            if i > 0 && i % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return (n < 0 ? "-" : "") + String(out.reversed())
    }

    static func rate(_ perSecond: Double) -> String {
        perSecond >= 10 ? count(Int(perSecond.rounded())) + "/s" : String(format: "%.2f/s", perSecond)
    }

    static func seconds(_ s: Double) -> String {
        s < 1 ? String(format: "%.1f ms", s * 1000) : String(format: "%.2f s", s)
    }
}

/// How a command that lists rows prints them (`--format`).
enum OutputFormat: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// Aligned columns for people (the default).
    case table
    /// One JSON document (an array of row objects, or the command's report object).
    case json
    /// One JSON object per line.
    case jsonl
    /// RFC 4180 CSV: a header line, then one line per row, CRLF line ends.
    case csv
}

/// `--format table|json|jsonl|csv`, and `--json` (kept as an alias where it existed).
struct OutputOptions: ParsableArguments {
    @Option(help: ArgumentHelp("table (default), json, jsonl or csv.", valueName: "F"))
    var format: OutputFormat?
    @Flag(help: "Short for --format json.")
    var json = false

    func validate() throws {
        if json, let format, format != .json {
            throw ValidationError("--json means --format json: it cannot be combined with --format \(format.rawValue)")
        }
    }

    /// The format asked for: `--format`, else `.json` for `--json`, else a table.
    var resolved: OutputFormat { format ?? (json ? .json : .table) }
}

/// A JSON value whose objects keep their keys in the order given (rows read as their columns do).
indirect enum JSONValue: Sendable {
    case string(String)
    case int(Int64)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(String, JSONValue)])
    /// JSON text written elsewhere (the export schema's lines), inserted as it is.
    case raw(String)

    /// Compact JSON text.
    var text: String {
        var buffer = JSONBuffer()
        write(to: &buffer)
        return buffer.text
    }

    /// Appends ``text`` to `buffer` (the tool's one JSON writer).
    func write(to buffer: inout JSONBuffer) {
        switch self {
        case .string(let s): buffer.appendString(s)
        case .int(let n): buffer.appendInteger(n)
        case .bool(let b): if b { buffer.appendRaw("true") } else { buffer.appendRaw("false") }
        case .null: buffer.appendRaw("null")
        case .array(let values):
            buffer.appendByte(0x5B)
            for (i, value) in values.enumerated() {
                if i > 0 { buffer.appendByte(0x2C) }
                value.write(to: &buffer)
            }
            buffer.appendByte(0x5D)
        case .object(let pairs):
            buffer.appendByte(0x7B)
            for (i, pair) in pairs.enumerated() {
                if i > 0 { buffer.appendByte(0x2C) }
                buffer.appendString(pair.0)
                buffer.appendByte(0x3A)
                pair.1.write(to: &buffer)
            }
            buffer.appendByte(0x7D)
        case .raw(let text): buffer.appendRaw(text)
        }
    }

    var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The text of a CSV or table cell: strings bare, `null` empty.
    var cellText: String {
        switch self {
        case .string(let s): s
        case .null: ""
        default: text
        }
    }

    static func uint(_ n: UInt64) -> JSONValue { n <= UInt64(Int64.max) ? .int(Int64(n)) : .string(String(n)) }
    static func optional(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
}

/// A column of a ``Listing``.
struct Column: Sendable {
    /// The key in JSON objects and the CSV header.
    var key: String
    /// The table's header (default: the key).
    var header: String
    /// Right-aligned in the table (numbers).
    var rightAligned = false
    /// Which formats show it: a table-only column (a derived duration, a readable summary) is
    /// not part of the machine formats, a machine-only one not part of the table.
    var inTable = true
    var inMachineFormats = true
    /// What the table shows for `null`.
    var tableNull = "-"

    init(_ key: String, header: String? = nil, right: Bool = false, inTable: Bool = true, inMachineFormats: Bool = true, tableNull: String = "-") {
        self.key = key
        self.header = header ?? key
        self.rightAligned = right
        self.inTable = inTable
        self.inMachineFormats = inMachineFormats
        self.tableNull = tableNull
    }
}

/// Rows under named columns, printed in any ``OutputFormat`` by one path (``Output/print(_:as:)``).
struct Listing: Sendable {
    /// One row: a value per column and, optionally, its own JSON object (a nested schema, such as
    /// the export schema of an event) used instead of the columns' flat object.
    struct Row: Sendable {
        var cells: [JSONValue]
        var object: JSONValue?
        init(_ cells: [JSONValue], object: JSONValue? = nil) {
            self.cells = cells
            self.object = object
        }
    }

    var columns: [Column]
    var rows: [Row] = []

    /// The row's JSON object: its own, else the machine columns' keys and values in order.
    func object(_ row: Row) -> JSONValue {
        if let object = row.object { return object }
        return .object(zip(columns, row.cells).filter { $0.0.inMachineFormats }.map { ($0.0.key, $0.1) })
    }
}

extension Output {
    /// RFC 4180: a field is quoted when it holds a comma, a double quote, CR or LF (or starts or
    /// ends with a space, which some readers trim); a quote inside is doubled. A field holding
    /// any other control character (a NUL, a tab) is quoted too: RFC 4180 has no place for
    /// them outside quotes, and the text is kept exact, as in JSON.
    static func csvField(_ text: String) -> String {
        let needsQuotes = text.contains { $0 == "," || $0 == "\"" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }
            || text.unicodeScalars.contains(where: isControl)
            || text.first == " " || text.last == " "
        guard needsQuotes else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// One CSV record, CRLF-terminated as RFC 4180 writes it.
    static func csvRecord(_ fields: [String]) -> String {
        fields.map(csvField).joined(separator: ",") + "\r\n"
    }

    /// The listing in `format`: the one way every command prints rows. `table` is aligned, with
    /// a header; `json` an array of row objects; `jsonl` one object per line; `csv` RFC 4180
    /// with a header record. The text ends with a newline unless it is empty.
    static func render(_ listing: Listing, as format: OutputFormat) -> String {
        switch format {
        case .table:
            let shown = listing.columns.indices.filter { listing.columns[$0].inTable }
            let header = shown.map { (listing.columns[$0].rightAligned ? ">" : "") + listing.columns[$0].header }
            let rows = listing.rows.map { row in
                shown.map { i in row.cells[i].isNull ? listing.columns[i].tableNull : row.cells[i].cellText }
            }
            return table(header, rows) + "\n"
        case .json:
            guard !listing.rows.isEmpty else { return "[]\n" }
            return "[\n" + listing.rows.map { "  " + listing.object($0).text }.joined(separator: ",\n") + "\n]\n"
        case .jsonl:
            return listing.rows.map { listing.object($0).text + "\n" }.joined()
        case .csv:
            return csvHeader(listing) + csvRows(listing)
        }
    }

    /// The table's rows without a header or alignment, two spaces between cells: for output
    /// that streams (`tail`), where later rows cannot widen earlier columns.
    static func lines(_ listing: Listing) -> String {
        let shown = listing.columns.indices.filter { listing.columns[$0].inTable }
        return listing.rows.map { row in
            shown.map { i in row.cells[i].isNull ? listing.columns[i].tableNull : visible(row.cells[i].cellText) }
                .filter { !$0.isEmpty }.joined(separator: "  ") + "\n"
        }.joined()
    }

    /// The CSV header record of a listing's machine columns.
    static func csvHeader(_ listing: Listing) -> String {
        csvRecord(listing.columns.filter(\.inMachineFormats).map(\.key))
    }

    /// The CSV records of a listing's rows (no header), for output that streams.
    static func csvRows(_ listing: Listing) -> String {
        listing.rows.map { row in
            csvRecord(zip(listing.columns, row.cells).filter { $0.0.inMachineFormats }.map { $0.1.cellText })
        }.joined()
    }

    /// Prints a listing to stdout in `format` (see ``render(_:as:)``).
    static func print(_ listing: Listing, as format: OutputFormat) {
        Swift.print(render(listing, as: format), terminator: "")
    }
}

/// A progress bar on stdout, drawn only when stdout is a terminal.
struct ProgressBar {
    let label: String
    let total: Int
    let enabled: Bool
    private var lastDrawn = -1

    init(_ label: String, total: Int, enabled: Bool = Output.stdoutIsTerminal) {
        self.label = label
        self.total = max(1, total)
        self.enabled = enabled
    }

    mutating func update(_ done: Int) {
        guard enabled else { return }
        let percent = min(100, done * 100 / total)
        guard percent != lastDrawn else { return }
        lastDrawn = percent
        let width = 30
        let filled = percent * width / 100
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        print("\r\(label) [\(bar)] \(percent)%", terminator: "")
        Output.flush()
    }

    func finish() {
        guard enabled else { return }
        print("\r\u{1B}[2K", terminator: "")
        Output.flush()
    }
}

/// Monotonic seconds.
func measure<T>(_ body: () throws -> T) rethrows -> (T, Double) {
    let start = DispatchTime.now().uptimeNanoseconds
    let value = try body()
    return (value, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
}

func measure<T>(_ body: () async throws -> T) async rethrows -> (T, Double) {
    let start = DispatchTime.now().uptimeNanoseconds
    let value = try await body()
    return (value, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
}

/// Ends the process (the C `exit`, unambiguous inside command types).
func terminate(_ status: Int32) -> Never {
    fflush(nil)
    #if canImport(Glibc)
    Glibc.exit(status)
    #else
    Darwin.exit(status)
    #endif
}
