import CCRC32C
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every batch header,
/// batch payload, segment index and snapshot.
///
/// Written here rather than taken from a library: none of the packages this project may depend
/// on ships CRC-32C (swift-crypto has hashes, compress-nio has CRC-32/IEEE only), and the log
/// needs exactly this one function. It is the checksum of iSCSI, ext4, Btrfs, RocksDB and
/// Kafka's record batches, chosen for its error-detection properties on storage data.
/// It runs on the processor's CRC-32C instruction where there is one (SSE 4.2 on x86-64, the
/// CRC32 extension on AArch64: the `CCRC32C` target, chosen at run time, three streams at once),
/// and otherwise on "slicing-by-8" (eight 256-entry tables, eight bytes per step), about
/// 1-2 GB/s in portable code. The checksum is on every path that reads or copies the log (each
/// batch's payload is checked before it is decompressed; a backup checks what it copies), so
/// its speed is the CPU cost of verifying, replaying and backing up a store.
///
/// The check value `CRC32C.checksum("123456789")` is `0xE3069283`.
package enum CRC32C {
    /// Whether ``checksum(_:continuing:)`` runs on the processor's instruction: when the
    /// processor has one, unless the environment variable `EVENTKERNEL_CRC32C=tables` asks for
    /// the tables (a diagnostic: the benchmarks compare both in one build).
    package static let usesHardware = eventkernel_crc32c_hardware_available() != 0
        && getenv("EVENTKERNEL_CRC32C").map { String(cString: $0) } != "tables"

    /// The checksum of `bytes`, continuing from `crc` (pass a previous result to checksum data
    /// in pieces; the default starts a new checksum).
    /// - Complexity: O(n).
    package static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard usesHardware, bytes.count > 0, let base = bytes.baseAddress else { return softwareChecksum(bytes, continuing: crc) }
        return ~eventkernel_crc32c_hardware_update(~crc, base, bytes.count)
    }

    /// The checksum of `bytes` with the tables alone (what ``checksum(_:continuing:)`` does on a
    /// processor without the instruction; tests compare the two).
    /// - Complexity: O(n).
    package static func softwareChecksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        var c = ~crc
        var index = 0
        let count = bytes.count
        guard count > 0, let base = bytes.baseAddress else { return crc }
        tables.withUnsafeBufferPointer { t in
            while count - index >= 8 {
                let word = base.loadUnaligned(fromByteOffset: index, as: UInt64.self).littleEndian
                let low = UInt32(truncatingIfNeeded: word) ^ c
                let high = UInt32(truncatingIfNeeded: word >> 32)
                c = t[7 * 256 + Int(low & 0xFF)]
                    ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((low >> 16) & 0xFF)]
                    ^ t[4 * 256 + Int(low >> 24)]
                    ^ t[3 * 256 + Int(high & 0xFF)]
                    ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((high >> 16) & 0xFF)]
                    ^ t[Int(high >> 24)]
                index += 8
            }
            while index < count {
                let byte = base.load(fromByteOffset: index, as: UInt8.self)
                c = t[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8)
                index += 1
            }
        }
        return ~c
    }

    /// The checksum of a byte sequence.
    package static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
        if let result = bytes.withContiguousStorageIfAvailable({ checksum(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return Array(bytes).withUnsafeBytes { checksum($0) }
    }

    /// The checksum of a string's UTF-8 bytes.
    package static func checksum(_ string: String) -> UInt32 {
        checksum(Array(string.utf8))
    }

    /// The checksum of `a` followed by `b`, from the checksums of each and the length of `b`:
    /// what a copy that checks its pieces (a backup checks every batch of a segment against
    /// its header) gives for the whole file without reading it a second time.
    ///
    /// The register after `b` is linear in the register before it, so
    /// `checksum(a + b) = first · x^(8·count) mod P  XOR  second` (zlib's `crc32_combine`; the
    /// initial and final inversions cancel). In the `CCRC32C` target, beside the multiplication
    /// modulo P that the instruction's three streams are combined with: one implementation.
    /// - Parameters:
    ///   - first: The checksum of `a`.
    ///   - second: The checksum of `b`.
    ///   - count: The length of `b` in bytes.
    /// - Complexity: O(log count) multiplications of 32 steps each.
    package static func combine(_ first: UInt32, _ second: UInt32, secondCount count: Int) -> UInt32 {
        precondition(count >= 0, "a length is not negative")
        return eventkernel_crc32c_combine(first, second, count)
    }

    private static let tables: [UInt32] = {
        let polynomial: UInt32 = 0x82F6_3B78
        var t = [UInt32](repeating: 0, count: 8 * 256)
        for n in 0..<256 {
            var c = UInt32(n)
            for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ polynomial : c >> 1 }
            t[n] = c
        }
        for n in 0..<256 {
            for k in 1..<8 {
                let previous = t[(k - 1) * 256 + n]
                t[k * 256 + n] = t[Int(previous & 0xFF)] ^ (previous >> 8)
            }
        }
        return t
    }()
}
