import Foundation
public import EventLog
import KernelPrimitives

/// A consumer's committed position as stored: `<store>/consumers/<name>.checkpoint`.
///
/// The file (format 1): the magic `EKCP`, the format version (UInt16 LE), the committed
/// position (UInt64 LE), the time of the commit (Int64 LE, nanoseconds since 1970), the
/// consumer's name (varint length, UTF-8), then the CRC-32C of everything before it (UInt32
/// LE). A file whose magic, version, checksum or name does not match is damage.
public struct ConsumerCheckpoint: Hashable, Sendable {
    /// The consumer's name.
    public var name: String
    /// The next position the consumer handles: every event below it is handled.
    public var committed: LogPosition
    /// When it was committed.
    public var committedAt: LogTimestamp

    /// Creates a checkpoint.
    /// - Parameters:
    ///   - name: The consumer's name.
    ///   - committed: The next position to handle.
    ///   - committedAt: When it was committed.
    public init(name: String, committed: LogPosition, committedAt: LogTimestamp) {
        self.name = name
        self.committed = committed
        self.committedAt = committedAt
    }

    static let magic: [UInt8] = Array("EKCP".utf8)
    static let formatVersion: UInt16 = 1

    /// The file's bytes.
    func encoded() -> [UInt8] {
        var writer = BinaryWriter(capacity: 48 + name.utf8.count)
        writer.writeRaw(Self.magic)
        writer.writeFixed(Self.formatVersion)
        writer.writeFixed(committed)
        writer.writeFixed(committedAt.nanosecondsSince1970)
        writer.writeString(name)
        var bytes = writer.bytes
        let crc = CRC32C.checksum(bytes)
        withUnsafeBytes(of: crc.littleEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// Decodes a file's bytes.
    /// - Parameter bytes: The file's contents.
    /// - Throws: A description of what is wrong, for ``ConsumerError/damagedFile(path:reason:)``.
    init(decoding bytes: [UInt8]) throws(ConsumerFileDamage) {
        guard let body = ConsumerFileDamage.checkedBody(bytes, magic: Self.magic, version: Self.formatVersion) else {
            throw ConsumerFileDamage.describe(bytes, magic: Self.magic, version: Self.formatVersion)
        }
        var reader = BinaryReader(body)
        do {
            _ = try reader.readRaw(count: 6)
            committed = try reader.readFixed(UInt64.self)
            committedAt = LogTimestamp(nanosecondsSince1970: try reader.readFixed(Int64.self))
            name = try reader.readString()
            try reader.expectEnd()
        } catch {
            throw ConsumerFileDamage("the record does not decode (\(error))")
        }
    }
}

/// Why a consumer file is damaged, in words.
struct ConsumerFileDamage: Error {
    var reason: String
    init(_ reason: String) { self.reason = reason }

    /// The bytes before the checksum when magic, version and checksum match; `nil` otherwise.
    static func checkedBody(_ bytes: [UInt8], magic: [UInt8], version: UInt16) -> [UInt8]? {
        guard bytes.count >= magic.count + 2 + 4, Array(bytes.prefix(magic.count)) == magic,
              UInt16(bytes[4]) | UInt16(bytes[5]) << 8 == version else { return nil }
        let body = Array(bytes.dropLast(4))
        let tail = bytes.suffix(4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return CRC32C.checksum(body) == tail ? body : nil
    }

    /// What is wrong with bytes that ``checkedBody(_:magic:version:)`` refused.
    static func describe(_ bytes: [UInt8], magic: [UInt8], version: UInt16) -> ConsumerFileDamage {
        if bytes.count < magic.count + 2 + 4 { return ConsumerFileDamage("it is \(bytes.count) bytes long, shorter than any record") }
        if Array(bytes.prefix(magic.count)) != magic { return ConsumerFileDamage("it does not start with \"\(String(decoding: magic, as: UTF8.self))\"") }
        let found = UInt16(bytes[4]) | UInt16(bytes[5]) << 8
        if found != version { return ConsumerFileDamage("format version \(found), this build reads \(version)") }
        return ConsumerFileDamage("its CRC-32C does not match its contents")
    }
}
