extension String {
    /// The string these UTF-8 bytes spell, or `nil` when they are not valid UTF-8: the one
    /// check every reader of stored strings makes (event types, ids, keys and values of the
    /// binary entity format, snapshot strings).
    ///
    /// Why not `String(validating:as:)` alone: generic over the encoding and not specialised
    /// for its callers, it asked the runtime for type metadata on every call (6% of a generic
    /// store's export, `perf`). Most stored strings are ASCII, which needs no validation beyond
    /// a look at the high bits, eight bytes at a time.
    /// - Complexity: O(n) for n bytes.
    @inlinable
    package init?(utf8Validating bytes: UnsafeBufferPointer<UInt8>) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            self = ""
            return
        }
        let raw = UnsafeRawPointer(base)
        var high: UInt64 = 0
        var i = 0
        while i &+ 8 <= bytes.count {
            high |= raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i &+= 8
        }
        while i < bytes.count {
            high |= UInt64(bytes[i])
            i &+= 1
        }
        if high & 0x8080_8080_8080_8080 == 0 {
            // ASCII: always valid UTF-8, so decoding repairs nothing.
            self = String(decoding: bytes, as: UTF8.self)
            return
        }
        guard let string = String(validating: bytes, as: UTF8.self) else { return nil }
        self = string
    }
}
