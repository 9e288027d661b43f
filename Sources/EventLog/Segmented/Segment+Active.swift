#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KernelPrimitives

extension Segment {
    /// The writer's handle on the active segment: where the next batch goes, and how far the
    /// file's space is reserved.
    ///
    /// Owned by the leader of a group-commit round (``GroupCommitWriter``), never shared: what
    /// it appends reaches the log's readers when the writer publishes it to the segment's
    /// ``Segment`` value.
    struct Active: Sendable {
        let basePosition: LogPosition
        let file: OpenFile
        /// The end of the last batch written: where the next one goes.
        private(set) var dataEnd: Int64
        /// One past the last record written: the log's next position.
        private(set) var nextPosition: LogPosition
        /// How many batches the segment holds.
        private(set) var batchCount: Int
        /// The file's length reserved with `fallocate` (its length when nothing is reserved).
        private(set) var preallocatedTo: Int64
        /// The store directory, where the side files go.
        let directory: String
        private let segmentSize: Int64
        private let preallocate: Bool
        private let preallocationStep: Int64
        let io: any LogFileIO

        /// The writer's handle on the last segment of a recovered log (one that is not sealed),
        /// its space reserved a step ahead of its data when the configuration asks for it.
        /// - Throws: ``LogError`` when the file cannot be sized, reserved or synced.
        init(resuming segment: Segment, directory: String, configuration: SegmentedLog.Configuration) throws(LogError) {
            self.init(segment: segment, preallocatedTo: try segment.file.size(), directory: directory, configuration: configuration)
            let target = reservation(after: dataEnd)
            if preallocate && preallocatedTo < target {
                try io.preallocate(descriptor: file.descriptor, path: file.path, length: target)
                preallocatedTo = target
                // Commit the new extents now: otherwise the first append's fdatasync pays for the
                // file-system journal commit (milliseconds), not just for its data.
                try io.synchronize(descriptor: file.descriptor, path: file.path)
            }
        }

        fileprivate init(segment: Segment, preallocatedTo: Int64, directory: String, configuration: SegmentedLog.Configuration) {
            self.basePosition = segment.basePosition
            self.file = segment.file
            self.dataEnd = segment.dataEnd
            self.nextPosition = segment.nextPosition
            self.batchCount = segment.batches.count
            self.preallocatedTo = preallocatedTo
            self.directory = directory
            self.segmentSize = Int64(configuration.segmentSize)
            self.preallocate = configuration.preallocate
            self.preallocationStep = Int64(configuration.preallocationStep)
            self.io = configuration.fileIO
        }

        /// How far the space is reserved once data reaches `end`: one step past it, never past
        /// the segment size (a segment at its size takes no further batch), and at least `end`.
        /// The one rule for a new, a resumed and a growing segment.
        func reservation(after end: Int64) -> Int64 {
            Segment.Active.reservation(after: end, step: preallocationStep, segmentSize: segmentSize)
        }

        static func reservation(after end: Int64, step: Int64, segmentSize: Int64) -> Int64 {
            // Compared before adding: a step of `Int.max` ("a whole segment at once") must not
            // overflow.
            step >= segmentSize - end ? max(end, segmentSize) : end + step
        }
    }

    /// Creates a new, empty segment starting at `base`: header, preallocation, file and
    /// directory sync. The file must not exist yet.
    /// - Returns: The readers' view of the new segment and the writer's handle on it.
    /// - Throws: ``LogError`` naming the file (or the directory) that failed.
    static func create(base: LogPosition, directory: String, configuration: SegmentedLog.Configuration) throws(LogError) -> (segment: Segment, active: Active) {
        let io = configuration.fileIO
        let path = directory + "/" + Name.segment(base)
        let file = try OpenFile.open(path, flags: O_RDWR | O_CREAT | O_EXCL)
        try writeHeader(base: base, to: file, io: io)
        var preallocated = Int64(SegmentHeader.size)
        if configuration.preallocate {
            let target = Active.reservation(after: preallocated, step: Int64(configuration.preallocationStep),
                                            segmentSize: Int64(configuration.segmentSize))
            try io.preallocate(descriptor: file.descriptor, path: path, length: target)
            preallocated = max(preallocated, try file.size())
        }
        try io.synchronize(descriptor: file.descriptor, path: path)
        try StoreDirectory.synchronize(directory, io: io)
        let segment = Segment(file: file, basePosition: base)
        return (segment, Active(segment: segment, preallocatedTo: preallocated, directory: directory, configuration: configuration))
    }
}

extension Segment.Active {
    /// Whether the segment must be sealed before a batch of `batchBytes` is added after
    /// `pendingBatches` batches of `pendingBytes` already bound for it: when it would then
    /// exceed the segment size, unless it would hold nothing else (a batch larger than a
    /// segment gets a segment of its own).
    func mustSeal(beforeAdding batchBytes: Int, pendingBytes: Int, pendingBatches: Int) -> Bool {
        dataEnd + Int64(pendingBytes + batchBytes) > segmentSize && (batchCount > 0 || pendingBatches > 0)
    }

    /// Writes `bytes`, the encoded `batches`, after the segment's last batch, growing the
    /// reserved space first when they would run past it, then with `synchronize` makes them
    /// durable (`fdatasync`). The segment's end advances only once all of that succeeded.
    /// - Parameters:
    ///   - bytes: The batches' bytes, back to back.
    ///   - batches: Where they are: the first at ``dataEnd``, the last ending at its end.
    ///   - synchronize: Whether to sync the data (the synced durability policy).
    /// - Throws: ``LogError`` (``LogError/Code/io``) naming the segment file.
    mutating func append(_ bytes: [UInt8], batches: [BatchLocation], synchronize: Bool) throws(LogError) {
        let end = dataEnd + Int64(bytes.count)
        if preallocate && end > preallocatedTo {
            // Grow a step past this write so that the next writes again land in reserved space.
            // A growth that fails (a disk too full for a step, not for this write) wrote nothing:
            // the write and its sync decide the append, and the next write tries again.
            let target = reservation(after: end)
            do throws(LogError) {
                try io.preallocate(descriptor: file.descriptor, path: file.path, length: target)
                preallocatedTo = target
            } catch {}
        }
        try bytes.withBytes { (raw) throws(LogError) in
            try io.writeAll(raw, toAbsoluteOffset: dataEnd, descriptor: file.descriptor, path: file.path)
        }
        if synchronize { try synchronizeData() }
        dataEnd = end
        batchCount += batches.count
        if let last = batches.last { nextPosition = last.endPosition }
    }

    /// Makes what was written durable (`fdatasync`).
    func synchronizeData() throws(LogError) {
        try io.synchronizeData(descriptor: file.descriptor, path: file.path)
    }

    /// Seals the segment: trims the reserved space after its last batch, syncs it, writes its
    /// index side file and removes the checkpoint an earlier clean close left (the index
    /// supersedes it). The next segment starts at ``nextPosition``.
    /// - Parameter batches: The segment's batches, as published to its readers.
    /// - Throws: ``LogError`` naming the file that failed.
    func seal(batches: [BatchLocation]) throws(LogError) {
        try io.truncate(descriptor: file.descriptor, path: file.path, length: dataEnd)
        try io.synchronize(descriptor: file.descriptor, path: file.path)
        try Segment.writeIndex(index(of: batches), directory: directory, io: io)
        try StoreDirectory.remove(directory + "/" + Segment.Name.checkpoint(basePosition))
    }

    /// Trims the reserved space after the last batch (at close), so that a closed store takes
    /// only the space it uses, and syncs the file.
    mutating func trimPreallocation() throws(LogError) {
        guard preallocatedTo > dataEnd else { return }
        try io.truncate(descriptor: file.descriptor, path: file.path, length: dataEnd)
        try io.synchronize(descriptor: file.descriptor, path: file.path)
        preallocatedTo = dataEnd
    }

    /// The side-file record of the segment holding `batches` (an index, or a checkpoint).
    func index(of batches: [BatchLocation]) -> SegmentIndexFile {
        SegmentIndexFile(basePosition: basePosition, nextPosition: nextPosition, dataLength: dataEnd, batches: batches)
    }
}
