import Foundation
public import EventLog
import KernelPrimitives

/// An event a consumer's handler failed on after every attempt, set aside so the consumer
/// could go on: kept durably in `<store>/consumers/<name>.parked` until it is retried
/// successfully (``Consumer/retryParked(_:)``, or a run after ``Consumer/requestRetry(ofParkedAt:)``)
/// or skipped (``Consumer/skipParked(at:)``).
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
    /// Whether a retry was asked for (``Consumer/requestRetry(ofParkedAt:)``, `eventkernel
    /// consumers parked NAME --retry`): the consumer's next ``Consumer/run(batchSize:handler:)``
    /// hands the event to its handler again, and clears this whatever the outcome.
    public var retryRequested: Bool

    /// Creates a parked event.
    /// - Parameters:
    ///   - position: The event's position.
    ///   - stream: Its stream.
    ///   - eventType: Its event type.
    ///   - errorType: The last error's type.
    ///   - error: The last error's description.
    ///   - attempts: Attempts made.
    ///   - parkedAt: When it was parked or last retried.
    ///   - retryRequested: Whether a retry was asked for.
    public init(position: LogPosition, stream: String, eventType: String, errorType: String, error: String,
                attempts: Int, parkedAt: LogTimestamp, retryRequested: Bool = false) {
        self.position = position
        self.stream = stream
        self.eventType = eventType
        self.errorType = errorType
        self.error = error
        self.attempts = attempts
        self.parkedAt = parkedAt
        self.retryRequested = retryRequested
    }

    static let magic: [UInt8] = Array("EKPK".utf8)
    /// The newest format this build writes. Format 2 adds each entry's flags (its retry
    /// request); a list with no request is written in format 1, which builds from before
    /// format 2 read too (an application rolled back keeps its lists), and read back as a
    /// list with no request.
    static let formatVersion: UInt16 = 2
    /// The formats this build reads.
    static let readableVersions: ClosedRange<UInt16> = 1...2
    /// An entry's flag: a retry was requested.
    private static let retryFlag: UInt8 = 1

    /// A parked list's file (format 2): the magic `EKPK`, the format version (UInt16 LE), the
    /// consumer's name, the count (varint), each event (position UInt64 LE, attempts varint,
    /// time Int64 LE, flags UInt8, then stream, event type, error type and error as
    /// varint-length UTF-8), then the CRC-32C of everything before it (UInt32 LE). Format 1 is
    /// the same without the flags byte: what a list with no retry request is written in.
    static func encode(_ events: [ParkedEvent], consumer: String) -> [UInt8] {
        let version: UInt16 = events.contains(where: \.retryRequested) ? formatVersion : 1
        var writer = BinaryWriter(capacity: 64 + events.count * 96)
        writer.writeRaw(magic)
        writer.writeFixed(version)
        writer.writeString(consumer)
        writer.writeVarint(UInt64(events.count))
        for event in events {
            writer.writeFixed(event.position)
            writer.writeVarint(UInt64(max(0, event.attempts)))
            writer.writeFixed(event.parkedAt.nanosecondsSince1970)
            if version >= 2 { writer.writeFixed(event.retryRequested ? retryFlag : 0) }
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
        guard let (version, body) = ConsumerFileDamage.checkedBody(bytes, magic: magic, versions: readableVersions) else {
            throw ConsumerFileDamage.describe(bytes, magic: magic, versions: readableVersions)
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
                let flags = version >= 2 ? try reader.readFixed(UInt8.self) : 0
                guard flags & ~retryFlag == 0 else {
                    throw ConsumerFileDamage("the event at position \(position) has flags \(flags); this build knows \(retryFlag)")
                }
                events.append(ParkedEvent(position: position, stream: try reader.readString(), eventType: try reader.readString(),
                                          errorType: try reader.readString(), error: try reader.readString(),
                                          attempts: attempts, parkedAt: time, retryRequested: flags & retryFlag != 0))
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
