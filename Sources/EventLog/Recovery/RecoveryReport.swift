/// What opening a log found and did, so that nothing recovery does is silent.
public struct RecoveryReport: Hashable, Sendable, CustomStringConvertible {
    /// A torn write removed from the end of the active segment.
    public struct TruncatedTail: Hashable, Sendable {
        /// The segment file.
        public var file: String
        /// Where the segment now ends: the offset of the torn batch.
        public var offset: Int64
        /// How many bytes were removed (not counting never-written zeros).
        public var droppedBytes: Int64
        /// Where the removed bytes were kept, if any were non-zero.
        public var savedTo: String?
        /// Why the batch was invalid.
        public var reason: String
    }

    /// The torn tail truncated on open, if there was one. Such a batch was never acknowledged.
    public var truncatedTail: TruncatedTail?
    /// Index side files that were missing or damaged and were rebuilt from their segments.
    public var rebuiltIndexes: [String] = []
    /// Segment files whose header was never completely written (a crash while creating them)
    /// and that held no data; they were rewritten.
    public var reinitializedSegments: [String] = []
    /// For read-only opens: where the readable prefix ends early because the tail is being
    /// written or is torn.
    public var incompleteTail: String?

    /// Whether recovery found nothing to do.
    public var isClean: Bool {
        truncatedTail == nil && rebuiltIndexes.isEmpty && reinitializedSegments.isEmpty && incompleteTail == nil
    }

    public var description: String {
        var lines: [String] = []
        if let t = truncatedTail {
            lines.append("truncated a torn write at the end of \(t.file) at offset \(t.offset) (\(t.droppedBytes) bytes\(t.savedTo.map { ", kept in \($0)" } ?? "")): \(t.reason)")
        }
        for index in rebuiltIndexes { lines.append("rebuilt segment index \(index)") }
        for segment in reinitializedSegments { lines.append("rewrote the header of empty segment \(segment)") }
        if let tail = incompleteTail { lines.append("readable prefix ends early: \(tail)") }
        return lines.isEmpty ? "clean" : lines.joined(separator: "\n")
    }
}
