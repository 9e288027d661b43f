#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SegmentedLog {
    /// The first recording time of the damaged batch `damage` names (its file, offset and
    /// position, as verification reports it), read from the batch's header when the header's
    /// own checksum holds and it is the batch of that position: a payload's damage leaves the
    /// header, checksummed apart from it, to be trusted. A reader that stops before the damage
    /// learns from it whether the log's prefix recorded at or before a time ends before the
    /// batch (every event of the batch was recorded after that time) without reading the batch.
    /// - Returns: The header's minimum record timestamp; `nil` when the header is damaged too,
    ///   is another batch's, or cannot be read.
    package static func firstRecordingTime(ofDamagedBatch damage: LogError) -> LogTimestamp? {
        guard let path = damage.file, let offset = damage.offset, let position = damage.position,
              let file = try? OpenFile.open(path, flags: O_RDONLY),
              let bytes = try? file.read(fromAbsoluteOffset: offset, count: BatchHeader.size),
              bytes.count == BatchHeader.size,
              case .success(let header) = bytes.withUnsafeBytes({ BatchHeader.decode($0) }),
              header.firstPosition == position, header.recordCount > 0 else { return nil }
        return LogTimestamp(nanosecondsSince1970: header.minTimestamp)
    }
}
