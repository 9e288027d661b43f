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
        return pairs.map { $0.0 + String(repeating: " ", count: width - $0.0.count) + "  " + $0.1 }.joined(separator: "\n")
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
