/// A composite index key. The first two components are stored inline and only a third and
/// later one go to a heap array: every comparison of a binary search copies or borrows keys,
/// and a key whose components live behind a reference costs a retain, a release and usually a
/// cache miss per comparison (measured: `swift_retain` was the top symbol of the ledger's
/// inserts and queries while the second component of `(accountID, date)` lived in an array).
///
/// The stored properties are declared in this order so that `count` fills the padding after
/// `first` (an `IndexValue` is 17 bytes): 56 bytes a key, 72 an index entry, and inserts move
/// up to a chunk of entries.
struct IndexKey: Sendable {
    var first: IndexValue
    private let storedCount: UInt8
    /// `.null` when the key has one component.
    var second: IndexValue
    /// The components after the second, if any.
    var more: [IndexValue]?

    /// The number of components.
    var count: Int { Int(storedCount) }

    init(_ first: IndexValue) {
        self.first = first
        self.second = .null
        self.more = nil
        self.storedCount = 1
    }

    init(_ first: IndexValue, _ second: IndexValue) {
        self.first = first
        self.second = second
        self.more = nil
        self.storedCount = 2
    }

    init(_ values: [IndexValue]) {
        precondition(!values.isEmpty && values.count <= Int(UInt8.max), "an index key has 1 to 255 components")
        first = values[0]
        second = values.count > 1 ? values[1] : .null
        more = values.count > 2 ? Array(values[2...]) : nil
        storedCount = UInt8(values.count)
    }

    subscript(i: Int) -> IndexValue {
        switch i {
        case 0: first
        case 1: second
        default: more![i - 2]
        }
    }

    var values: [IndexValue] { (0..<count).map { self[$0] } }
}
