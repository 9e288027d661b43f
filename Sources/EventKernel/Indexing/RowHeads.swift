import Foundation

/// The rows' heads (``RowHead``: id, version, sequence), by slot, in 32 bytes a row while every
/// id is a UUID (its 16 bytes, version, sequence), in 40 (``RowHead``, whose ``EntityID`` is 24
/// bytes for its 16-byte UUID or 16-byte `String` and its case) from the first string id on,
/// until the table is restored again.
///
/// Why: a head was the third largest part of the generic engine's memory per row after the
/// entity and the composite index (`BenchProbe generic-activities`: 40 of 266 bytes), 8 of them
/// an enum's tag and its padding. Readers see every head as a ``RowHead``.
struct RowHeads: RandomAccessCollection, ExpressibleByArrayLiteral, Sendable {
    /// A head whose id is a UUID: its bytes as two words.
    struct UUIDHead: Sendable {
        var high: UInt64
        var low: UInt64
        var version: UInt64
        var sequence: UInt64
    }

    /// The heads while every id is a UUID; empty otherwise.
    private(set) var uuids: [UUIDHead] = []
    /// The heads once an id is a string; empty before.
    private(set) var wide: [RowHead] = []
    /// Whether the heads are ``wide``.
    private(set) var isWide = false

    init() {}

    init(_ heads: some Sequence<RowHead>) {
        for head in heads { append(head) }
    }

    init(arrayLiteral heads: RowHead...) {
        self.init(heads)
    }

    var startIndex: Int { 0 }
    var endIndex: Int { isWide ? wide.count : uuids.count }

    @inline(__always)
    subscript(slot: Int) -> RowHead {
        get {
            if isWide { return wide[slot] }
            let head = uuids[slot]
            return RowHead(id: .uuid(Self.uuid(head.high, head.low)), version: head.version, sequence: head.sequence)
        }
        set {
            if !isWide, case .string = newValue.id { widen() }
            if isWide { wide[slot] = newValue } else { uuids[slot] = Self.packed(newValue) }
        }
    }

    /// The version of `slot` (without building its id).
    @inline(__always)
    func version(_ slot: Int) -> UInt64 { isWide ? wide[slot].version : uuids[slot].version }

    /// The sequence of `slot` (without building its id).
    @inline(__always)
    func sequence(_ slot: Int) -> UInt64 { isWide ? wide[slot].sequence : uuids[slot].sequence }

    /// Sets the version of `slot`.
    mutating func setVersion(_ slot: Int, _ version: UInt64) {
        if isWide { wide[slot].version = version } else { uuids[slot].version = version }
    }

    /// Whether the id of `slot` is `id` (without building it, for a UUID).
    @inline(__always)
    func holds(_ slot: Int, _ id: EntityID) -> Bool {
        if isWide { return wide[slot].id == id }
        guard case .uuid(let uuid) = id else { return false }
        let (high, low) = Self.words(uuid)
        let head = uuids[slot]
        return head.high == high && head.low == low
    }

    mutating func append(_ head: RowHead) {
        if !isWide, case .string = head.id { widen() }
        if isWide { wide.append(head) } else { uuids.append(Self.packed(head)) }
    }

    mutating func removeLast() {
        if isWide { wide.removeLast() } else { uuids.removeLast() }
    }

    mutating func reserveCapacity(_ capacity: Int) {
        if isWide { wide.reserveCapacity(capacity) } else { uuids.reserveCapacity(capacity) }
    }

    /// Reserves room for `capacity` heads in the layout they will need: 40-byte heads from the
    /// start when `stringIDs` (some head to come has a string id). Reserving UUID heads and
    /// widening at the first string id allocated the heads twice.
    mutating func reserveCapacity(_ capacity: Int, stringIDs: Bool) {
        if stringIDs && !isWide { widen() }
        reserveCapacity(capacity)
    }

    /// Moves every head to ``RowHead``s: a string id is coming.
    private mutating func widen() {
        var heads: [RowHead] = []
        heads.reserveCapacity(Swift.max(uuids.capacity, uuids.count + 1))
        for i in uuids.indices { heads.append(self[i]) }
        wide = heads
        uuids = []
        isWide = true
    }

    @inline(__always)
    private static func packed(_ head: RowHead) -> UUIDHead {
        guard case .uuid(let uuid) = head.id else { preconditionFailure("RowHeads: a string id in the UUID layout") }
        let (high, low) = words(uuid)
        return UUIDHead(high: high, low: low, version: head.version, sequence: head.sequence)
    }

    @inline(__always)
    private static func words(_ uuid: UUID) -> (UInt64, UInt64) {
        withUnsafeBytes(of: uuid.uuid) { ($0.loadUnaligned(fromByteOffset: 0, as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) }
    }

    @inline(__always)
    private static func uuid(_ high: UInt64, _ low: UInt64) -> UUID {
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { out in
            out.storeBytes(of: high, toByteOffset: 0, as: UInt64.self)
            out.storeBytes(of: low, toByteOffset: 8, as: UInt64.self)
        }
        return UUID(uuid: bytes)
    }
}
