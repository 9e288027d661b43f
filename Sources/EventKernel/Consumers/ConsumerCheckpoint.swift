import Foundation
public import EventLog
import KernelPrimitives

/// A consumer's committed position as stored: `<store>/consumers/<name>.checkpoint`.
///
/// The file (format 2): the magic `EKCP`, the format version (UInt16 LE), the committed
/// position (UInt64 LE), the time of the commit (Int64 LE, nanoseconds since 1970), the log's
/// history epoch when it was written (UInt64 LE), the anchor of the event just before the
/// committed position (a flag byte, 1 when present, then its timestamp Int64 LE and payload
/// CRC-32C UInt32 LE, as snapshots record theirs), the consumer's name (varint length, UTF-8),
/// then the CRC-32C of everything before it (UInt32 LE). A file whose magic, version, checksum
/// or name does not match is damage.
///
/// The epoch and anchor tie the checkpoint to the history of the log it was committed in:
/// `bindingProblem(in:end:consumer:)` tells a checkpoint that still fits the log from one
/// left behind by a cut (a repair, a torn tail, unsynced events lost in a crash).
public struct ConsumerCheckpoint: Hashable, Sendable {
    /// The consumer's name.
    public var name: String
    /// The next position the consumer handles: every event below it is handled.
    public var committed: LogPosition
    /// When it was committed.
    public var committedAt: LogTimestamp
    /// The log's history epoch when it was written.
    package var historyEpoch: UInt64 = 0
    /// The event at `committed - 1` when it was written (`nil` at 0, or when that event was
    /// not readable: released by compaction).
    package var anchor: SnapshotAnchor?

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
    static let formatVersion: UInt16 = 2

    /// A checkpoint at `committed` bound to `log`'s history as it is now: the one way the
    /// store, `tail --consumer` and `consumers reset` make the checkpoints they write.
    /// - Throws: ``RepositoryError/storage(_:)`` when the anchor event cannot be read.
    package static func bound(name: String, committed: LogPosition, in log: any RecordLog) throws -> ConsumerCheckpoint {
        var checkpoint = ConsumerCheckpoint(name: name, committed: committed, committedAt: .now())
        checkpoint.historyEpoch = log.historyEpoch
        checkpoint.anchor = try anchor(before: committed, in: log)
        return checkpoint
    }

    /// The anchor of the last event before `position` (the event at `position - 1` unless
    /// compaction removed it), or `nil` when there is none to read: the snapshots' rule
    /// (`EventStore.anchor(in:coveringUpTo:)`).
    private static func anchor(before position: LogPosition, in log: any RecordLog) throws -> SnapshotAnchor? {
        guard position > 0, position - 1 >= log.bounds.firstPosition else { return nil }
        return try EventStore.anchor(in: log, coveringUpTo: position)
    }

    /// Why this checkpoint cannot be used with `log` as it is now, or `nil` when it can: the
    /// one rule for the store's consumers, the positions handlers keep (``ConsumerStart/checkpoint(_:)``),
    /// `tail --consumer`, `consumers list` and `verify`.
    ///
    /// It is past the log's end; or the event it was committed after is gone or another one
    /// (its anchor does not match), which means the log was cut, or lost unsynced events, since.
    /// A checkpoint without an anchor (at the log's start, or after an event compaction
    /// released) is checked by its history epoch alone, and one whose event compaction
    /// removed or replaced since is bound still (compaction does not cut history).
    /// - Parameters:
    ///   - log: The log.
    ///   - end: The log's next position (the store's, as far as it has folded).
    /// - Throws: ``RepositoryError/storage(_:)`` when the anchor event cannot be read.
    package func bindingProblem(in log: any RecordLog, end: LogPosition) throws -> ConsumerError? {
        if committed > end { return .checkpointAheadOfLog(consumer: name, committed: committed, logEnd: end) }
        let epoch = log.historyEpoch
        guard let anchor else {
            guard historyEpoch != epoch, committed > log.bounds.firstPosition else { return nil }
            return .checkpointOffHistory(consumer: name, committed: committed,
                reason: "it was written in history epoch \(historyEpoch) without an event to check, and the log was cut since (it is in epoch \(epoch))")
        }
        // Compaction released the event: nothing to compare; compaction does not cut history.
        guard committed - 1 >= log.bounds.firstPosition else { return nil }
        let found = try Self.anchor(before: committed, in: log)
        if found == anchor { return nil }
        // Compaction removed or replaced the event it was committed after: positions do not
        // move, so the consumer resumes where it was (in the same history only: a cut since
        // may have put other events at those positions before they were compacted).
        if historyEpoch == epoch, try EventStore.readingRecords({ try log.isCompacted(at: committed - 1) }) { return nil }
        let what = found == nil ? "the log holds no event at position \(committed - 1)" : "the log holds another event at position \(committed - 1) than the one it was committed after"
        let history = historyEpoch == epoch ? "in the same history epoch (\(epoch)): acknowledged events were lost or changed" : "the log was cut since (history epoch \(historyEpoch), now \(epoch))"
        return .checkpointOffHistory(consumer: name, committed: committed, reason: "\(what); \(history)")
    }

    /// The file's bytes.
    func encoded() -> [UInt8] {
        var writer = BinaryWriter(capacity: 48 + name.utf8.count)
        writer.writeRaw(Self.magic)
        writer.writeFixed(Self.formatVersion)
        writer.writeFixed(committed)
        writer.writeFixed(committedAt.nanosecondsSince1970)
        writer.writeFixed(historyEpoch)
        if let anchor {
            writer.writeRaw([1])
            writer.writeFixed(anchor.timestamp.nanosecondsSince1970)
            writer.writeFixed(anchor.payloadChecksum)
        } else {
            writer.writeRaw([0])
        }
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
        let versions = Self.formatVersion...Self.formatVersion
        guard let (_, body) = ConsumerFileDamage.checkedBody(bytes, magic: Self.magic, versions: versions) else {
            throw ConsumerFileDamage.describe(bytes, magic: Self.magic, versions: versions)
        }
        var reader = BinaryReader(body)
        do {
            _ = try reader.readRaw(count: 6)
            committed = try reader.readFixed(UInt64.self)
            committedAt = LogTimestamp(nanosecondsSince1970: try reader.readFixed(Int64.self))
            historyEpoch = try reader.readFixed(UInt64.self)
            switch try reader.readRaw(count: 1)[0] {
            case 0: anchor = nil
            case 1: anchor = SnapshotAnchor(timestamp: LogTimestamp(nanosecondsSince1970: try reader.readFixed(Int64.self)),
                                            payloadChecksum: try reader.readFixed(UInt32.self))
            case let flag: throw ConsumerFileDamage("its anchor flag is \(flag), not 0 or 1")
            }
            name = try reader.readString()
            try reader.expectEnd()
        } catch let damage as ConsumerFileDamage {
            throw damage
        } catch {
            throw ConsumerFileDamage("the record does not decode (\(error))")
        }
    }
}

/// Why a consumer file is damaged, in words.
struct ConsumerFileDamage: Error {
    var reason: String
    init(_ reason: String) { self.reason = reason }

    /// The version and the bytes before the checksum when the magic matches, the version is
    /// one of `versions` and the checksum matches; `nil` otherwise.
    static func checkedBody(_ bytes: [UInt8], magic: [UInt8], versions: ClosedRange<UInt16>) -> (version: UInt16, body: [UInt8])? {
        guard bytes.count >= magic.count + 2 + 4, Array(bytes.prefix(magic.count)) == magic else { return nil }
        let version = UInt16(bytes[4]) | UInt16(bytes[5]) << 8
        guard versions.contains(version) else { return nil }
        let body = Array(bytes.dropLast(4))
        let tail = bytes.suffix(4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return CRC32C.checksum(body) == tail ? (version, body) : nil
    }

    /// What is wrong with bytes that ``checkedBody(_:magic:versions:)`` refused.
    static func describe(_ bytes: [UInt8], magic: [UInt8], versions: ClosedRange<UInt16>) -> ConsumerFileDamage {
        if bytes.count < magic.count + 2 + 4 { return ConsumerFileDamage("it is \(bytes.count) bytes long, shorter than any record") }
        if Array(bytes.prefix(magic.count)) != magic { return ConsumerFileDamage("it does not start with \"\(String(decoding: magic, as: UTF8.self))\"") }
        let found = UInt16(bytes[4]) | UInt16(bytes[5]) << 8
        if !versions.contains(found) {
            let readable = versions.count == 1 ? "\(versions.lowerBound)" : "\(versions.lowerBound) to \(versions.upperBound)"
            return ConsumerFileDamage("format version \(found), this build reads \(readable)")
        }
        return ConsumerFileDamage("its CRC-32C does not match its contents")
    }
}
