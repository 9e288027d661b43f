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
///
/// Each kept string carries its length and two words of its bytes (the first and the last
/// eight, overlapping for shorter strings), taken once when it is kept: a string of up to 16
/// bytes (every event type, entity type and activity type in practice) is found by three integer
/// compares, a longer one is confirmed by one `memcmp`. No copy of the bytes is kept, and the
/// first string is held inline: an interner made for one commit of one event (the live append
/// path makes one per commit) allocates nothing beyond the string itself, which a short one
/// does not.
///
/// `@usableFromInline` so that its inlinable members reach the other modules inlined (see
/// ``Varint``: Swift 6.3.1 does not serialise them for a plain `package` type).
@usableFromInline package struct StringInterner: Sendable {
    /// How many distinct strings are kept.
    package static let capacity = 16

    private struct Kept: Sendable {
        var string: String
        var words: Words
    }

    /// A string's length with the first and the last eight of its bytes (fewer bytes: the first
    /// and last four, or each byte).
    private struct Words: Equatable, Sendable {
        var count: Int
        var head: UInt64
        var tail: UInt64

        @inline(__always)
        init(_ bytes: UnsafeBufferPointer<UInt8>) {
            count = bytes.count
            let base = UnsafeRawPointer(bytes.baseAddress)
            switch bytes.count {
            case 8...:
                head = base!.loadUnaligned(as: UInt64.self)
                tail = base!.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self)
            case 4..<8:
                head = UInt64(base!.loadUnaligned(as: UInt32.self))
                tail = UInt64(base!.loadUnaligned(fromByteOffset: bytes.count - 4, as: UInt32.self))
            default:
                head = bytes.reduce(0) { $0 << 8 | UInt64($1) }
                tail = 0
            }
        }
    }

    private var first: Kept?
    private var more: [Kept] = []
    /// The next of ``more`` to replace once it is full.
    private var oldest = 0

    package init() {}

    /// The string spelled by `bytes`, or `nil` when they are not valid UTF-8.
    /// - Complexity: O(k) integer compares for k kept strings, and one comparison of n bytes for
    ///   a string longer than 16 bytes; a new string is validated once.
    @usableFromInline package mutating func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        let words = Words(bytes)
        if let first, first.words == words, Self.is(first.string, spelledBy: bytes) { return first.string }
        for kept in more where kept.words == words && Self.is(kept.string, spelledBy: bytes) { return kept.string }
        guard let string = String(utf8Validating: bytes) else { return nil }
        let kept = Kept(string: string, words: words)
        if first == nil {
            first = kept
        } else if more.count < Self.capacity - 1 {
            more.append(kept)
        } else {
            more[oldest] = kept
            oldest = (oldest + 1) % more.count
        }
        return string
    }

    /// Whether `string` (whose length and end words match) is spelled by `bytes`.
    @inline(__always)
    private static func `is`(_ string: String, spelledBy bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        // Up to 16 bytes the words covered every byte.
        guard bytes.count > 16 else { return true }
        var string = string
        return string.withUTF8 { memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
