import Foundation

/// Stream → last committed version, compact and fast for UUID ids.
///
/// The store keeps one entry per stream ever written (deleted entities too: a re-add must know
/// the version), so at a million entities a `Dictionary<StreamID, UInt64>` costs ~80 bytes an
/// entry and its SipHash hashing dominated replay profiles. Streams with UUID ids, the common
/// case, live instead in an open-addressing table of 24-byte slots: the id's two words and a
/// tagged word holding the version (low 48 bits; 0 means empty, since committed versions start
/// at 1) and the entity type's interned code (high 16 bits). Slots are probed linearly from a
/// multiplicative hash of the id and the type code, sized by "fastrange" reduction so that
/// capacity grows by 1.5x rather than doubling: about 30-40 bytes a stream. Streams with string
/// ids use a dictionary.
///
/// Building from a snapshot is linear at any size: ``reserveCapacity(_:)`` sizes the table from
/// the snapshot's count first, and because fastrange is monotonic in the hash, entries written
/// in one table's slot order arrive in ascending home-slot order for a table of any capacity,
/// which linear probing places with no more displacement than a random order would.
///
/// The stored properties are internal rather than private for `StreamVersionMap+Invariants.swift`.
struct StreamVersionMap: Sendable {
    struct Slot {
        var high: UInt64
        var low: UInt64
        var tagged: UInt64
    }

    /// The largest version a stream can reach (48 bits: 2.8e14 events in one stream).
    static let maxVersion: UInt64 = (1 << 48) - 1
    /// The most entity types one store can hold.
    static let maxEntityTypes = 1 << 16

    private(set) var slots: [Slot] = []
    private(set) var uuidCount = 0
    private(set) var strings: [StreamID: UInt64] = [:]
    private(set) var typeCodes: [ExactString: UInt64] = [:]
    private(set) var typeNames: [String] = []
    /// The last entity type looked up: a batch or a replay mostly repeats one type.
    private(set) var lastType: (name: String, code: UInt64)?
    static let maxLoad = 0.85

    var count: Int { uuidCount + strings.count }

    init() {}

    mutating func reserveCapacity(_ minimumCapacity: Int) {
        let needed = Int((Double(minimumCapacity) / Self.maxLoad).rounded(.up)) + 1
        if needed > slots.count { rehash(capacity: needed) }
    }

    /// The interned code of an entity type, or `nil` if no stream of that type has an entry.
    func code(of entityType: String) -> UInt64? {
        if let lastType, lastType.name.hasSameUTF8(as: entityType) { return lastType.code }
        return typeCodes[ExactString(entityType)]
    }

    private mutating func intern(_ entityType: String) -> UInt64 {
        if let code = code(of: entityType) {
            lastType = (entityType, code)
            return code
        }
        precondition(typeNames.count < Self.maxEntityTypes, "more than \(Self.maxEntityTypes) entity types in one store")
        let code = UInt64(typeNames.count)
        typeNames.append(entityType)
        typeCodes[ExactString(entityType)] = code
        lastType = (entityType, code)
        return code
    }

    subscript(stream: StreamID) -> UInt64? {
        get {
            switch stream.entityID {
            case .string: return strings[stream]
            case .uuid(let uuid):
                guard !slots.isEmpty, let code = code(of: stream.entityType) else { return nil }
                let (high, low) = Self.words(uuid)
                return slots.withUnsafeBufferPointer { buffer in
                    var index = Self.home(high, low, code, buffer.count)
                    while true {
                        let slot = buffer[index]
                        if slot.tagged == 0 { return nil }
                        if slot.high == high && slot.low == low && slot.tagged >> 48 == code { return slot.tagged & Self.maxVersion }
                        index += 1
                        if index == buffer.count { index = 0 }
                    }
                }
            }
        }
        set {
            // Versions are never removed: the store only records and raises them.
            guard let version = newValue, version > 0 else { return }
            precondition(version <= Self.maxVersion, "stream \(stream) exceeds version \(Self.maxVersion)")
            let code = intern(stream.entityType)
            switch stream.entityID {
            case .string: strings[stream] = version
            case .uuid(let uuid):
                if Double(uuidCount + 1) > Double(slots.count) * Self.maxLoad {
                    rehash(capacity: max(16, slots.count + slots.count / 2))
                }
                let (high, low) = Self.words(uuid)
                if insert(high, low, code << 48 | version) { uuidCount += 1 }
            }
            _invariantCheck(after: stream)
        }
    }

    /// Removes every stream of `entityType` (their versions have a source elsewhere from now on).
    /// - Complexity: O(n) for n entries: the table is rebuilt once.
    mutating func removeEntries(ofEntityType entityType: String) {
        guard let code = code(of: entityType) else { return }
        strings = strings.filter { !$0.key.entityType.hasSameUTF8(as: entityType) }
        let old = slots
        let kept = old.reduce(0) { $0 + ($1.tagged != 0 && $1.tagged >> 48 != code ? 1 : 0) }
        guard kept != uuidCount else { return }
        slots = []
        uuidCount = 0
        reserveCapacity(kept)
        for slot in old where slot.tagged != 0 && slot.tagged >> 48 != code {
            _ = insert(slot.high, slot.low, slot.tagged)
            uuidCount += 1
        }
        _invariantCheck(after: nil)
    }

    /// Removes the entries of `streams` (compaction forgot them: ``VersionTable/forget(_:)``).
    /// - Complexity: O(n) for n entries: the UUID table is rebuilt once when any is there.
    mutating func removeEntries(_ streams: Set<StreamID>) {
        guard !streams.isEmpty else { return }
        var uuids: Set<[UInt64]> = []
        for stream in streams {
            switch stream.entityID {
            case .string: strings[stream] = nil
            case .uuid(let uuid):
                guard let code = code(of: stream.entityType) else { continue }
                let (high, low) = Self.words(uuid)
                uuids.insert([high, low, code])
            }
        }
        guard !uuids.isEmpty else { return }
        let old = slots
        slots = []
        uuidCount = 0
        reserveCapacity(old.count { $0.tagged != 0 })
        for slot in old where slot.tagged != 0 && !uuids.contains([slot.high, slot.low, slot.tagged >> 48]) {
            _ = insert(slot.high, slot.low, slot.tagged)
            uuidCount += 1
        }
        _invariantCheck(after: nil)
    }

    /// Calls `body` with every entry as (entity type code, id, version): UUID streams in slot
    /// order, then string streams. Codes index ``typeNames``.
    func forEach(_ body: (Int, EntityID, UInt64) throws -> Void) rethrows {
        for slot in slots where slot.tagged != 0 {
            try body(Int(slot.tagged >> 48), .uuid(Self.uuid(slot.high, slot.low)), slot.tagged & Self.maxVersion)
        }
        for (stream, version) in strings {
            try body(Int(code(of: stream.entityType)!), stream.entityID, version)
        }
    }

    /// Inserts or overwrites; returns whether the stream was new.
    private mutating func insert(_ high: UInt64, _ low: UInt64, _ tagged: UInt64) -> Bool {
        let capacity = slots.count
        let code = tagged >> 48
        return slots.withUnsafeMutableBufferPointer { buffer in
            var index = Self.home(high, low, code, capacity)
            while true {
                if buffer[index].tagged == 0 {
                    buffer[index] = Slot(high: high, low: low, tagged: tagged)
                    return true
                }
                if buffer[index].high == high && buffer[index].low == low && buffer[index].tagged >> 48 == code {
                    buffer[index].tagged = tagged
                    return false
                }
                index += 1
                if index == capacity { index = 0 }
            }
        }
    }

    private mutating func rehash(capacity: Int) {
        let old = slots
        slots = [Slot](repeating: Slot(high: 0, low: 0, tagged: 0), count: capacity)
        for slot in old where slot.tagged != 0 { _ = insert(slot.high, slot.low, slot.tagged) }
        _invariantCheck(after: nil)
    }

    @inline(__always)
    static func home(_ high: UInt64, _ low: UInt64, _ code: UInt64, _ capacity: Int) -> Int {
        // Mixing both words keeps time-ordered ids (UUIDv7, whose high word is a clock) spread;
        // the type code separates `Thread/x` from `Post/x`.
        let hash = (high ^ (low &* 0x9E37_79B9_7F4A_7C15) ^ (code &* 0xD6E8_FEB8_6659_FD93)) &* 0xBF58_476D_1CE4_E5B9
        return Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(capacity)).high)
    }

    @inline(__always)
    static func words(_ uuid: UUID) -> (UInt64, UInt64) {
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
