import Foundation

/// Flips one bit (0x10) of the byte at `offset` of a file: the unit of damage of the
/// corruption tests.
/// - Throws: When the file cannot be opened or written.
public func flipBit(in path: String, at offset: Int64) throws {
    let handle = try FileHandle(forUpdating: URL(filePath: path))
    defer { try? handle.close() }
    try handle.seek(toOffset: UInt64(offset))
    let byte = try handle.read(upToCount: 1) ?? Data([0])
    try handle.seek(toOffset: UInt64(offset))
    try handle.write(contentsOf: Data([byte[0] ^ 0x10]))
}
