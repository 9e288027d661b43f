import Foundation
import KernelPrimitives

/// A purged stream that compaction has removed: what the store keeps of it is a digest of its
/// identity, never its entity id, so that no byte of the id remains while the id stays refused
/// for good (``RepositoryError/streamPurged(_:)``).
///
/// Compaction replaces the stream's `$purged` event with a *receipt*: an event of type
/// `$forgotten` at the same position and recording time, with the purge's metadata (who purged,
/// and why), on the stream `$forgotten/<digest in hex>`, whose payload names the entity type as
/// JSON (`{"entityType":"Note"}`). Every other event of the stream is removed. The log thus
/// still says that a stream of that type was purged, when and by whom, and no longer which one
/// (Docs/Forgetting.md; the bytes are in Docs/FileFormat.md, "Compaction receipts").
///
/// The digest is the first 16 bytes of SHA-256 over `"EKSTREAM"`, the entity type's UTF-8
/// length as a varint, the entity type, then the id as the envelope writes it: a UUID's 16 bytes
/// and the byte 0, or a string's UTF-8 bytes and the byte 1. Sixteen bytes, not 32: a receipt's
/// digest is its one part that does not compress, and it is written once per purged stream
/// (128 bits leave no chance of two streams colliding). A guessed id can be checked against it (the store must
/// recognise the id to refuse it), so a receipt hides which id was purged from a reader who
/// does not already suspect it: it is not encryption, which is what erasure is for.
public struct ForgottenStream: Hashable, Sendable, CustomStringConvertible {
    /// The event type of a receipt.
    public static let eventType = "$forgotten"
    /// The entity type of every receipt's stream.
    public static let streamType = "$forgotten"
    /// The schema version receipts are written with.
    public static let schemaVersion: UInt16 = 1

    /// The digest's bytes 0..<8 and 8..<16, each read big-endian: held inline, not as an array,
    /// so that a set of forgotten streams (one per purged stream, for the store's life) costs
    /// 16 bytes and no allocation an entry, and hashes two words. Ordered as the bytes are.
    private let high: UInt64, low: UInt64

    /// The digest of the forgotten stream's identity: ``digestLength`` bytes.
    public var digest: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.digestLength)
        for word in [high, low] { for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) } }
        return bytes
    }

    /// The bytes of a digest: SHA-256's first 16.
    public static let digestLength = 16

    /// The digest of `stream`.
    /// - Complexity: O(n) in the type's and the id's lengths.
    public init(_ stream: StreamID) {
        var bytes = Array("EKSTREAM".utf8)
        let type = Array(stream.entityType.utf8)
        Varint.encode(UInt64(type.count), into: &bytes)
        bytes += type
        switch stream.entityID {
        case .uuid(let uuid):
            withUnsafeBytes(of: uuid.uuid) { bytes += $0 }
            bytes.append(0)
        case .string(let string):
            bytes += Array(string.utf8)
            bytes.append(1)
        }
        (high, low) = Self.words(SHA256.digest(bytes))
    }

    /// A digest read back (a snapshot, a receipt's stream id); `nil` unless it is
    /// ``digestLength`` bytes.
    package init?(digest: [UInt8]) {
        guard digest.count == Self.digestLength else { return nil }
        (high, low) = Self.words(digest)
    }

    /// Whether this digest sorts before `other`'s, byte by byte (what a snapshot writes them in).
    package func precedes(_ other: ForgottenStream) -> Bool { (high, low) < (other.high, other.low) }

    /// The first 16 bytes of `bytes` as two big-endian words.
    private static func words(_ bytes: [UInt8]) -> (UInt64, UInt64) {
        var high: UInt64 = 0, low: UInt64 = 0
        for i in 0..<8 { high = high << 8 | UInt64(bytes[i]) }
        for i in 8..<16 { low = low << 8 | UInt64(bytes[i]) }
        return (high, low)
    }

    /// The digest in lowercase hex (32 digits).
    public var description: String {
        // Not `String(format:)` per byte: a compaction spells one per purged stream.
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(digest.count * 2)
        for word in [high, low] { for shift in stride(from: 60, through: 0, by: -4) { text.append(digits[Int(word >> UInt64(shift) & 15)]) } }
        return String(decoding: text, as: UTF8.self)
    }

    /// The stream the receipt is written to: `$forgotten/<hex digest>`.
    public var receiptStream: StreamID { StreamID(Self.streamType, .string(description)) }

    /// The forgotten stream a receipt names: `nil` unless `envelope` is a well-formed receipt
    /// (its type, its stream and a 32-digit lowercase hex id).
    public init?(receipt envelope: EventEnvelope) {
        guard envelope.eventType == Self.eventType, envelope.stream.entityType == Self.streamType,
              case .string(let hex) = envelope.entityID, let digest = Self.bytes(ofHex: hex) else { return nil }
        (high, low) = Self.words(digest)
    }

    /// The receipt replacing `purge` (the stream's `$purged` event, whose digest this is): its
    /// record payload.
    /// - Parameters:
    ///   - purge: The decoded `$purged` event.
    ///   - payloads: Each entity type's receipt payload, filled as they are met.
    package func receiptRecord(replacing purge: EventEnvelope, payloads: inout [String: [UInt8]]) -> [UInt8] {
        let type = purge.stream.entityType
        let payload = payloads[type] ?? Self.receiptPayload(entityType: type)
        payloads[type] = payload
        return EventEnvelope.encodeRecordPayload(
            eventType: Self.eventType, schemaVersion: Self.schemaVersion, stream: receiptStream, entityVersion: 1,
            metadata: purge.metadata, payload: payload)
    }

    /// A receipt's payload: `{"entityType":"<type>"}`, the type JSON-escaped. (A compaction
    /// asks once per entity type: ``receiptRecord(replacing:payloads:)``.)
    package static func receiptPayload(entityType: String) -> [UInt8] {
        let object = ["entityType": entityType]
        // A [String: String] always serializes.
        return Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data())
    }

    private static func bytes(ofHex hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count == 2 * digestLength else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digestLength)
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[i]), let low = value(digits[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }
}
