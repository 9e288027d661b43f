// libFuzzer target over the EventLog decoders. Built by scripts/fuzz.sh together with the
// EventLog sources into one module, so internal APIs are reachable (the primitives they share
// with the other layers, KernelPrimitives, are built first as their own module).
//
// The first input byte picks what the rest is fed to; every decoder must return a result or
// throw a LogError for any bytes: never crash, never read out of bounds, never allocate
// without bound.
#if canImport(Glibc)
import Glibc
#endif
import KernelPrimitives

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let selector = data[0]
    let input = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    switch selector % 4 {
    case 0: fuzzBatch(input)
    case 1: fuzzPayload(input)
    case 2: fuzzIndex(input)
    default: fuzzSegmentFile(input)
    }
    return 0
}

/// A batch: header decode, then (if the header is valid) the payload that follows it.
private func fuzzBatch(_ input: UnsafeRawBufferPointer) {
    guard input.count >= BatchHeader.size else { return }
    guard case .success(let header) = BatchHeader.decode(input) else { return }
    let rest = UnsafeRawBufferPointer(rebasing: input[BatchHeader.size...])
    guard rest.count >= Int(header.storedLength) else { return }
    let stored = UnsafeRawBufferPointer(rebasing: rest[0..<Int(header.storedLength)])
    var scratch: [UInt8] = []
    _ = try? BatchPayload.forEachRecord(in: stored, header: header, scratch: &scratch) { _ in true }
}

/// A payload under a header built from the first 16 bytes (so the checksums need not be
/// guessed): codec, record count, uncompressed length.
private func fuzzPayload(_ input: UnsafeRawBufferPointer) {
    guard input.count >= 16 else { return }
    let codec: CompressionCodec = input[0] & 1 == 0 ? .none : .lz4
    let count = UInt32(input.loadLittleEndian(at: 4, as: UInt16.self)) + 1
    let payload = UnsafeRawBufferPointer(rebasing: input[16...])
    // Bound what a fuzzed length can make the decoder allocate.
    let uncompressed = codec == .none ? UInt32(payload.count) : min(input.loadLittleEndian(at: 8, as: UInt32.self), 1 << 20)
    let header = BatchHeader(codec: codec, firstPosition: input.loadLittleEndian(at: 8, as: UInt64.self) >> 8,
                             recordCount: count, storedLength: UInt32(payload.count), uncompressedLength: uncompressed,
                             payloadChecksum: 0, minTimestamp: Int64(bitPattern: UInt64(input[2]) << 56), maxTimestamp: .max)
    var scratch: [UInt8] = []
    _ = try? BatchPayload.forEachRecord(in: payload, header: header, scratch: &scratch) { record in
        // Touch every byte the decoder hands out.
        var sum: UInt8 = 0
        for byte in record.payload { sum &+= byte }
        return sum != 1 || true
    }
}

private func fuzzIndex(_ input: UnsafeRawBufferPointer) {
    _ = SegmentIndexFile.decode(input)
}

/// A whole segment file: the scanner (as recovery and verify run it) over the input written
/// to a temporary file; with a valid segment header prepended half the time, so that the
/// fuzzer reaches the batch walk without having to find a CRC first.
private func fuzzSegmentFile(_ input: UnsafeRawBufferPointer) {
    var bytes: [UInt8] = []
    if let first = input.first, first & 1 == 1 {
        bytes = SegmentHeader(basePosition: 0).encoded()
        bytes.append(contentsOf: input.dropFirst())
    } else {
        bytes.append(contentsOf: input)
    }
    let path = temporaryPath()
    let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else { return }
    _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    close(fd)
    defer { unlink(path) }
    guard let file = try? OpenFile.open(path, flags: O_RDONLY) else { return }
    for decodeRecords in [false, true] {
        var scanner = SegmentScanner(file: file, basePosition: 0)
        scanner.decodeRecords = decodeRecords
        _ = try? scanner.scan()
    }
}

private func temporaryPath() -> String {
    let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
    return base + "/eventlog-fuzz-\(getpid()).log"
}
