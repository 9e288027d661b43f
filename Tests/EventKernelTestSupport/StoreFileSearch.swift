public import Foundation
import EventKernel

/// The files under `directory` (segments, side files, snapshots, consumers' files, everything)
/// whose bytes hold `needle`, a snapshot's body searched decompressed: what the compaction
/// tests use to show that no byte of a purged id is left in a store. (A segment's batches are
/// searched as stored: the tests write their stores uncompressed, so an id is there as its bytes.)
/// - Returns: The names of the files that hold it.
/// - Throws: When a file cannot be read, or a snapshot file does not decode.
public func files(in directory: URL, holding needle: some Sequence<UInt8>) throws -> [String] {
    let bytes = Data(needle)
    var found: [String] = []
    let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey])
    while let url = walker?.nextObject() as? URL {
        guard (try url.resourceValues(forKeys: [.isRegularFileKey])).isRegularFile == true else { continue }
        let contents = try Data(contentsOf: url)
        var held = contents.range(of: bytes) != nil
        if url.pathExtension == "snap" {
            let snapshot = try SnapshotFile(decoding: Array(contents))
            held = held || Data(snapshot.body).range(of: bytes) != nil
        }
        if held { found.append(url.lastPathComponent) }
    }
    return found
}
