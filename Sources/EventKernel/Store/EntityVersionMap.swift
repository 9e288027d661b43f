import Foundation

/// Entity id → last committed version, compact and fast for UUID ids.
///
/// The store keeps one entry per entity ever written (deleted ones too: a re-add must know the
/// version), so at a million entities a `Dictionary<EntityID, UInt64>` costs ~67 bytes an entry
/// and its SipHash hashing dominated replay profiles. UUID ids, the common case, live instead in
/// an open-addressing table of 24-byte slots (the id's two words and the version, 0 meaning
/// empty: committed versions start at 1), probed linearly from a multiplicative hash of the
/// id's bits, sized by "fastrange" reduction so that capacity grows by 1.5x rather than
/// doubling: about 30-40 bytes an entity. String ids use a dictionary.
struct EntityVersionMap: Sendable {
    private struct Slot {
        var high: UInt64
        var low: UInt64
        var version: UInt64
    }

    private var slots: [Slot] = []
    private var uuidCount = 0
    private var strings: [String: UInt64] = [:]
    private static let maxLoad = 0.85

    var count: Int { uuidCount + strings.count }

    init() {}

    mutating func reserveCapacity(_ minimumCapacity: Int) {
        let needed = Int((Double(minimumCapacity) / Self.maxLoad).rounded(.up)) + 1
        if needed > slots.count { rehash(capacity: needed) }
    }

    subscript(id: EntityID) -> UInt64? {
        get {
            switch id {
            case .string(let text): return strings[text]
            case .uuid(let uuid):
                guard !slots.isEmpty else { return nil }
                let (high, low) = Self.words(uuid)
                return slots.withUnsafeBufferPointer { buffer in
                    var index = Self.home(high, low, buffer.count)
                    while true {
                        let slot = buffer[index]
                        if slot.version == 0 { return nil }
                        if slot.high == high && slot.low == low { return slot.version }
                        index += 1
                        if index == buffer.count { index = 0 }
                    }
                }
            }
        }
        set {
            switch id {
            case .string(let text): strings[text] = newValue
            case .uuid(let uuid):
                // Versions are never removed: the store only records and raises them.
                guard let version = newValue, version > 0 else { return }
                if Double(uuidCount + 1) > Double(slots.count) * Self.maxLoad {
                    rehash(capacity: max(16, slots.count + slots.count / 2))
                }
                let (high, low) = Self.words(uuid)
                if insert(high, low, version) { uuidCount += 1 }
            }
        }
    }

    /// Calls `body` with every entry (in no particular order).
    func forEach(_ body: (EntityID, UInt64) throws -> Void) rethrows {
        for slot in slots where slot.version != 0 {
            try body(.uuid(Self.uuid(slot.high, slot.low)), slot.version)
        }
        for (text, version) in strings { try body(.string(text), version) }
    }

    /// Inserts or overwrites; returns whether the id was new.
    private mutating func insert(_ high: UInt64, _ low: UInt64, _ version: UInt64) -> Bool {
        let capacity = slots.count
        return slots.withUnsafeMutableBufferPointer { buffer in
            var index = Self.home(high, low, capacity)
            while true {
                if buffer[index].version == 0 {
                    buffer[index] = Slot(high: high, low: low, version: version)
                    return true
                }
                if buffer[index].high == high && buffer[index].low == low {
                    buffer[index].version = version
                    return false
                }
                index += 1
                if index == capacity { index = 0 }
            }
        }
    }

    private mutating func rehash(capacity: Int) {
        let old = slots
        slots = [Slot](repeating: Slot(high: 0, low: 0, version: 0), count: capacity)
        for slot in old where slot.version != 0 { _ = insert(slot.high, slot.low, slot.version) }
    }

    @inline(__always)
    private static func home(_ high: UInt64, _ low: UInt64, _ capacity: Int) -> Int {
        // Mixing both words keeps time-ordered ids (UUIDv7, whose high word is a clock) spread.
        let hash = (high ^ (low &* 0x9E37_79B9_7F4A_7C15)) &* 0xBF58_476D_1CE4_E5B9
        return Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(capacity)).high)
    }

    @inline(__always)
    private static func words(_ uuid: UUID) -> (UInt64, UInt64) {
        withUnsafeBytes(of: uuid.uuid) { ($0.loadUnaligned(fromByteOffset: 0, as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) }
    }

    private static func uuid(_ high: UInt64, _ low: UInt64) -> UUID {
        var value = uuid_t(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { raw in
            raw.storeBytes(of: high, toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: low, toByteOffset: 8, as: UInt64.self)
        }
        return UUID(uuid: value)
    }
}
