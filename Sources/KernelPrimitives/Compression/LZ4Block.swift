private import CLZ4

/// Why LZ4 could not compress or decompress: the layers above turn it into their own error
/// (the log's `LogError` with code `tooLarge` or `compression`).
package struct CompressionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure.
    package enum Kind: Hashable, Sendable {
        /// The input exceeds ``LZ4Block/maxInputSize``.
        case tooLarge
        /// liblz4 refused: a compression failure, or malformed compressed input.
        case failed
    }

    /// What kind of failure.
    package var kind: Kind
    /// What happened, in words.
    package var message: String

    /// Creates an error.
    package init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    package var description: String { message }
}

/// LZ4 block compression over liblz4, used for batch payloads and snapshots.
///
/// Block format (not frame format): the container (batch header, snapshot header) already
/// records both lengths and a checksum, so the frame's own headers would be redundant bytes.
package enum LZ4Block {
    /// The largest input LZ4 accepts (about 2 GiB).
    package static let maxInputSize = Int(LZ4_MAX_INPUT_SIZE)

    /// Compresses `source`, appending the compressed bytes to `destination`.
    /// - Parameters:
    ///   - source: The bytes to compress.
    ///   - destination: The buffer the compressed bytes are appended to.
    /// - Returns: The number of bytes appended.
    /// - Throws: ``CompressionError`` of kind ``CompressionError/Kind/tooLarge`` beyond
    ///   ``maxInputSize``, ``CompressionError/Kind/failed`` if liblz4 fails.
    @discardableResult
    package static func compress(_ source: UnsafeRawBufferPointer, appendingTo destination: inout [UInt8]) throws(CompressionError) -> Int {
        let bound = try compressBound(source)
        if source.isEmpty { return 0 }
        let start = destination.count
        destination.append(contentsOf: repeatElement(0, count: bound))
        let written = destination.withUnsafeMutableBytes { out -> Int32 in
            LZ4_compress_default(
                source.baseAddress!.assumingMemoryBound(to: CChar.self),
                (out.baseAddress! + start).assumingMemoryBound(to: CChar.self),
                Int32(source.count), Int32(bound))
        }
        guard written > 0 else {
            destination.removeLast(bound)
            throw CompressionError(.failed, "LZ4 compression of \(source.count) bytes failed")
        }
        destination.removeLast(bound - Int(written))
        return Int(written)
    }

    /// `source` compressed, in an array of its own whose bytes past those written are never
    /// touched: a large input's compressed copy (a snapshot body) costs the memory of its
    /// compressed size, where ``compress(_:appendingTo:)`` zero-fills LZ4's whole bound first.
    /// - Parameter source: The bytes to compress.
    /// - Throws: ``CompressionError`` as ``compress(_:appendingTo:)``.
    package static func compressed(_ source: UnsafeRawBufferPointer) throws(CompressionError) -> [UInt8] {
        let bound = try compressBound(source)
        if source.isEmpty { return [] }
        var written: Int32 = 0
        let output = [UInt8](unsafeUninitializedCapacity: bound) { out, count in
            written = LZ4_compress_default(
                source.baseAddress!.assumingMemoryBound(to: CChar.self),
                UnsafeMutableRawPointer(out.baseAddress!).assumingMemoryBound(to: CChar.self),
                Int32(source.count), Int32(bound))
            count = max(0, Int(written))
        }
        guard written > 0 else { throw CompressionError(.failed, "LZ4 compression of \(source.count) bytes failed") }
        return output
    }

    /// LZ4's bound on the compressed size of `source`.
    /// - Throws: ``CompressionError`` of kind ``CompressionError/Kind/tooLarge`` beyond ``maxInputSize``.
    private static func compressBound(_ source: UnsafeRawBufferPointer) throws(CompressionError) -> Int {
        guard source.count <= maxInputSize else {
            throw CompressionError(.tooLarge, "\(source.count) bytes exceed LZ4's input limit of \(maxInputSize)")
        }
        return Int(LZ4_compressBound(Int32(source.count)))
    }

    /// Decompresses `source` into `destination`, which must be exactly the original length.
    /// - Parameters:
    ///   - source: The compressed bytes.
    ///   - destination: Where the original bytes go; its size is the original length.
    /// - Throws: ``CompressionError`` of kind ``CompressionError/Kind/failed`` when the input is
    ///   malformed or does not decompress to exactly `destination.count` bytes.
    package static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) throws(CompressionError) {
        if destination.isEmpty && source.isEmpty { return }
        guard let src = source.baseAddress, let dst = destination.baseAddress,
              source.count <= Int(Int32.max), destination.count <= Int(Int32.max) else {
            throw CompressionError(.failed, "LZ4 input of \(source.count) bytes cannot decompress to \(destination.count) bytes")
        }
        // LZ4_decompress_safe never reads or writes out of bounds, whatever the input.
        let produced = LZ4_decompress_safe(
            src.assumingMemoryBound(to: CChar.self), dst.assumingMemoryBound(to: CChar.self),
            Int32(source.count), Int32(destination.count))
        guard produced == Int32(destination.count) else {
            throw CompressionError(.failed, "LZ4 data decompressed to \(produced) bytes, expected \(destination.count)")
        }
    }
}
