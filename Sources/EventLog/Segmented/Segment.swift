/// One segment file of a ``SegmentedLog``: `<base>.log`, the batches from its base position on,
/// with its side files (`<base>.idx` once sealed, `<base>.ckpt` after a clean close while it is
/// active). The byte layouts are in Docs/FileFormat.md.
///
/// Everything about one segment is this type's, one topic a file, so that a rule about a
/// segment lives in one place:
/// - `Segment.swift`: what the segment holds, as the log's readers see it (this value);
/// - `Segment+Name.swift`: its file names, and finding the segments of a directory;
/// - `Segment+Header.swift`: writing and checking its header; a creation cut short by a crash;
/// - `Segment+Active.swift`: the writer's handle on the active segment (``Segment/Active``):
///   creation, appends (growing the preallocation), syncs, sealing, trimming at close;
/// - `Segment+Index.swift`: the index side file a sealed segment is loaded through;
/// - `Segment+Checkpoint.swift`: the active segment's checkpoint and the recovery rule it holds
///   recovery to.
///
/// The log keeps one value per segment file in ``LogState``, under its lock; the writer holds
/// the active segment's ``Active`` handle outside it and publishes each written batch here
/// (one lock per write). Recovery (``LogLoader``) builds these values from index side files
/// and scans.
struct Segment: Sendable {
    /// The first position the segment holds; also its file name.
    let basePosition: LogPosition
    /// The segment file, open for reading (and for writing, in a writable log).
    let file: OpenFile
    /// Its batches, in position order.
    var batches: [BatchLocation]
    /// One past its last record; the next segment's base once it is sealed.
    var nextPosition: LogPosition
    var minTimestamp: Int64?
    var maxTimestamp: Int64?
    /// Complete, with an index side file: no batch is added to it any more.
    var sealed: Bool
    /// The end offset of its last batch (the header's end when it holds none): where the next
    /// batch goes.
    var dataEnd: Int64

    /// A segment holding no batch yet: its header only.
    init(file: OpenFile, basePosition: LogPosition, sealed: Bool = false) {
        self.basePosition = basePosition
        self.file = file
        self.batches = []
        self.nextPosition = basePosition
        self.sealed = sealed
        self.dataEnd = Int64(SegmentHeader.size)
    }

    /// The segment as a walk over its file found it.
    init(file: OpenFile, scan: SegmentScan, sealed: Bool) {
        self.basePosition = scan.basePosition
        self.file = file
        self.batches = scan.batches
        self.nextPosition = scan.nextPosition
        self.minTimestamp = scan.minTimestamp
        self.maxTimestamp = scan.maxTimestamp
        self.sealed = sealed
        self.dataEnd = scan.dataEnd
    }

    /// Records a batch written after the last one.
    mutating func add(_ batch: BatchLocation) {
        batches.append(batch)
        nextPosition = batch.endPosition
        minTimestamp = min(minTimestamp ?? batch.minTimestamp, batch.minTimestamp)
        maxTimestamp = max(maxTimestamp ?? batch.maxTimestamp, batch.maxTimestamp)
        dataEnd = batch.endOffset
    }
}
