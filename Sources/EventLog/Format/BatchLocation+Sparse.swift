extension BatchLocation {
    /// Whether the batch at this location is sparse (compaction rewrote it: Docs/FileFormat.md,
    /// "Sparse batches"), read from its header in `file`: the one place that answers it, for
    /// the log's readers and for backups alike.
    /// - Parameter file: The segment file the location lies in.
    /// - Throws: ``LogError`` with code `corruption` (and the file, offset and position) when the
    ///   header does not decode as the batch the index lists; the read's error otherwise.
    /// - Complexity: One read of a batch header.
    func isSparse(in file: OpenFile) throws(LogError) -> Bool {
        let bytes = try file.read(fromAbsoluteOffset: offset, count: BatchHeader.size)
        guard bytes.count == BatchHeader.size, case .success(let header) = bytes.withUnsafeBytes({ BatchHeader.decode($0) }),
              header.firstPosition == firstPosition else {
            throw LogError(.corruption, "the batch header at this offset does not decode as the index lists it",
                           file: file.path, offset: offset, position: firstPosition)
        }
        return header.isSparse
    }
}
