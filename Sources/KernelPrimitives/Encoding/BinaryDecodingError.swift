/// Why binary input could not be decoded, and where.
///
/// The one public type of this module: ``BinaryReader`` throws it, and it reaches users as the
/// cause of a failed decode (EventKernel re-exports it under the same name).
public struct BinaryDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Reason: Hashable, Sendable {
        /// The input ended; `needed` more bytes were required.
        case truncated(needed: Int)
        /// A varint ran longer than 10 bytes or overflowed 64 bits.
        case malformedVarint
        /// A string's bytes are not valid UTF-8.
        case invalidUTF8
        /// A value is out of range or unknown (a tag, a version, a length).
        case invalidValue(String)
        /// Bytes were left over after the value was decoded.
        case trailingBytes(Int)
    }

    /// What went wrong.
    public var reason: Reason
    /// The byte offset, from the start of the input, where decoding failed.
    public var offset: Int

    /// Creates an error.
    public init(_ reason: Reason, at offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    public var description: String {
        let what: String
        switch reason {
        case .truncated(let needed): what = "input ends early (\(needed) more byte(s) needed)"
        case .malformedVarint: what = "malformed varint"
        case .invalidUTF8: what = "string is not valid UTF-8"
        case .invalidValue(let detail): what = detail
        case .trailingBytes(let count): what = "\(count) unexpected trailing byte(s)"
        }
        return "binary decoding failed at byte offset \(offset): \(what)"
    }
}
