/// A record, kept outside the log, that the log acknowledged every position below
/// ``nextPosition`` in history epoch ``historyEpoch``: a projection snapshot (the store syncs
/// the log before writing one, so a snapshot never covers what a crash could take away).
///
/// Recovery holds the log to it as it holds the log to its index files and checkpoints
/// (Docs/Durability.md, "What counts as torn"): a writer's open never truncates positions a
/// record of the current epoch says were acknowledged, and refuses instead, with the file,
/// offset and position, leaving the store untouched. Records of an earlier epoch describe a
/// history that was cut since, legitimately, and bind nothing.
public struct AcknowledgedPosition: Hashable, Sendable {
    /// The first position the record does not cover: every position below it was acknowledged.
    public var nextPosition: LogPosition
    /// The log's history epoch when the record was written.
    public var historyEpoch: UInt64
    /// The file that holds the record (a snapshot's path): named in errors.
    public var file: String

    /// Creates a record.
    /// - Parameters:
    ///   - nextPosition: Every position below it was acknowledged.
    ///   - historyEpoch: The log's history epoch when it was written.
    ///   - file: The file that holds it, named in errors.
    public init(nextPosition: LogPosition, historyEpoch: UInt64, file: String) {
        self.nextPosition = nextPosition
        self.historyEpoch = historyEpoch
        self.file = file
    }
}

extension AcknowledgedPosition {
    /// The torn-tail rule's third source, in one place for recovery (``SegmentedLog/open(at:configuration:)``)
    /// and verification (``SegmentedLog/verify(at:acknowledgedElsewhere:decodingRecords:)``): of
    /// `records`, the one of history epoch `epoch` that reaches furthest past `position`, if any.
    /// A tail that starts at `position` is damage, never torn, when this is not `nil`.
    /// - Parameters:
    ///   - records: What is known acknowledged outside the log (snapshot headers).
    ///   - epoch: The log's current history epoch; `nil` (no store file yet): nothing binds.
    ///   - position: The first position of the tail in question.
    /// - Complexity: O(*n*) for *n* records.
    package static func furthest(
        in records: [AcknowledgedPosition], epoch: UInt64?, beyond position: LogPosition
    ) -> AcknowledgedPosition? {
        guard let epoch else { return nil }
        return records
            .filter { $0.historyEpoch == epoch && $0.nextPosition > position }
            .max { $0.nextPosition < $1.nextPosition }
    }
}
