import Foundation
public import EventLog
import KernelPrimitives

/// An event a consumer's handler failed on after every attempt, set aside so the consumer
/// could go on: kept durably in `<store>/consumers/<name>.parked` until it is retried
/// successfully (``Consumer/retryParked(_:)``) or skipped (``Consumer/skipParked(at:)``).
public struct ParkedEvent: Hashable, Sendable {
    /// The event's position in the log.
    public var position: LogPosition
    /// Its stream (`<entity type>/<id>`).
    public var stream: String
    /// Its event type.
    public var eventType: String
    /// The last error's type (`String(reflecting: type(of: error))`).
    public var errorType: String
    /// The last error's description.
    public var error: String
    /// Attempts made so far, retries of the parked event included.
    public var attempts: Int
    /// When it was parked, or last retried.
    public var parkedAt: LogTimestamp

    /// Creates a parked event.
    /// - Parameters:
    ///   - position: The event's position.
    ///   - stream: Its stream.
    ///   - eventType: Its event type.
    ///   - errorType: The last error's type.
    ///   - error: The last error's description.
    ///   - attempts: Attempts made.
    ///   - parkedAt: When it was parked or last retried.
    public init(position: LogPosition, stream: String, eventType: String, errorType: String, error: String,
                attempts: Int, parkedAt: LogTimestamp) {
        self.position = position
        self.stream = stream
        self.eventType = eventType
        self.errorType = errorType
        self.error = error
        self.attempts = attempts
        self.parkedAt = parkedAt
    }

    static let magic: [UInt8] = Array("EKPK".utf8)
    static let formatVersion: UInt16 = 1

    /// A parked list's file (format 1): the magic `EKPK`, the format version (UInt16 LE), the
    /// consumer's name, the count (varint), each event (position UInt64 LE, attempts varint,
    /// time Int64 LE, then stream, event type, error type and error as varint-length UTF-8),
    /// then the CRC-32C of everything before it (UInt32 LE).
    static func encode(_ events: [ParkedEvent], consumer: String) -> [UInt8] {
        var writer = BinaryWriter(capacity: 64 + events.count * 96)
        writer.writeRaw(magic)
        writer.writeFixed(formatVersion)
        writer.writeString(consumer)
        writer.writeVarint(UInt64(events.count))
        for event in events {
            writer.writeFixed(event.position)
            writer.writeVarint(UInt64(max(0, event.attempts)))
            writer.writeFixed(event.parkedAt.nanosecondsSince1970)
            writer.writeString(event.stream)
            writer.writeString(event.eventType)
            writer.writeString(event.errorType)
            writer.writeString(event.error)
        }
        var bytes = writer.bytes
        let crc = CRC32C.checksum(bytes)
        withUnsafeBytes(of: crc.littleEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// Decodes a parked list's file.
    /// - Returns: The consumer's name the file records, and the events in position order.
    static func decode(_ bytes: [UInt8]) throws(ConsumerFileDamage) -> (consumer: String, events: [ParkedEvent]) {
        guard let body = ConsumerFileDamage.checkedBody(bytes, magic: magic, version: formatVersion) else {
            throw ConsumerFileDamage.describe(bytes, magic: magic, version: formatVersion)
        }
        var reader = BinaryReader(body)
        do {
            _ = try reader.readRaw(count: 6)
            let consumer = try reader.readString()
            let count = try reader.readVarint()
            guard count <= UInt64(body.count) else { throw ConsumerFileDamage("it claims \(count) events in \(body.count) bytes") }
            var events: [ParkedEvent] = []
            for _ in 0..<count {
                let position = try reader.readFixed(UInt64.self)
                let attempts = Int(clamping: try reader.readVarint())
                let time = LogTimestamp(nanosecondsSince1970: try reader.readFixed(Int64.self))
                events.append(ParkedEvent(position: position, stream: try reader.readString(), eventType: try reader.readString(),
                                          errorType: try reader.readString(), error: try reader.readString(),
                                          attempts: attempts, parkedAt: time))
            }
            try reader.expectEnd()
            return (consumer, events)
        } catch let damage as ConsumerFileDamage {
            throw damage
        } catch {
            throw ConsumerFileDamage("the record does not decode (\(error))")
        }
    }
}
