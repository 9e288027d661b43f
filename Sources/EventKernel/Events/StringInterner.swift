/// Recently decoded strings, found by their bytes.
///
/// A log repeats a handful of strings in every record: event types (`"activity.added"`),
/// entity types, an activity's type name. Building each as a new `String` validated its UTF-8
/// and went through generic code on every record: a fifth of a full replay's time (measured with
/// `perf` on `BenchProbe open`). A replay keeps one interner and gets the same `String` back for
/// the same bytes, which also makes later identity checks (`hasSameUTF8`) a two-word compare.
///
/// Not a cache of every string: it holds the last ``capacity`` distinct ones and replaces the
/// oldest, so a log with many distinct strings costs one comparison pass per miss.
package struct StringInterner: Sendable {
    /// How many distinct strings are kept.
    package static let capacity = 16

    private var entries: [(bytes: [UInt8], string: String)] = []
    private var oldest = 0

    package init() {}

    /// The string spelled by `bytes`, or `nil` when they are not valid UTF-8.
    /// - Complexity: O(k · n) comparisons for k kept strings of n bytes; a new string is
    ///   validated once.
    package mutating func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        for entry in entries where entry.bytes.count == bytes.count {
            let same = entry.bytes.withUnsafeBufferPointer { kept in
                bytes.isEmpty || memcmp(kept.baseAddress!, bytes.baseAddress!, bytes.count) == 0
            }
            if same { return entry.string }
        }
        guard let string = String(validating: bytes, as: UTF8.self) else { return nil }
        let entry = (bytes: Array(bytes), string: string)
        if entries.count < Self.capacity {
            entries.append(entry)
        } else {
            entries[oldest] = entry
            oldest = (oldest + 1) % Self.capacity
        }
        return string
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
