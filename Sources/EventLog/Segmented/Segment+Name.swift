extension Segment {
    /// A segment's file names: its base position zero-padded to 20 digits, so that names sort
    /// in position order (as Kafka names segments by base offset), with the file's extension
    /// (Docs/FileFormat.md, "Files").
    enum Name {
        static let segmentExtension = "log"
        static let indexExtension = "idx"
        static let checkpointExtension = "ckpt"

        /// The segment file.
        static func segment(_ base: LogPosition) -> String { "\(padded(base)).\(segmentExtension)" }
        /// The index side file, written when the segment is sealed.
        static func index(_ base: LogPosition) -> String { "\(padded(base)).\(indexExtension)" }
        /// The active segment's checkpoint, written on clean close.
        static func checkpoint(_ base: LogPosition) -> String { "\(padded(base)).\(checkpointExtension)" }

        static func padded(_ base: LogPosition) -> String {
            let digits = String(base)
            return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
        }

        /// The base position of a segment file name, or nil when the name is not a segment's.
        static func basePosition(ofSegmentNamed name: String) -> LogPosition? {
            basePosition(of: name, suffix: ".\(segmentExtension)")
        }

        /// The base position of a checkpoint file name, or nil when the name is not a checkpoint's.
        static func basePosition(ofCheckpointNamed name: String) -> LogPosition? {
            basePosition(of: name, suffix: ".\(checkpointExtension)")
        }

        /// Whether `name` is a segment file or one of its side files (index, checkpoint).
        static func isSegmentOrSideFile(_ name: String) -> Bool {
            [segmentExtension, indexExtension, checkpointExtension].contains { basePosition(of: name, suffix: ".\($0)") != nil }
        }

        /// Whether a directory listing holds a segment file.
        static func containsSegment(_ names: [String]) -> Bool {
            names.contains { basePosition(ofSegmentNamed: $0) != nil }
        }

        private static func basePosition(of name: String, suffix: String) -> LogPosition? {
            guard name.hasSuffix(suffix) else { return nil }
            let stem = name.dropLast(suffix.count)
            guard stem.count == 20, stem.allSatisfy({ $0 >= "0" && $0 <= "9" }) else { return nil }
            return LogPosition(stem)
        }
    }

    /// The base positions of the segment files in `directory`, in order.
    static func bases(in directory: String) throws(LogError) -> [LogPosition] {
        try StoreDirectory.list(directory).compactMap(Name.basePosition(ofSegmentNamed:)).sorted()
    }
}

/// ``Segment/Name`` under the name the test suites use.
typealias SegmentName = Segment.Name
