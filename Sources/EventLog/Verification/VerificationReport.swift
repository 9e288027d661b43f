/// The result of ``SegmentedLog/verify(at:acknowledgedElsewhere:decodingRecords:)``: every segment, batch and index checked.
public struct VerificationReport: Sendable, CustomStringConvertible {
    /// One segment file as verification found it.
    public struct Segment: Hashable, Sendable {
        /// The segment file's path.
        public var file: String
        /// The first position the segment holds.
        public var basePosition: LogPosition
        /// One past the last valid record.
        public var nextPosition: LogPosition
        /// Valid batches.
        public var batches: Int
        /// Valid records.
        public var records: UInt64
        /// The file's size in bytes (including never-written preallocated space).
        public var fileBytes: Int64
        /// Bytes of batch data (headers and stored payloads).
        public var dataBytes: Int64
        /// Payload bytes as stored (compressed).
        public var storedPayloadBytes: Int64
        /// Payload bytes before compression.
        public var uncompressedPayloadBytes: Int64
        /// Whether the segment is sealed (has an index side file).
        public var sealed: Bool
        /// The smallest and largest record timestamps.
        public var minTimestamp: LogTimestamp?
        /// See ``minTimestamp``.
        public var maxTimestamp: LogTimestamp?
    }

    /// A finding.
    public struct Problem: Sendable, CustomStringConvertible {
        /// How serious a finding is.
        public enum Severity: String, Sendable {
            /// Acknowledged data is damaged or missing: repair would drop data.
            case damage
            /// Derived or unacknowledged data needs attention (a missing index, a torn tail
            /// that the next writer open will truncate); no acknowledged record is affected.
            case warning
        }
        /// How serious it is.
        public var severity: Severity
        /// What and where.
        public var error: LogError
        public var description: String { "\(severity.rawValue): \(error)" }
    }

    /// The store directory.
    public var directory: String
    /// The segments, in order.
    public var segments: [Segment] = []
    /// What was found, in order of position.
    public var problems: [Problem] = []

    /// Whether no damage was found (warnings allowed).
    public var isIntact: Bool { !problems.contains { $0.severity == .damage } }
    /// The first damage, where repair would cut.
    public var firstDamage: LogError? { problems.first { $0.severity == .damage }?.error }
    /// Valid records in all segments.
    public var records: UInt64 { segments.reduce(0) { $0 + $1.records } }
    /// Valid batches in all segments.
    public var batches: Int { segments.reduce(0) { $0 + $1.batches } }
    /// Bytes of batch data in all segments.
    public var dataBytes: Int64 { segments.reduce(0) { $0 + $1.dataBytes } }
    /// Stored (compressed) payload bytes.
    public var storedPayloadBytes: Int64 { segments.reduce(0) { $0 + $1.storedPayloadBytes } }
    /// Uncompressed payload bytes.
    public var uncompressedPayloadBytes: Int64 { segments.reduce(0) { $0 + $1.uncompressedPayloadBytes } }

    public var description: String {
        var lines = ["\(segments.count) segments, \(batches) batches, \(records) records: \(isIntact ? "intact" : "DAMAGED")"]
        lines += problems.map(\.description)
        return lines.joined(separator: "\n")
    }
}

/// The result of ``SegmentedLog/repair(at:)``.
public struct RepairReport: Sendable, CustomStringConvertible {
    /// Where the log was cut, or nil when there was no damage and nothing was done.
    public var cut: LogError?
    /// The first position dropped (the log now ends before it).
    public var firstDroppedPosition: LogPosition?
    /// How many records were dropped: positions `firstDroppedPosition ..< firstDroppedPosition +
    /// droppedRecords`. Exact when ``droppedRecordsAreExact``; otherwise a lower bound (a damaged
    /// batch header hides its own count and what follows it in the last segment).
    public var droppedRecords: UInt64 = 0
    /// Whether ``droppedRecords`` counts every dropped record.
    public var droppedRecordsAreExact = true
    /// The index and checkpoint files removed with the segments they described (or without:
    /// the checkpoint of a missing segment).
    public var removedSideFiles: [String] = []
    /// Store files rewritten (a damaged `eventkernel.store`, in a new history epoch).
    public var rewrittenFiles: [String] = []
    /// How many bytes were removed from the log.
    public var droppedBytes: Int64 = 0
    /// Where the removed bytes were kept.
    public var savedFiles: [String] = []

    public var description: String {
        guard let cut else { return "no damage found; nothing was changed" }
        return """
            cut the log at \(cut.file ?? "?") offset \(cut.offset ?? 0) (\(cut.message))
            dropped \(droppedRecordsAreExact ? "" : "at least ")\(droppedRecords) records (positions \(firstDroppedPosition.map(String.init) ?? "?")..<\(firstDroppedPosition.map { String($0 + droppedRecords) } ?? "?")), \(droppedBytes) bytes
            removed side files: \(removedSideFiles.isEmpty ? "none" : removedSideFiles.joined(separator: ", "))\(rewrittenFiles.isEmpty ? "" : "\nrewrote: " + rewrittenFiles.joined(separator: ", "))
            kept the dropped bytes in: \(savedFiles.joined(separator: ", "))
            """
    }
}
